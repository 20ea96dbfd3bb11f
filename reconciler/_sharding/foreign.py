"""Sharded: watch by name the objects another owner holds that a parent waits on.

A parent that skipped a child because another owner's object holds its name waits for that
owner to let go (``reconciler._reconcile.parents.not_ours_waits``): the child informer's event
of the object's deletion or handover wakes it. Sharded, a replica's child informers select its
shard label as well as ``managed-by``, so an object the operator does not manage, or one of a
parent in another shard, never reaches them, and the parent would stay without its child until
its next reconcile (issue 38).

:class:`ForeignWatches` closes that gap at the cost of what is contested, never of every child:
while some parent waits on such an object (``WaitRegistry.not_ours``) and the replica's child
cache does not hold it, it holds an informer of the shared ``InformerPool`` scoped to that one
object (its kind in its namespace, ``fieldSelector=metadata.name=<name>``: a list and a watch
of at most one object), and releases it when no parent waits on it any more (the pool stops it).
Its events go to the router's awaited-verdict path only (``EventRouter.on_awaited``), never to
the child triggers: the object is not ours. The informer's first list dispatches no events, so
once it has listed (or lists late after failing to) what it holds is compared with what the
waiting parents saw, as one event would have been: an object deleted or handed over between the
skip and the list still wakes them.

The alternatives cost more: selecting children by ``managed-by`` alone makes every replica cache
every child (what sharding avoids, docs/sharding.md) and still misses objects not managed by the
operator; polling the contested names is a loop that requests whether or not anything changed.

Boundary: which contested objects to watch and what their events wake; starting and stopping
informers is the pool's, what a wait is the registry's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from builders import ObjectRef
from reconciler._cache.informers import Informer
from reconciler._cache.pool import InformerPool, Scope
from reconciler._reconcile.waits import WaitRegistry

__all__ = ["ForeignWatches", "name_scope"]

_log = logging.getLogger("optk.sharding")
_SYNC_TIMEOUT = 60.0
"""Seconds a new named informer is given to list before its check is left to its late sync."""

Wake = Callable[[str, "dict[str, Any] | None", "dict[str, Any]"], Any]


def name_scope(ref: ObjectRef) -> Scope:
    """The scope of one object: its kind in its namespace, selected by name."""
    return Scope(api_version=ref.api_version, kind=ref.kind, namespace=ref.namespace or None,
                 field_selector=f"metadata.name={ref.name}")


class ForeignWatches:
    """One named informer per contested object the replica's child informers cannot see, held
    while a parent waits on it. ``visible(ref)``: whether the child cache holds the object
    (then its informer's events wake the parent already). ``wake(event_type, old, new)``: the
    router's awaited path. Thread-safe; ``sync`` is what the registry calls on a change."""

    def __init__(self, pool: InformerPool, waits: WaitRegistry, *,
                 visible: Callable[[ObjectRef], bool], wake: Wake,
                 sync_timeout: float = _SYNC_TIMEOUT) -> None:
        self._pool = pool
        self._waits = waits
        self._visible = visible
        self._wake = wake
        self._sync_timeout = sync_timeout
        self._lock = threading.Lock()  # one sync at a time: acquires and releases in order
        self._held: dict[ObjectRef, Scope] = {}
        self._stopped = False
        pool.subscribe(self, self._on_event, on_late_sync=self._on_late_sync)
        waits.on_not_ours_change(self.sync)

    @property
    def held(self) -> set[ObjectRef]:
        """The objects watched by name now."""
        with self._lock:
            return set(self._held)

    def sync(self) -> None:
        """Watch by name each contested object no child informer sees; let go of the rest."""
        started: list[tuple[ObjectRef, Informer]] = []
        with self._lock:
            if self._stopped:
                return
            contested = self._waits.not_ours()
            for ref in [r for r in self._held if r not in contested]:
                self._pool.release(self._held.pop(ref), ref, owner=self)
                _log.debug("no parent waits on %s any more: not watched by name", ref)
            for ref in contested - self._held.keys():
                if self._visible(ref):
                    continue
                scope = self._held[ref] = name_scope(ref)
                started.append((ref, self._pool.acquire(scope, ref, owner=self)))
                _log.info("a parent waits on %s, held by another owner outside this shard: "
                          "watching it by name", ref)
        for ref, informer in started:  # off the worker: the first list is one round trip
            threading.Thread(target=self._check_after_list, args=(ref, informer),
                             name=f"foreign-{ref.name}", daemon=True).start()

    def stop(self) -> None:
        """Let go of every named informer; no event is passed on after this returns."""
        with self._lock:
            self._stopped = True
            self._held.clear()
        self._pool.release_all(self)

    def _on_event(self, scope: Scope, event_type: str, old: dict[str, Any] | None,
                  new: dict[str, Any]) -> None:
        self._wake(event_type, old, new)

    def _on_late_sync(self, scope: Scope) -> None:
        with self._lock:
            refs = [ref for ref, held in self._held.items() if held == scope]
        for ref in refs:
            informer = self._pool.informer(scope)
            if informer is not None:
                self._check(ref, informer)

    def _check_after_list(self, ref: ObjectRef, informer: Informer) -> None:
        if informer.wait_synced(self._sync_timeout):
            self._check(ref, informer)

    def _check(self, ref: ObjectRef, informer: Informer) -> None:
        """What the first list found, passed on as the event the waiting parents missed: gone
        or handed over since the skip wakes them, unchanged does not."""
        with self._lock:
            if self._stopped or ref not in self._held:
                return
        found = informer.cache.get(ref.namespace, ref.name)
        if found is None:
            self._wake("DELETED", None, {"apiVersion": ref.api_version, "kind": ref.kind,
                                         "metadata": {"name": ref.name,
                                                      "namespace": ref.namespace}})
        else:
            self._wake("MODIFIED", None, found)
