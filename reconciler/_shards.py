"""Sharding at run time: the shard Lease, the leader's assigner, the drain acknowledgement.

The I/O shell around the pure decisions of ``reconciler._sharding``. ``ShardLease`` holds and
renews this replica's Lease ``<operator>-shard-<id>`` (a replica that cannot renew within the
renew deadline stops, before the assigner can consider it gone). ``Assigner`` runs on the one
replica that wins the ``<operator>-sharder`` election: it watches every parent and the shard
Leases, and labels each parent with its shard as soon as it sees it (one event), moves the
parents of a gone shard at once and drains those of a live one first. ``Shards`` is what the
runtime holds: the shard id, the label selector its informers use, the builders' label stamping,
the owner's side of the drain handshake (``releases``/``acknowledge``) and the threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from builders import compose
from builders.composition import evaluate
from builders.names import MANAGED_BY_LABEL, OWNER_UID_LABEL
from reconciler._clients import ClusterClient, KubeObject
from reconciler._clocks import Clock
from reconciler._errors import ApiError, ConflictError, NotFoundError
from reconciler._informers import Informer
from reconciler._leadership import LeaderElection, LeaderElector
from reconciler._metrics import ShardMetrics
from reconciler._sharding import (
    RING_LABEL,
    SHARD_LABEL,
    Decision,
    Member,
    Sharding,
    assign_patch,
    decide,
    drain_patch,
    lease_name,
    live_shards,
    must_release,
    observe_members,
    release_patch,
    shard_of,
)
from reconciler._stores import object_key
from reconciler._triggers import ParentKey, meta_of

if TYPE_CHECKING:
    from reconciler._runtime import OperatorRuntime

__all__ = ["Assigner", "ShardLease", "Shards", "stamp_shard"]

_log = logging.getLogger("optk.sharding")
_LEASE = ("coordination.k8s.io/v1", "Lease")
_MERGE = "application/merge-patch+json"


def _micro_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ShardLease:
    """This replica's membership: the Lease ``<operator>-shard-<id>``, renewed every period.

    ``run`` blocks until ``stop``; when no renewal succeeded for ``renew_deadline`` it calls
    ``on_lost`` and returns (the replica must stop working: the assigner will move its parents
    once the Lease is a whole duration old by its own clock, which is later).
    """

    def __init__(
        self, client: ClusterClient, *, operator: str, shard: str, identity: str,
        sharding: Sharding, clock: Clock, on_lost: Callable[[], None],
    ) -> None:
        self.client = client
        self.name = lease_name(operator, shard)
        self.operator = operator
        self.shard = shard
        self.identity = identity
        self.sharding = sharding
        self._clock = clock
        self._on_lost = on_lost
        self._cond = threading.Condition()
        self._stopping = False
        self.renewals = 0

    def renew(self) -> bool:
        """One renewal (creating the Lease the first time); whether it succeeded."""
        now = _micro_time(self._clock.time())
        ns = self.sharding.namespace
        spec = {"holderIdentity": self.identity, "renewTime": now,
                "leaseDurationSeconds": max(1, round(self.sharding.lease_duration))}
        try:
            try:
                lease = self.client.get(*_LEASE, self.name, namespace=ns)
            except NotFoundError:
                self.client.create({
                    "apiVersion": _LEASE[0], "kind": _LEASE[1],
                    "metadata": {"name": self.name, "namespace": ns,
                                 "labels": {RING_LABEL: self.operator, SHARD_LABEL: self.shard}},
                    "spec": {**spec, "acquireTime": now},
                })
            else:
                old = lease.get("spec") or {}
                new = {**old, **spec}
                if old.get("holderIdentity") != self.identity:
                    new["acquireTime"] = now
                    new["leaseTransitions"] = int(old.get("leaseTransitions") or 0) + 1
                self.client.replace({**lease, "spec": new})
        except ApiError as error:
            _log.warning("renewing shard lease %s/%s failed: %s", ns, self.name, error)
            return False
        self.renewals += 1
        return True

    def run(self) -> None:
        """Renew every ``renew_period`` until ``stop``; call ``on_lost`` past the deadline."""
        last = self._clock.monotonic()
        while not self._sleep(self.sharding.renew_period):
            if self.renew():
                last = self._clock.monotonic()
            elif self._clock.monotonic() - last >= self.sharding.renew_deadline:
                _log.error("shard %s could not renew its lease within %.0fs; stopping",
                           self.shard, self.sharding.renew_deadline)
                self._on_lost()
                return

    def stop(self) -> None:
        """Stop renewing (``release`` gives the Lease up)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    def release(self) -> None:
        """Give the Lease up (empty holder): the assigner moves this shard's parents at once."""
        try:
            lease = self.client.get(*_LEASE, self.name, namespace=self.sharding.namespace)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            self.client.replace({**lease, "spec": {**spec, "holderIdentity": "",
                                                   "renewTime": _micro_time(self._clock.time())}})
        except ApiError as error:
            _log.warning("releasing shard lease %s failed: %s", self.name, error)

    def _sleep(self, seconds: float) -> bool:
        with self._cond:
            deadline = self._clock.monotonic() + seconds
            while not self._stopping and self._clock.monotonic() < deadline:
                self._clock.wait(self._cond, deadline - self._clock.monotonic())
            return self._stopping


