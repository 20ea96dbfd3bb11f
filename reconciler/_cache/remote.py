"""Informers per (cluster, kind) for the children placed in other clusters.

Why it exists: a child built with ``builders.placed`` lives in another cluster (issue 41), where
the operator's own informers see nothing. :class:`RemoteCaches` keeps, per cluster, one
``InformerPool`` over that cluster's client and, in it, one informer per kind the operator's
parents place there (every namespace, the operator's managed-by label, as at home). An informer
starts when a parent first places that kind in that cluster (``hold``), and stops when no parent
places it there any more (``hold`` with other kinds, ``forget`` of a deleted parent) or when the
cluster goes (``drop``: its Secret is gone, or rotated: a new client, so a new pool).

Each cluster's client is wrapped in a ``RecordingClient`` writing through to these informers, so
a reconcile reads its own writes at once and the watch echo of an own write triggers nothing. Any
other event of a placed child (a drift, a deletion by hand, a readiness change) queues the parent
its ``optk.dev/owner-uid`` label names (``on_change``): a remote drift is repaired within the
watch's latency, and the reconcile reads placed children from memory (``reader``): a steady state
makes no request to any cluster.

One slow or unreachable cluster stalls nothing else: each informer lists and watches on its own
thread, and a read waits for a cache's first list at most ``sync_timeout`` seconds (the cluster's
``request_timeout``), then asks the cluster itself, whose failure the reconcile reports as that
cluster's (``ClusterUnavailable``).

Boundary: the caches and the trigger. What is written there, and the inventory, are the
reconcile's (``reconciler._reconcile.placement``); the clients are ``reconciler._client.clusters``'.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from builders.names import OWNER_UID_LABEL
from reconciler._base.clocks import Clock, RealClock
from reconciler._base.errors import NotFoundError
from reconciler._base.keys import ParentKey, meta_of
from reconciler._cache.informers import Informer, WatchOptions
from reconciler._cache.pool import InformerPool, Scope
from reconciler._cache.recording import RecordingClient
from reconciler._client.protocol import ClusterClient

__all__ = ["RemoteCaches", "RemoteReader"]

_log = logging.getLogger(__name__)

Kind = tuple[str, str]  # apiVersion, kind


class _Cluster:
    """One cluster's pool, over the client it was made for."""

    def __init__(self, name: str, client: ClusterClient, owner: RemoteCaches) -> None:
        self.name = name
        self.client = client
        self.selector = owner.label_selector
        self.pool = InformerPool(client, clock=owner.clock, options=owner.options)
        self.recording = RecordingClient(client, informers=self.informer, clock=owner.clock)
        self.pool.subscribe(owner, lambda scope, event, old, new: owner.changed(
            self, event, new))

    def informer(self, api_version: str, kind: str) -> Informer | None:
        return self.pool.informer(self.scope((api_version, kind)))

    def scope(self, kind: Kind) -> Scope:
        return Scope(api_version=kind[0], kind=kind[1], label_selector=self.selector)


