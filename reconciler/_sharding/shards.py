"""Sharding at run time: the shard Lease, the drain acknowledgement, adoption, the assigner's
election.

The I/O shell around the pure decisions of ``reconciler._sharding``. ``ShardLease`` holds and
renews this replica's Lease ``<operator>-shard-<id>`` (a replica that cannot renew within the
renew deadline stops, before the assigner can consider it gone). The ``Assigner``
(``reconciler._sharding.assigner``) runs on the one replica that wins the ``<operator>-sharder``
election. ``Shards`` is what the runtime holds: the shard id, the label selector its informers
use (children carry their parent's shard label: ``decisions.child_labels``), the owner's side of
the drain handshake (``releasing``/``acknowledge``), the adoption of a moved-in parent's children
(one conditional JSON patch per child its builders name, no LIST), and the threads.

What ``Shards`` receives from the runtime (``reconciler._driver.runtime`` wires it; it never sees
the runtime): the ``replica`` (a ``ReplicaShard``: the operator's name, parent type, namespace,
prune kinds and leader election settings, for the assigner and the sharder election; the
``sharding`` settings, this replica's ``shard`` id, resolved by the runtime first since the
informers' selectors need it, and its ``identity``); two clients, ``leases`` (the plain one:
Leases and the assigner) and ``client`` (the recording one: a drain acknowledgement and an
adoption are the operator's writes); the ``caches`` (``Caches``: the ``parents`` informer, which
an acknowledged parent leaves, and the child ``informers``, whose seen children an adoption
leaves alone); ``declared(parent)`` (the reconciler's: what a parent's builders name); the
``clock`` and ``metrics``; and the ``lifecycle`` (``Lifecycle``: ``stopping()``, ``stop()``, which
here stops the runtime leaving the Lease to expire when it is not renewed, and
``track(thread)``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection

import attrs

from builders import ObjectRef
from builders.names import MANAGED_BY_LABEL, OWNER_UID_LABEL
from reconciler._base.clocks import Clock
from reconciler._base.errors import ApiError, ConflictError, InvalidError, NotFoundError
from reconciler._base.keys import ParentKey, meta_of
from reconciler._base.lifecycle import Lifecycle
from reconciler._base.metrics import OperatorMetrics
from reconciler._cache.children import Caches
from reconciler._client.protocol import ClusterClient, KubeObject
from reconciler._leadership.election import LeaderElection, LeaderElector
from reconciler._leadership.leases import LeaseWriter
from reconciler._reconcile.declared import DeclaredChildren
from reconciler._sharding.assigner import Assigner
from reconciler._sharding.decisions import (
    RING_LABEL,
    SHARD_LABEL,
    Sharding,
    adoption,
    lease_name,
    must_release,
    release_patch,
)

__all__ = ["ReplicaShard", "ShardLease", "Shards", "shard_selector"]

_log = logging.getLogger("optk.sharding")
_MERGE = "application/merge-patch+json"
_JSON_PATCH = "application/json-patch+json"


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
        self.leases = LeaseWriter(client, name=self.name, namespace=sharding.namespace,
                                  labels={RING_LABEL: operator, SHARD_LABEL: shard})
        self._clock = clock
        self._on_lost = on_lost
        self._cond = threading.Condition()
        self._stopping = False
        self.renewals = 0

    def renew(self) -> bool:
        """One renewal (creating the Lease the first time); whether it succeeded."""
        try:
            self.leases.hold(self.leases.read(), self.identity, now=self._clock.time(),
                             duration=max(1, round(self.sharding.lease_duration)))
        except ApiError as error:
            _log.warning("renewing shard lease %s failed: %s", self.leases.where, error)
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
            self.leases.release(self.identity, now=self._clock.time())
        except ApiError as error:
            _log.warning("releasing shard lease %s failed: %s", self.name, error)

    def _sleep(self, seconds: float) -> bool:
        with self._cond:
            deadline = self._clock.monotonic() + seconds
            while not self._stopping and self._clock.monotonic() < deadline:
                self._clock.wait(self._cond, deadline - self._clock.monotonic())
            return self._stopping


def shard_selector(shard: str) -> str:
    """The label selector of the objects of ``shard``: its parents, and their children."""
    return f"{SHARD_LABEL}={shard}"


@attrs.frozen(kw_only=True)
class ReplicaShard:
    """This replica's place in the ring: the operator it runs (name, parent type, namespace,
    prune kinds, leader election settings), the sharding settings, its shard id and identity."""

    operator_name: str
    api_version: str
    kind: str
    namespace: str | None
    prune: Collection[tuple[str, str]]
    leader_election: LeaderElection | None
    sharding: Sharding
    shard: str
    identity: str


class Shards:
    """The runtime's sharding: its shard, Lease, assigner election and drain acknowledgement."""

    def __init__(
        self,
        replica: ReplicaShard,
        *,
        leases: ClusterClient,
        client: ClusterClient,
        caches: Caches,
        declared: Callable[[KubeObject], DeclaredChildren],
        clock: Clock,
        metrics: OperatorMetrics,
        lifecycle: Lifecycle,
    ) -> None:
        operator_name, sharding, shard = replica.operator_name, replica.sharding, replica.shard
        self._operator_name = operator_name
        self._parent_type = (replica.api_version, replica.kind)
        self._namespace = replica.namespace
        self._prune = {(str(a), str(k)) for a, k in replica.prune}
        self._identity = replica.identity
        self._leases = leases
        self._client = client
        self._parents = caches.parents
        self._informers = caches.informers
        self._declared = declared
        self._clock = clock
        self._metrics = metrics
        self._lifecycle = lifecycle
        self._track = lifecycle.track
        self.sharding = sharding
        self.shard = shard
        self.selector = shard_selector(shard)
        self.lease = ShardLease(
            leases, operator=operator_name, shard=shard, identity=replica.identity,
            sharding=sharding, clock=self._clock, on_lost=self._lost,
        )
        base = replica.leader_election or LeaderElection(namespace=sharding.namespace)
        self.election = base.named(f"{operator_name}-sharder")
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
            self._client.patch(
                str(parent.get("apiVersion")), str(parent.get("kind")), str(meta.get("name")),
                patch, patch_type=_MERGE, namespace=meta.get("namespace"),
            )
        except ApiError as error:  # a conflict: the next event (or resync) tries again
            _log.warning("[%s/%s] acknowledging the drain failed: %s",
                         meta.get("namespace"), meta.get("name"), error)
            return False
        self._parents.cache.remove(parent, own_write=True)  # out of our selector now
        with self._lock:
            self._adopt.discard((str(meta.get("namespace") or ""), str(meta.get("name"))))
        self.releases += 1
        self._metrics.shards.releases.inc()
        _log.info("[%s/%s] released to the assigner", meta.get("namespace"), meta.get("name"))
        return True

    def moved_in(self, key: ParentKey, parent: KubeObject) -> bool:
        """Whether a parent first seen now, after the initial list, came from another shard
        (it was reconciled before: it has a status); it is then marked for adoption."""
        if not self._parents.has_synced or not parent.get("status"):
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

    def adopt(self, parent: KubeObject, *, write: bool = True) -> set[tuple[str, str]]:
        """Label a moved-in parent's children with this shard, so that this replica's child
        informers see them; returns the child types. Each child its (pure) builders name is read
        (one GET) and, unless it is already this shard's, not the operator's and this parent's,
        or its ``optk.dev/policy`` forbids patches (``adoption``), gets one JSON patch tied to
        the version read; a child already in this replica's child cache is left alone.
        Unbuilt children of the prune kinds (which the reconcile must see to prune them) are
        found by one LIST per prune kind by owner uid and relabelled alike. A child left over
        is relabelled by the parent's next reconcile (its desired state carries the label).
        ``write`` False (a paused parent: nothing of it may be written) labels nothing and only
        returns the types; its first reconcile after the pause relabels its children."""
        meta = meta_of(parent)
        uid = str(meta.get("uid"))
        built, types = self._built_children(parent)
        if not write:
            return types
        for ref in built:
            self._adopt_one(ref.api_version, ref.kind, ref.name, ref.namespace, uid)
        for api_version, kind in sorted(self._prune):
            self._adopt_unbuilt(parent, api_version, kind, named={
                r.name for r in built if (r.api_version, r.kind) == (api_version, kind)})
        return types

    def _adopt_one(self, api_version: str, kind: str, name: str, namespace: str | None,
                   owner_uid: str) -> None:
        try:
            namespace = namespace if self._client.is_namespaced(api_version, kind) else None
            informer = self._informers.informer(api_version, kind)
            if informer is not None and informer.cache.get(namespace or "", name) is not None:
                return  # already labelled for this shard
            live = self._client.get(api_version, kind, name, namespace=namespace)
        except NotFoundError:
            return  # missing: the reconcile creates it
        except ApiError as error:
            _log.warning("adopting %s %s/%s failed: %s", kind, namespace, name, error)
            return
        self._adopt_live(live, owner_uid)

    def _adopt_live(self, live: KubeObject, owner_uid: str) -> None:
        """Relabel one child read from the server, if ``adoption`` says to."""
        meta = meta_of(live)
        api_version, kind = str(live.get("apiVersion")), str(live.get("kind"))
        name, namespace = str(meta.get("name")), meta.get("namespace")
        patch = adoption(live, shard=self.shard, operator=self._operator_name,
                         owner_uid=owner_uid)
        if patch is None:
            return  # not ours, already ours, or its policy forbids the write
        try:
            self._client.patch(api_version, kind, name, patch, patch_type=_JSON_PATCH,
                               namespace=namespace)
        except (NotFoundError, InvalidError, ConflictError):
            return  # gone, or changed since the read: the parent's reconcile decides
        except ApiError as error:
            _log.warning("adopting %s %s/%s failed: %s", kind, namespace, name, error)
            return
        self.adopted += 1

    def _adopt_unbuilt(self, parent: KubeObject, api_version: str, kind: str, *,
                       named: set[str]) -> None:
        meta = meta_of(parent)
        client = self._client
        selector = (f"{MANAGED_BY_LABEL}={self._operator_name},"
                    f"{OWNER_UID_LABEL}={meta.get('uid')}")
        try:
            namespace = meta.get("namespace") if client.is_namespaced(api_version, kind) else None
            body = client.list(api_version, kind, namespace=namespace, label_selector=selector)
        except ApiError as error:
            _log.warning("[%s/%s] listing its %s children failed: %s",
                         meta.get("namespace"), meta.get("name"), kind, error)
            return
        for child in body.get("items") or ():
            if (child.get("metadata") or {}).get("name") not in named:
                # a list's items carry no type: the list's own
                self._adopt_live({**child, "apiVersion": api_version, "kind": kind},
                                 str(meta.get("uid")))

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Take the Lease (one synchronous renewal), then renew and campaign in threads."""
        self.lease.renew()
        for target, name in ((self.lease.run, "optk-shard-lease"),
                             (self._campaign, "optk-sharder")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            self._track(thread)
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
        return self._built_children(parent)[1]

    def _built_children(self, parent: KubeObject) -> tuple[list[ObjectRef], set[tuple[str, str]]]:
        """The children a parent's (pure) builders name, and their types with the pruned
        kinds."""
        declared = self._declared(parent)  # as the reconcile builds them
        for error in declared.errors:  # a build failure is its owner's to report
            _log.debug("sharding: building %s failed: %s", meta_of(parent).get("name"), error)
        refs = [child.ref for child in declared.children]
        return refs, self._prune | declared.types

    def _campaign(self) -> None:
        while True:
            with self._lock:
                if self._stopping:
                    return
                self.elector = LeaderElector(
                    self._leases, self.election, identity=self._identity,
                    on_started=self._lead, on_stopped=self._unlead, clock=self._clock,
                )
                elector = self.elector
            elector.run()
            time.sleep(0.05)

    def _lead(self) -> None:
        assigner = Assigner(
            self._leases, api_version=self._parent_type[0], kind=self._parent_type[1],
            operator=self._operator_name, namespace=self._namespace, sharding=self.sharding,
            clock=self._clock,
            metrics=self._metrics.shards,
        )
        with self._lock:
            if self._stopping:
                return
            self.assigner = assigner
        self._metrics.set_leader(self.election.name, True)
        thread = threading.Thread(target=assigner.run, name="optk-assigner", daemon=True)
        self._track(thread)
        thread.start()

    def _unlead(self) -> None:
        with self._lock:
            assigner, self.assigner = self.assigner, None
        if assigner is not None:
            assigner.stop()
        self._metrics.set_leader(self.election.name, False)

    def _lost(self) -> None:
        self._lifecycle.stop_soon()  # its ``stop`` leaves the Lease to expire
