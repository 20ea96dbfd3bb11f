"""The assigner: the one elected replica that labels every parent with its shard.

Issue 16. It watches every parent (its own informer, not scoped to a shard, caching only each
parent's metadata view through ``MetadataView``) and the shard Leases
(``reconciler._sharding.shards.ShardLease``), sleeps until the next Lease expiry or drain timeout,
and applies the pure decisions of ``reconciler._sharding.decisions``: a new parent is labelled on
its first event, the parents of a gone shard move at once, those of a live one are drained first
(the owner acknowledges, see ``reconciler._sharding.shards.Shards.acknowledge``), and a drain that
times out is forced. It writes only parents' labels, with their ``resourceVersion``;
``reconciler._sharding.shards.Shards`` runs it while its election is won.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Unpack

from builders import ObjectRef
from reconciler._base.clocks import Clock
from reconciler._base.errors import ApiError, ConflictError, NotFoundError
from reconciler._base.keys import ParentKey, meta_of
from reconciler._base.metrics import ShardMetrics
from reconciler._cache.informers import Informer
from reconciler._client.protocol import (
    ClusterClient,
    ForwardingClient,
    KubeObject,
    ListFields,
    ListOptions,
    WatchEvent,
    WatchStream,
)
from reconciler._sharding.decisions import (
    RING_LABEL,
    Assignment,
    Decision,
    Member,
    Sharding,
    assign_patch,
    decide,
    drain_patch,
    live_shards,
    metadata_view,
    next_change,
    observe_members,
    shard_of,
)

__all__ = ["Assigner", "MetadataView"]

_log = logging.getLogger("optk.sharding")
_LEASE = ("coordination.k8s.io/v1", "Lease")
_MERGE = "application/merge-patch+json"
_WRITERS = 8
"""Label patches in flight at once (a crashed shard's parents move together)."""


class MetadataView(ForwardingClient):
    """A ``ClusterClient`` whose lists and watches carry only ``metadata_view`` of each object:
    the assigner's parent informer caches names, uids and labels, not whole parents (the
    server still sends them whole; what is kept is what costs memory for the process's life).
    Everything else is the wrapped client's."""

    def list(self, api_version: str, kind: str, options: ListOptions | None = None, *,
             namespace: str | None = None, **fields: Unpack[ListFields]) -> dict[str, Any]:
        """The list body with each item reduced to its metadata view."""
        body = super().list(api_version, kind, options, namespace=namespace, **fields)
        return {**body, "items": [metadata_view(o) for o in body.get("items") or ()]}

    def watch(self, api_version: str, kind: str, options: ListOptions | None = None, *,
              namespace: str | None = None, **fields: Unpack[ListFields]) -> Iterator[WatchEvent]:
        """The watch events, each object reduced to its metadata view."""
        events = super().watch(api_version, kind, options, namespace=namespace, **fields)
        if isinstance(events, WatchStream):  # still closable by ``Informer.stop``
            return events.map(_viewed)
        return map(_viewed, events)


def _viewed(event: WatchEvent) -> WatchEvent:
    """``event`` with its object reduced to the metadata view (ADDED, MODIFIED, DELETED)."""
    obj = event.get("object")
    if isinstance(obj, dict) and event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
        return {**event, "object": metadata_view(obj)}
    return event


class Assigner:
    """The leader's loop: label every parent with its shard, moving parents between shards.

    Parent events queue that parent (a new one is assigned at once); a change of the live
    shards re-decides every parent; the loop wakes at the instant the next Lease expires or
    drain times out (``next_change``; at the latest every ``renew_period``), so a crashed
    shard's parents start moving the moment its Lease is a duration old, ``_WRITERS`` label
    patches at a time. Patches carry the parent's ``resourceVersion``: a conflict only means the
    next event decides again.
    """

    def __init__(
        self, client: ClusterClient, *, api_version: str, kind: str, operator: str,
        namespace: str | None, sharding: Sharding, clock: Clock, metrics: ShardMetrics,
    ) -> None:
        self.client = client
        self.sharding = sharding
        self._clock = clock
        self._metrics = metrics
        self.parents = Informer(MetadataView(client), api_version, kind, namespace=namespace,
                                clock=clock)
        self.leases = Informer(client, *_LEASE, namespace=sharding.namespace,
                               label_selector=f"{RING_LABEL}={operator}", clock=clock)
        self._cond = threading.Condition()
        self._book = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=_WRITERS, thread_name_prefix="optk-assign")
        self._pending: set[ParentKey] = set()
        self._sweep = True
        self._stopping = False
        self._members: dict[str, Member] = {}
        self._live: frozenset[str] = frozenset()
        self._drains: dict[ParentKey, float] = {}
        self._first_seen: dict[ParentKey, float] = {}
        self._started = 0.0
        self._assembled = False
        self.live_changed_at: float | None = None
        """When (wall clock) the live shards last changed, as this assigner saw it."""
        self.moves = 0
        self.drains = 0
        self.assignments = 0
        self.forced = 0

    @property
    def live(self) -> frozenset[str]:
        """The shards live at the last tick."""
        with self._cond:
            return self._live

    def stop(self) -> None:
        """Stop the loop and the informers."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self.parents.stop()
        self.leases.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def run(self) -> None:
        """Watch parents and Leases and assign until ``stop``."""
        self._started = self._clock.monotonic()
        self.parents.add_handler(self._on_parent)
        self.leases.add_handler(lambda *_: self._wake(sweep=False))
        self.parents.start()
        self.leases.start()
        self.parents.wait_synced(None)
        self.leases.wait_synced(None)
        while True:
            with self._cond:
                if self._stopping:
                    return
                if not self._pending and not self._sweep:
                    self._clock.wait(self._cond, self._until_next_change())
                if self._stopping:
                    return
                pending, self._pending = self._pending, set()
                sweep, self._sweep = self._sweep, False
            try:
                self._round(pending, sweep)
            except Exception:  # never lose the assigner to a bug: the next tick retries
                _log.exception("sharding: an assignment round failed")

    def _until_next_change(self) -> float:
        """Seconds to sleep: until the next Lease expiry or drain timeout (then a round
        notices it at once), at most ``renew_period``."""
        now = self._clock.monotonic()
        at = next_change(self._members, now=now, drains=self._drains.values(),
                         drain_timeout=self.sharding.drain_timeout)
        period = self.sharding.renew_period
        return period if at is None else max(0.001, min(period, at - now + 0.001))

    def _wake(self, *, sweep: bool, key: ParentKey | None = None) -> None:
        with self._cond:
            if key is not None:
                self._pending.add(key)
            self._sweep = self._sweep or sweep
            self._cond.notify_all()

    def _on_parent(self, event: str, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        if event != "DELETED":
            self._wake(sweep=False, key=ObjectRef.of(new).namespaced_name)

    def _round(self, pending: set[ParentKey], sweep: bool) -> None:
        now = self._clock.monotonic()
        self._members = observe_members(self._members, self.leases.cache.list(), now=now,
                                        default_duration=self.sharding.lease_duration)
        live = live_shards(self._members, now=now)
        hint = self.sharding.replicas_hint
        if not self._assembled:
            self._assembled = (hint is None or len(live) >= hint
                               or now - self._started >= self.sharding.lease_duration)
            if not self._assembled:
                return  # starting together: wait a little for the others (once, at start)
        with self._cond:
            changed, self._live = live != self._live, live
        if changed:
            self.live_changed_at = self._clock.time()
            _log.info("sharding: live shards are now %s", ", ".join(sorted(live)) or "none")
        keys: Iterable[ParentKey] = (self.parents.cache.keys() if sweep or changed
                                     else pending | set(self._drains))
        writes: list[tuple[ParentKey, KubeObject, Assignment]] = []
        for key in list(keys):
            parent = self.parents.cache.get(*key)
            if parent is None:
                self._drains.pop(key, None)
                self._first_seen.pop(key, None)
                continue
            if (verdict := self._decide(key, parent, live, now)) is not None:
                writes.append((key, parent, verdict))
        # the label patches are independent: a few at a time (a crashed shard's share moves
        # in a fraction of the time one by one would take)
        list(self._pool.map(lambda w: self._apply(w[0], w[1], w[2], now), writes))
        counts: dict[str, int] = {}
        for parent in self.parents.cache.list():
            if (shard := shard_of(parent)) is not None:
                counts[shard] = counts.get(shard, 0) + 1
        self._metrics.set_parents(counts)

    def _decide(
        self, key: ParentKey, parent: KubeObject, live: frozenset[str], now: float
    ) -> Assignment | None:
        """The decision for one parent, with the bookkeeping of drains in progress; the
        decision to write, if any."""
        if meta_of(parent).get("deletionTimestamp") and shard_of(parent) in live:
            return None  # its owner finishes the deletion; moving it now would add a writer
        if shard_of(parent) is None:
            self._first_seen.setdefault(key, now)
        drain_started = self._drains.get(key)
        verdict = decide(parent, live=live, drain_started=drain_started, now=now,
                         drain_timeout=self.sharding.drain_timeout)
        if verdict.decision is Decision.WAIT:
            if drain_started is None:  # set by an earlier leader: its timeout starts now
                self._drains[key] = now
            return None
        if verdict.decision is Decision.NOTHING:
            self._drains.pop(key, None)
            return None
        return verdict

    def _apply(self, key: ParentKey, parent: KubeObject, verdict: Assignment,
               now: float) -> None:
        """Write one decision (a label patch with the parent's ``resourceVersion``)."""
        assert verdict.target is not None
        patch = drain_patch() if verdict.decision is Decision.DRAIN else assign_patch(
            verdict.target)
        patch["metadata"]["resourceVersion"] = meta_of(parent).get("resourceVersion")
        try:
            self.client.patch(parent["apiVersion"], parent["kind"], key[1], patch,
                              patch_type=_MERGE, namespace=key[0] or None)
        except (ConflictError, NotFoundError):
            self._wake(sweep=False, key=key)  # changed meanwhile: decide again on fresh data
            return
        except ApiError as error:
            _log.warning("sharding: labelling %s/%s failed: %s", key[0], key[1], error)
            return
        with self._book:
            self._record(key, verdict, now)

    def _record(self, key: ParentKey, verdict: Assignment, now: float) -> None:
        if verdict.decision is Decision.DRAIN:
            self.drains += 1
            self._metrics.drains.inc()
            self._drains[key] = now
            _log.info("sharding: draining %s/%s from %s (for %s)", key[0], key[1],
                      verdict.current, verdict.target)
            return
        self._drains.pop(key, None)
        self.assignments += 1
        if verdict.decision is Decision.FORCE:
            self.forced += 1
            self._metrics.drain_timeouts.inc()
            _log.error("sharding: %s did not release %s/%s within %.0fs; moved to %s anyway",
                       verdict.current, key[0], key[1], self.sharding.drain_timeout,
                       verdict.target)
        if (first := self._first_seen.pop(key, None)) is not None:
            self._metrics.assignment.observe(max(0.0, now - first))
        if verdict.current is not None or verdict.decision is Decision.FORCE:
            self.moves += 1
            self._metrics.moves.inc()
