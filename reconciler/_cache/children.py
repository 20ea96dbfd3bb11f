"""The child informers: one per child kind, shared by every parent that builds the kind.

``InformerManager`` starts an informer the first time a parent's builders produce a kind (so a
CRD installed later is watched as soon as it is used), shares one per kind among all parents
(deduplicated under concurrency), scopes it by the operator's ``managed-by`` label (and its shard
label when sharded), and stops it when no parent needs the kind any more. It does so through the
reference-counted pool (``reconciler._cache.pool``), the same the declared inputs use: here a
parent is a holder of its kinds. The reconcile reads these caches through
``reconciler._cache.readers.InformerReader``; the toolkit's own writes reach them through
``reconciler._cache.recording.RecordingClient``.

``Caches`` (issue 37): the runtime's parent informer and child informers as the parts that read
both receive them.

Boundary: which parent needs which kind; starting, sharing and stopping are the pool's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import attrs

from reconciler._base.clocks import Clock
from reconciler._cache.informers import Informer, TypeKey, WatchOptions
from reconciler._cache.pool import InformerPool, Scope
from reconciler._client.protocol import ClusterClient

__all__ = ["Caches", "InformerManager", "TypeEventHandler"]

TypeEventHandler = Callable[[TypeKey, str, "dict[str, Any] | None", "dict[str, Any]"], None]
"""An ``InformerManager`` handler: ``handler(type_key, event_type, old, new)``."""


class InformerManager:
    """One shared informer per child type, started on first use and stopped when unused.

    ``use(user, types)`` declares the types one parent (``user``) needs now; informers for new
    types start at once, and a type no user needs any more has its informer stopped. ``ensure``
    starts an informer without attributing it (the reconcile's first read of a type). The
    first list of a new informer dispatches no events: objects that merely exist are no change
    (the parent that needed the type is being reconciled already); later relists do.
    ``on_late_sync(type)`` is called when an informer lists for the first time after failing to
    (forbidden, say): the parents that use the type read it while it could not be listed, so
    the driver looks at them again. ``pool``: the runtime's shared pool (a pool of its own
    when not given, over ``client``, ``clock`` and ``options``).
    """

    def __init__(
        self,
        client: ClusterClient,
        *,
        handler: TypeEventHandler,
        label_selector: str | None = None,
        namespace: str | None = None,
        clock: Clock | None = None,
        options: WatchOptions | None = None,
        on_late_sync: Callable[[TypeKey], None] | None = None,
        pool: InformerPool | None = None,
    ) -> None:
        self._client = client
        self._own_pool = pool is None
        self._pool = pool or InformerPool(client, clock=clock, options=options)
        self._label_selector = label_selector
        self._namespace = namespace
        self._lock = threading.Lock()  # one parent's kinds change as a whole
        self._types_of: dict[Hashable, frozenset[TypeKey]] = {}
        late = None if on_late_sync is None else (lambda scope: on_late_sync(_type(scope)))
        self._pool.subscribe(self, lambda scope, event, old, new: handler(
            _type(scope), event, old, new), on_late_sync=late)

    @property
    def started_total(self) -> int:
        """Informers this manager started."""
        return self._pool.started_by(self)

    def _scope(self, api_version: str, kind: str) -> Scope:
        return Scope(api_version=api_version, kind=kind, namespace=self._namespace,
                     label_selector=self._label_selector)

    def ensure(self, api_version: str, kind: str) -> Informer:
        """The informer of this type, started now if it was not running."""
        return self._pool.acquire(self._scope(api_version, kind), None, owner=self)

    def use(self, user: Hashable, types: Iterable[TypeKey]) -> None:
        """``user`` needs exactly ``types`` now: start new informers, stop unneeded ones.

        Types the server does not serve are left out until it does.
        """
        # A kind not served yet (its CRD is missing) is not watched; the parent's retry will
        # declare it again once the CRD exists.
        wanted = frozenset(t for t in types if self._client.is_served(*t))
        with self._lock:
            previous = self._types_of.get(user, frozenset())
            for api_version, kind in sorted(wanted - previous):
                self._pool.acquire(self._scope(api_version, kind), user, owner=self)
            for api_version, kind in sorted(previous - wanted):
                self._pool.release(self._scope(api_version, kind), user, owner=self)
            if wanted:
                self._types_of[user] = wanted
            else:
                self._types_of.pop(user, None)

    def release(self, user: Hashable) -> None:
        """``user`` (a deleted parent) needs nothing any more."""
        self.use(user, ())

    def informer(self, api_version: str, kind: str) -> Informer | None:
        """The running informer of this type, if any."""
        return self._pool.informer(self._scope(api_version, kind))

    def users_of(self, api_version: str, kind: str) -> set[Hashable]:
        """The users (parents) that declared this type."""
        return self._pool.holders(self._scope(api_version, kind), owner=self)

    def unlistable(self) -> dict[TypeKey, Exception]:
        """The types whose informer has not synced because its lists are refused (403, say),
        with the error."""
        return {_type(scope): error for scope, informer in self._pool.scopes(self).items()
                if not informer.has_synced and (error := informer.list_refused) is not None}

    def types(self) -> set[TypeKey]:
        """Types with a running informer."""
        return {_type(scope) for scope in self._pool.scopes(self)}

    def synced(self) -> bool:
        """Whether every running informer has synced."""
        return all(informer.has_synced for informer in self._pool.scopes(self).values())

    def stop(self) -> None:
        """Stop every informer of this manager (and its pool, when it made its own)."""
        with self._lock:
            self._types_of.clear()
        if self._own_pool:
            self._pool.stop()
        else:
            self._pool.release_all(self)


@attrs.frozen(kw_only=True)
class Caches:
    """The runtime's two kinds of informer, as the parts that read both receive them: the
    ``parents`` informer and the child ``informers``."""

    parents: Informer
    informers: InformerManager


def _type(scope: Scope) -> TypeKey:
    return scope.api_version, scope.kind
