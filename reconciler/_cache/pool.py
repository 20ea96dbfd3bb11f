"""One reference-counted pool of informers, shared by every part that watches on use.

The child informers (``InformerManager``: one per child kind, the operator's label selector) and
the declared inputs (``InputWatch``: one per input kind and namespace, or per name for CRDs)
both start an informer when something first needs a scope and stop it when the last holder lets
go. They do it here, once: an :class:`InformerPool` keys its informers by :class:`Scope` (kind,
namespace, selectors), counts holders per subscriber, and fans each informer's events out to the
subscribers that hold its scope, so two subscribers that need the same scope share one list and
one watch. A subscriber (``subscribe``) is a part with its event and late-sync handlers; a
holder is whatever it counts by (a parent, or the subscriber itself).

An informer acquired with no holder (``acquire(scope, None, ...)``: a first read of a kind) runs
until a holder that held it lets go, or the pool stops. The first list of a new informer
dispatches no events (``initial_events=False``): objects that merely exist are no change.

Boundary: starting, sharing and stopping informers; what an event means is the subscriber's.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any

import attrs

from reconciler._base.clocks import Clock, RealClock
from reconciler._cache.informers import Informer, WatchOptions
from reconciler._client.protocol import ClusterClient

__all__ = ["InformerPool", "Scope", "ScopeEventHandler"]

_log = logging.getLogger(__name__)


@attrs.frozen(kw_only=True)
class Scope:
    """What one informer lists and watches: a kind, a namespace (``None``: every namespace, or a
    cluster-scoped kind) and the label and field selectors of its lists and watches."""

    api_version: str
    kind: str
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None


ScopeEventHandler = Callable[[Scope, str, "dict[str, Any] | None", "dict[str, Any]"], None]
"""A subscriber's handler: ``handler(scope, event_type, old, new)``."""


@attrs.frozen
class _Subscriber:
    on_event: ScopeEventHandler
    on_late_sync: Callable[[Scope], None] | None