class RemoteCaches:
    """The placed children's informers, per (cluster, kind), listing with ``label_selector``
    (the operator's managed-by label); ``on_change(parent_key)`` for each event of a placed
    child that is not the echo of an own write. Thread-safe."""

    def __init__(self, *, label_selector: str | None,
                 on_change: Callable[[ParentKey], None] | None = None,
                 clock: Clock | None = None, options: WatchOptions | None = None,
                 sync_timeout: float = 10.0) -> None:
        self.label_selector = label_selector
        self.on_change = on_change
        self.clock: Clock = clock or RealClock()
        self.options = options
        self.sync_timeout = sync_timeout
        self._lock = threading.Lock()
        self._clusters: dict[str, _Cluster] = {}
        self._held: dict[ParentKey, dict[str, frozenset[Kind]]] = {}  # parent: cluster: kinds
        self._uids: dict[str, ParentKey] = {}
        self.triggered = 0
        """Parents queued because one of their placed children changed in its cluster."""

    # -- for the reconcile ------------------------------------------------------------------

    def client(self, cluster: str, client: ClusterClient) -> ClusterClient:
        """``client`` (``cluster``'s) as the reconcile writes through it: recording its writes
        into the cluster's informers. A new client (rotated credentials) starts a new pool."""
        return self._cluster(cluster, client).recording

    def reader(self, cluster: str, client: ClusterClient) -> RemoteReader:
        """Reads of ``cluster``'s placed children from its informers."""
        return RemoteReader(self, self._cluster(cluster, client))

    def hold(self, parent: ParentKey, uid: str, cluster: str, client: ClusterClient,
             kinds: Iterable[Kind]) -> None:
        """``parent`` (uid ``uid``) places ``kinds`` in ``cluster`` now: their informers run
        (started now if none does); kinds it placed there before and no longer does are let
        go (an informer stops when no parent holds it)."""
        wanted = frozenset(kinds)
        with self._lock:
            if not wanted and cluster not in self._held.get(parent, {}):
                return  # nothing placed there, before or now: no pool made for it
        entry = self._cluster(cluster, client)
        with self._lock:
            self._uids[uid] = parent
            before = self._held.setdefault(parent, {}).get(cluster, frozenset())
            if wanted:
                self._held[parent][cluster] = wanted
            else:
                self._held[parent].pop(cluster, None)
        for kind in sorted(wanted - before):
            entry.pool.acquire(entry.scope(kind), parent, owner=self)
        for kind in sorted(before - wanted):
            entry.pool.release(entry.scope(kind), parent, owner=self)

    def forget(self, parent: ParentKey) -> None:
        """``parent`` places nothing any more (it was deleted): its informers are let go."""
        with self._lock:
            held = self._held.pop(parent, {})
            for uid in [u for u, key in self._uids.items() if key == parent]:
                del self._uids[uid]
            clusters = {name: self._clusters.get(name) for name in held}
        for name, kinds in held.items():
            entry = clusters[name]
            if entry is not None:
                for kind in kinds:
                    entry.pool.release(entry.scope(kind), parent, owner=self)

    def drop(self, cluster: str) -> None:
        """``cluster`` is gone (its Secret deleted or no longer selected): its informers
        stop."""
        with self._lock:
            entry = self._clusters.pop(cluster, None)
            for held in self._held.values():
                held.pop(cluster, None)
        if entry is not None:
            entry.pool.stop()
            _log.info("cluster %r: its informers stopped", cluster)

    def kinds(self, cluster: str) -> list[Kind]:
        """The kinds watched in ``cluster`` now, sorted."""
        with self._lock:
            entry = self._clusters.get(cluster)
        if entry is None:
            return []
        return sorted((s.api_version, s.kind) for s in entry.pool.scopes(self))

    def clusters(self) -> list[str]:
        """The clusters a pool runs for, sorted."""
        with self._lock:
            return sorted(self._clusters)

    def stop(self) -> None:
        """Stop every informer (the operator stops)."""
        with self._lock:
            entries = list(self._clusters.values())
            self._clusters.clear()
        for entry in entries:
            entry.pool.stop()

    # -- internals --------------------------------------------------------------------------

    def _cluster(self, name: str, client: ClusterClient) -> _Cluster:
        with self._lock:
            entry = self._clusters.get(name)
            if entry is not None and entry.client is client:
                return entry
            old = entry
            entry = self._clusters[name] = _Cluster(name, client, self)
            if old is not None:  # a new client: the parents place there again on their pass
                for held in self._held.values():
                    held.pop(name, None)
        if old is not None:
            old.pool.stop()
        return entry

    def changed(self, entry: _Cluster, event_type: str, new: dict[str, Any]) -> None:
        """An event of a placed child in ``entry``'s cluster: its parent is queued, unless it
        is the echo of an own write."""
        if self.on_change is None or entry.recording.is_own_echo(event_type, new):
            return
        uid = (meta_of(new).get("labels") or {}).get(OWNER_UID_LABEL)
        with self._lock:
            parent = self._uids.get(str(uid)) if uid else None
        if parent is not None:
            self.triggered += 1
            self.on_change(parent)


class RemoteReader:
    """A ``ReadCache`` of one cluster's placed children: from its informer when one runs and
    has listed (within ``sync_timeout``), else one request to the cluster."""

    from_memory = True

    def __init__(self, owner: RemoteCaches, entry: _Cluster) -> None:
        self._owner = owner
        self._entry = entry

    def get(self, api_version: str, kind: str, name: str, *,
            namespace: str | None = None) -> dict[str, Any] | None:
        """The object from the cache (a copy), or from the cluster when no cache has it yet."""
        informer = self._informer(api_version, kind)
        if informer is not None:
            found = informer.cache.get(namespace, name)
            return None if found is None else dict(found)
        try:
            return self._entry.client.get(api_version, kind, name, namespace=namespace)
        except NotFoundError:
            return None

    def list(self, api_version: str, kind: str, *, namespace: str | None = None,
             label_selector: str | None = None) -> list[dict[str, Any]]:
        """The matching objects from the cache (only the operator's own are there)."""
        informer = self._informer(api_version, kind)
        if informer is None:
            return []
        return [dict(o) for o in informer.cache.list(namespace=namespace,
                                                     label_selector=label_selector)]

    def _informer(self, api_version: str, kind: str) -> Informer | None:
        informer = self._entry.informer(api_version, kind)
        if informer is None:
            return None
        deadline = time.monotonic() + self._owner.sync_timeout
        # a first list still under way: waited for; one that failed (the cluster refused or
        # did not answer): not, the request it falls back to says why at once
        while not informer.has_synced and informer.list_error is None \
                and time.monotonic() < deadline:
            informer.wait_synced(0.05, until_refused=True)
        return informer if informer.has_synced else None