class Assigner:
    """The leader's loop: label every parent with its shard, moving parents between shards.

    Parent events queue that parent (a new one is assigned at once); a change of the live
    shards re-decides every parent; a tick every ``renew_period`` notices expired Leases and
    timed-out drains. Patches carry the parent's ``resourceVersion``: a conflict only means the
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
        self.parents = Informer(client, api_version, kind, namespace=namespace, clock=clock)
        self.leases = Informer(client, *_LEASE, namespace=sharding.namespace,
                               label_selector=f"{RING_LABEL}={operator}", clock=clock)
        self._cond = threading.Condition()
        self._pending: set[ParentKey] = set()
        self._sweep = True
        self._stopping = False
        self._members: dict[str, Member] = {}
        self._live: frozenset[str] = frozenset()
        self._drains: dict[ParentKey, float] = {}
        self._first_seen: dict[ParentKey, float] = {}
        self._started = 0.0
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
                    self._clock.wait(self._cond, self.sharding.renew_period)
                if self._stopping:
                    return
                pending, self._pending = self._pending, set()
                sweep, self._sweep = self._sweep, False
            try:
                self._round(pending, sweep)
            except Exception:  # never lose the assigner to a bug: the next tick retries
                _log.exception("sharding: an assignment round failed")

    def _wake(self, *, sweep: bool, key: ParentKey | None = None) -> None:
        with self._cond:
            if key is not None:
                self._pending.add(key)
            self._sweep = self._sweep or sweep
            self._cond.notify_all()

    def _on_parent(self, event: str, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        if event != "DELETED":
            self._wake(sweep=False, key=object_key(new))

    def _round(self, pending: set[ParentKey], sweep: bool) -> None:
        now = self._clock.monotonic()
        self._members = observe_members(self._members, self.leases.cache.list(), now=now,
                                        default_duration=self.sharding.lease_duration)
        live = live_shards(self._members, now=now)
        hint = self.sharding.replicas_hint
        if (hint is not None and len(live) < hint
                and now - self._started < self.sharding.lease_duration):
            return  # starting together: wait a little for the others
        with self._cond:
            changed, self._live = live != self._live, live
        if changed:
            _log.info("sharding: live shards are now %s", ", ".join(sorted(live)) or "none")
        keys: Iterable[ParentKey] = (self.parents.cache.keys() if sweep or changed
                                     else pending | set(self._drains))
        for key in list(keys):
            parent = self.parents.cache.get(*key)
            if parent is None:
                self._drains.pop(key, None)
                self._first_seen.pop(key, None)
                continue
            self._act(key, parent, live, now)
        counts: dict[str, int] = {}
        for parent in self.parents.cache.list():
            if (shard := shard_of(parent)) is not None:
                counts[shard] = counts.get(shard, 0) + 1
        self._metrics.set_parents(counts)

    def _act(self, key: ParentKey, parent: KubeObject, live: frozenset[str], now: float) -> None:
        if meta_of(parent).get("deletionTimestamp") and shard_of(parent) in live:
            return  # its owner finishes the deletion; moving it now would only add a writer
        if shard_of(parent) is None:
            self._first_seen.setdefault(key, now)
        drain_started = self._drains.get(key)
        verdict = decide(parent, live=live, drain_started=drain_started, now=now,
                         drain_timeout=self.sharding.drain_timeout)
        if verdict.decision is Decision.WAIT:
            if drain_started is None:  # set by an earlier leader: its timeout starts now
                self._drains[key] = now
            return
        if verdict.decision is Decision.NOTHING:
            self._drains.pop(key, None)
            return
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


class _Stamped:
    """A ``ResourceBuilder`` whose object carries the shard label (identity stays the
    reconciler's)."""

    def __init__(self, builder: Any, parent: KubeObject, shard: str) -> None:
        self._builder = builder
        self._parent = parent
        self._shard = shard
        self.name = getattr(builder, "name", getattr(builder, "__qualname__", repr(builder)))

    def __call__(self) -> tuple[KubeObject, Any]:
        obj, state = evaluate(self._builder, parent=self._parent)
        meta = dict(obj.get("metadata") or {})
        meta["labels"] = {**(meta.get("labels") or {}), SHARD_LABEL: self._shard}
        return {**obj, "metadata": meta}, state


def stamp_shard(
    build: Callable[[KubeObject], Any], shard: str
) -> Callable[[KubeObject], list[Any]]:
    """``build`` whose children carry ``optk.dev/shard=<shard>`` (the owning replica's shard),
    so that each replica's child informers select only the children of its own parents."""

    def sharded(parent: KubeObject) -> list[Any]:
        return [_Stamped(builder, parent, shard) for builder in compose(build(parent))]

    sharded.__qualname__ = getattr(build, "__qualname__", "build")
    return sharded


class Shards:
    """The runtime's sharding: its shard, Lease, assigner election and drain acknowledgement."""

    def __init__(self, runtime: OperatorRuntime, sharding: Sharding,
                 environ: Mapping[str, str]) -> None:
        self._runtime = runtime
        op = runtime.operator
        self.sharding = sharding
        self.shard = sharding.resolve_id(environ, runtime.identity)
        self.selector = f"{SHARD_LABEL}={self.shard}"
        self.lease = ShardLease(
            runtime.inner_client, operator=op.name, shard=self.shard,
            identity=runtime.identity, sharding=sharding, clock=runtime.clock,
            on_lost=self._lost,
        )
        base = op.leader_election or LeaderElection(namespace=sharding.namespace)
        self.election = base.named(f"{op.name}-sharder")
        self.assigner: Assigner | None = None
        self.elector: LeaderElector | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self._adopt: set[ParentKey] = set()
        self.releases = 0
        self.adopted = 0

    # --- the owner's side --------------------------------------------------------------------

    def releasing(self, parent: KubeObject) -> bool:
        """Whether this shard must let ``parent`` go (the drain mark is on it)."""
        return must_release(parent, self.shard)

    def acknowledge(self, parent: KubeObject) -> bool:
        """Acknowledge a drain (no reconcile of it runs: the work queue never hands a key to two
        workers): remove the shard label and the mark; whether it was written."""
        meta = meta_of(parent)
        patch = release_patch()
        patch["metadata"]["resourceVersion"] = meta.get("resourceVersion")
        try:
            self._runtime.client.patch(
                str(parent.get("apiVersion")), str(parent.get("kind")), str(meta.get("name")),
                patch, patch_type=_MERGE, namespace=meta.get("namespace"),
            )
        except ApiError as error:  # a conflict: the next event (or resync) tries again
            _log.warning("[%s/%s] acknowledging the drain failed: %s",
                         meta.get("namespace"), meta.get("name"), error)
            return False
        self._runtime.parents.cache.remove(parent)  # out of our selector now
        self.releases += 1
        self._runtime.metrics.shards.releases.inc()
        _log.info("[%s/%s] released to the assigner", meta.get("namespace"), meta.get("name"))
        return True

    def moved_in(self, key: ParentKey, parent: KubeObject) -> bool:
        """Whether a parent first seen now, after the initial list, came from another shard
        (it was reconciled before: it has a status); it is then marked for adoption."""
        rt = self._runtime
        if not rt.parents.has_synced or not parent.get("status"):
            return False
        with self._lock:
            self._adopt.add(key)
        return True

    def take_adoption(self, key: ParentKey) -> bool:
        """Whether ``key`` waits for adoption (and clear the mark)."""
        with self._lock:
            if key in self._adopt:
                self._adopt.discard(key)
                return True
            return False

    def adopt(self, parent: KubeObject) -> set[tuple[str, str]]:
        """Label a moved-in parent's children with this shard (one LIST per child type by
        owner uid, one PATCH per child still labelled otherwise), so that this replica's child
        informers see them; returns the child types. A child left over is relabelled by the
        parent's next reconcile (its desired state carries the label)."""
        meta = meta_of(parent)
        client = self._runtime.client
        op = self._runtime.operator
        selector = f"{MANAGED_BY_LABEL}={op.name},{OWNER_UID_LABEL}={meta.get('uid')}"
        types = self.child_types(parent)
        for api_version, kind in sorted(types):
            try:
                namespace = meta.get("namespace") if client.is_namespaced(
                    api_version, kind) else None
                body = client.list(api_version, kind, namespace=namespace,
                                   label_selector=selector)
                for child in body.get("items") or ():
                    if shard_of(child) == self.shard:
                        continue
                    child_meta = child.get("metadata") or {}
                    client.patch(
                        api_version, kind, str(child_meta.get("name")),
                        {"metadata": {"labels": {SHARD_LABEL: self.shard},
                                      "resourceVersion": child_meta.get("resourceVersion")}},
                        patch_type=_MERGE, namespace=child_meta.get("namespace"),
                    )
                    self.adopted += 1
            except ApiError as error:
                _log.warning("[%s/%s] adopting its %s children failed: %s",
                             meta.get("namespace"), meta.get("name"), kind, error)
        return types

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Take the Lease (one synchronous renewal), then renew and campaign in threads."""
        self.lease.renew()
        rt = self._runtime
        for target, name in ((self.lease.run, "optk-shard-lease"),
                             (self._campaign, "optk-sharder")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            rt.track(thread)
            thread.start()

    def stop(self, *, release: bool) -> None:
        """Stop assigning and renewing; ``release`` gives the Lease and the election up."""
        with self._lock:
            self._stopping = True
            elector = self.elector
        self.lease.stop()
        if elector is not None:
            elector.stop(release=release)
        if release:
            self.lease.release()

    @property
    def leading(self) -> bool:
        """Whether this replica runs the assigner now."""
        with self._lock:
            return self.assigner is not None

    def child_types(self, parent: KubeObject) -> set[tuple[str, str]]:
        """The types of a parent's children: what its (pure) builders produce, and the pruned
        kinds."""
        op = self._runtime.operator
        types = {(str(a), str(k)) for a, k in op.prune}
        try:
            for builder in compose(op.build(parent)):
                obj, _ = evaluate(builder, parent=parent)
                types.add((str(obj.get("apiVersion")), str(obj.get("kind"))))
        except Exception as error:  # a build failure is its owner's to report
            _log.debug("sharding: building %s failed: %s", meta_of(parent).get("name"), error)
        return types

    def _campaign(self) -> None:
        rt = self._runtime
        while True:
            with self._lock:
                if self._stopping:
                    return
                self.elector = LeaderElector(
                    rt.inner_client, self.election, identity=rt.identity,
                    on_started=self._lead, on_stopped=self._unlead, clock=rt.clock,
                )
                elector = self.elector
            elector.run()
            time.sleep(0.05)

    def _lead(self) -> None:
        rt = self._runtime
        op = rt.operator
        assigner = Assigner(
            rt.inner_client, api_version=op.api_version, kind=op.kind, operator=op.name,
            namespace=op.namespace, sharding=self.sharding, clock=rt.clock,
            metrics=rt.metrics.shards,
        )
        with self._lock:
            if self._stopping:
                return
            self.assigner = assigner
        rt.metrics.set_leader(self.election.name, True)
        thread = threading.Thread(target=assigner.run, name="optk-assigner", daemon=True)
        rt.track(thread)
        thread.start()

    def _unlead(self) -> None:
        with self._lock:
            assigner, self.assigner = self.assigner, None
        if assigner is not None:
            assigner.stop()
        self._runtime.metrics.set_leader(self.election.name, False)

    def _lost(self) -> None:
        rt = self._runtime
        if not rt.stopping:
            threading.Thread(target=rt.stop, kwargs={"release_lease": False},
                             name="optk-stop", daemon=True).start()