class InformerPool:
    """Informers by :class:`Scope`, started on first acquire, stopped when the last holder
    releases; each scope's events go to the subscribers holding it. Thread-safe."""

    def __init__(self, client: ClusterClient, *, clock: Clock | None = None,
                 options: WatchOptions | None = None) -> None:
        self._client = client
        self._clock = clock or RealClock()
        # started on use: the first list fills the cache, it dispatches no events
        self._options = attrs.evolve(options or WatchOptions(), initial_events=False)
        self._lock = threading.Lock()
        self._subscribers: dict[Hashable, _Subscriber] = {}
        self._informers: dict[Scope, Informer] = {}
        self._holders: dict[Scope, dict[Hashable, set[Hashable]]] = {}  # scope: owner: holders
        self._stopped = False
        self._started_by: Counter[Hashable] = Counter()
        self.started_total = 0
        """Informers started since the pool was made."""

    def subscribe(self, owner: Hashable, on_event: ScopeEventHandler, *,
                  on_late_sync: Callable[[Scope], None] | None = None) -> None:
        """``owner`` receives the events of the scopes it acquires (``on_event``), and
        ``on_late_sync(scope)`` when one lists for the first time after failing to."""
        with self._lock:
            self._subscribers[owner] = _Subscriber(on_event, on_late_sync)

    def acquire(self, scope: Scope, holder: Hashable | None, *, owner: Hashable) -> Informer:
        """The informer of ``scope``, started now if none runs; ``holder`` (of ``owner``, a
        subscriber) holds it until :meth:`release`. ``holder=None`` holds nothing: the
        informer runs until a holder lets go or the pool stops."""
        with self._lock:
            if owner not in self._subscribers:
                raise KeyError(f"{owner!r} acquires {scope} without subscribing first")
            holders = self._holders.setdefault(scope, {}).setdefault(owner, set())
            if holder is not None:
                holders.add(holder)
            informer = self._informers.get(scope)
            if informer is not None:
                return informer
            informer = Informer(self._client, scope.api_version, scope.kind,
                                namespace=scope.namespace, label_selector=scope.label_selector,
                                field_selector=scope.field_selector, clock=self._clock,
                                options=self._options)
            informer.add_handler(lambda event, old, new: self._dispatch(scope, event, old, new))
            informer.add_late_sync_handler(lambda: self._late_sync(scope))
            self._informers[scope] = informer
            self.started_total += 1
            self._started_by[owner] += 1
            stopped = self._stopped
        if not stopped:
            informer.start()
            _log.info("started informer for %s", _describe(scope))
        return informer

    def release(self, scope: Scope, holder: Hashable, *, owner: Hashable) -> None:
        """``holder`` (of ``owner``) needs ``scope`` no more; the informer stops when nothing
        holds it any more."""
        with self._lock:
            owners = self._holders.get(scope) or {}
            holders = owners.get(owner)
            if holders is None or holder not in holders:
                return
            holders.discard(holder)
            if not holders:
                del owners[owner]
            if owners:
                return
            self._holders.pop(scope, None)
            informer = self._informers.pop(scope, None)
        if informer is not None:
            informer.stop()
            _log.info("stopped informer for %s: nothing needs it", _describe(scope))

    def release_all(self, owner: Hashable) -> None:
        """Every holder of ``owner`` lets go (the subscriber stops); it receives no more
        events."""
        with self._lock:
            held = [(scope, set(owners.get(owner, ()))) for scope, owners in
                    self._holders.items() if owner in owners]
            self._subscribers.pop(owner, None)
            unheld = []
            for scope, _holders in held:
                owners = self._holders[scope]
                del owners[owner]
                if not owners:
                    unheld.append(scope)
                    del self._holders[scope]
            informers = [i for i in (self._informers.pop(s, None) for s in unheld) if i]
        for informer in informers:
            informer.stop()

    def informer(self, scope: Scope) -> Informer | None:
        """The running informer of ``scope``, if any."""
        with self._lock:
            return self._informers.get(scope)

    def started_by(self, owner: Hashable) -> int:
        """How many informers ``owner``'s acquires started."""
        with self._lock:
            return self._started_by[owner]

    def holders(self, scope: Scope, *, owner: Hashable) -> set[Hashable]:
        """What of ``owner`` holds ``scope`` now."""
        with self._lock:
            return set((self._holders.get(scope) or {}).get(owner, ()))

    def scopes(self, owner: Hashable) -> dict[Scope, Informer]:
        """The scopes ``owner`` acquired that have a running informer, with it."""
        with self._lock:
            return {scope: informer for scope, informer in self._informers.items()
                    if owner in self._holders.get(scope, {})}

    def stop(self) -> None:
        """Stop every informer; no event is dispatched after this returns."""
        with self._lock:
            self._stopped = True
            informers = list(self._informers.values())
            self._informers.clear()
            self._holders.clear()
            self._subscribers.clear()
        for informer in informers:
            informer.stop()

    def _owners(self, scope: Scope) -> list[_Subscriber]:
        with self._lock:
            return [self._subscribers[o] for o in self._holders.get(scope, ())
                    if o in self._subscribers]

    def _dispatch(self, scope: Scope, event_type: str, old: dict[str, Any] | None,
                  new: dict[str, Any]) -> None:
        for subscriber in self._owners(scope):
            subscriber.on_event(scope, event_type, old, new)

    def _late_sync(self, scope: Scope) -> None:
        for subscriber in self._owners(scope):
            if subscriber.on_late_sync is not None:
                subscriber.on_late_sync(scope)


def _describe(scope: Scope) -> str:
    where = f" in {scope.namespace}" if scope.namespace else ""
    which = f" ({scope.field_selector})" if scope.field_selector else ""
    return f"{scope.kind}.{scope.api_version}{where}{which}"
