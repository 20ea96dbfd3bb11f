"""Children placed in other clusters: applied through their cluster's client, recorded on the
parent, pruned from that record, deleted under the cleanup finalizer.

Why it exists: a child built with ``builders.placed(builder, cluster=NAME)`` (issue 41) lives in
another cluster, where no owner reference can name its parent, no informer of the operator sees
it and the garbage collector never deletes it. :class:`Placement` is the part of a parent's
reconcile that handles such children (``reconciler._reconcile.parents`` hands them over after its
own): for each cluster it takes that cluster's client from ``ClusterConnections`` and a
``ResourceReconciler`` over it (create, patch on a diff, delete when ABSENT, ownership by the
``optk.dev/owner-uid`` label, exactly as for a child at home), and it keeps the **inventory**.
Under a running operator (``use_informers``) that reconciler reads from the cluster's informers
(``reconciler._cache.remote``) and each pass tells them which kinds the parent places where
(``RemoteCaches.hold``): started on use, stopped unused.

The inventory: the annotation ``optk.dev/placed`` on the parent (:data:`PLACED_ANNOTATION`), a
JSON list of ``[cluster, apiVersion, kind, namespace, name]`` in build order. It is written
before anything is created (the union of what it held and what is built: a crash between the
create and the record cannot leak a child), and after the children were applied and pruned (what
is still wanted or not yet confirmed gone). Why an inventory on the parent and not only labels on
the remote children: deciding what to prune or delete from labels alone means listing every kind
ever placed in every cluster (and a cluster whose Secret went away could not be listed at all: its
children would be forgotten silently); the inventory says exactly where to look, and survives in
the parent's metadata where status (rebuilt from observation, dropped by a status-less restore)
would not. Both are kept: a remote object is updated or deleted only while its owner-uid label
names this parent (``ResourceReconciler``'s ownership check), so a stale or edited inventory
never deletes what is not ours.

A cluster that cannot be used (no such Secret, an unusable kubeconfig, no answer) holds back its
own children only: each waits with reason ``ClusterUnavailable`` and a message naming the cluster,
and the parent is reconciled again after a bounded backoff (``ClusterSecrets.retry_after``
doubling up to ``retry_max`` per cluster: never a hot loop). Nothing of its inventory is dropped:
a child placed before in a cluster whose Secret is gone is reported orphaned (reason
``ClusterRemoved``), never silently forgotten.

Boundary: the remote writes and the inventory. Which builder is placed where is the builders'
(``builders.placed``, read by ``reconciler._reconcile.declared``); the connections are
``reconciler._client.clusters``'.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from builders import DesiredState, ObjectRef
from builders.composition import Dependencies
from builders.objects import copy_object
from reconciler._base.clocks import Clock, RealClock
from reconciler._base.errors import ApiError, NotFoundError, ReconcilerError
from reconciler._base.keys import ParentKey, meta_of
from reconciler._base.text import bounded
from reconciler._cache.remote import RemoteCaches
from reconciler._client.caches import ReadCache
from reconciler._client.cluster_secrets import ClusterSecrets
from reconciler._client.clusters import ClusterConnections, ClusterUnavailableError, ClusterView
from reconciler._client.protocol import ClusterClient
from reconciler._reconcile.conditions import ChildError
from reconciler._reconcile.guard import PlanGuard
from reconciler._reconcile.reconciling import Action, ReconcileResult, ResourceReconciler
from reconciler._reconcile.resource_settings import ResourceSettings
from reconciler._reconcile.waits import Wait

__all__ = [
    "CLUSTERS_STATUS",
    "ORPHANED_REASON",
    "PLACED_ANNOTATION",
    "UNAVAILABLE_REASON",
    "Entry",
    "PlacedChild",
    "Placement",
    "PlacementOutcome",
    "Removal",
    "inventory_of",
    "inventory_patch",
]

_log = logging.getLogger(__name__)

PLACED_ANNOTATION = "optk.dev/placed"
"""On the parent: the inventory of its children placed in other clusters (JSON)."""

UNAVAILABLE_REASON = "ClusterUnavailable"
"""The reason of a placed child waiting for its cluster (condition ``Reconciled``)."""

ORPHANED_REASON = "ClusterRemoved"
"""The reason of a child placed before in a cluster whose Secret is gone: orphaned there,
reported (never silently forgotten) and kept in the inventory."""

_MERGE = "application/merge-patch+json"

CLUSTERS_STATUS = "clusters"
"""The parent's status field summarising its placed children per cluster: a list of
``{"name", "state": "Converged" | "Waiting", "reason", "message", "children"}`` sorted by name."""

CONVERGED, WAITING = "Converged", "Waiting"

Entry = tuple[str, str, str, str, str]
"""One inventory entry: (cluster, apiVersion, kind, namespace or "", name)."""


@attrs.frozen(kw_only=True)
class PlacedChild:
    """One child of the build placed in ``cluster``: its key, stamped object and state."""

    cluster: str
    ref: ObjectRef
    obj: dict[str, Any] = attrs.field(repr=False)
    state: DesiredState
    node: Dependencies | None = None
    """Its component (``builders.Component``), for the gates across clusters."""

    @property
    def entry(self) -> Entry:
        """Its inventory entry."""
        return _entry(self.cluster, self.ref)


def _entry(cluster: str, ref: ObjectRef) -> Entry:
    return (cluster, ref.api_version, ref.kind, ref.namespace or "", ref.name)


def _ref(entry: Entry) -> ObjectRef:
    return ObjectRef(api_version=entry[1], kind=entry[2], namespace=entry[3] or None,
                     name=entry[4])


def inventory_of(parent: Mapping[str, Any]) -> list[Entry]:
    """The entries ``parent``'s annotation records, in order (an unreadable value: none, and
    the remote children's owner-uid labels still keep anything from being taken over)."""
    raw = (meta_of(parent).get("annotations") or {}).get(PLACED_ANNOTATION)
    if not raw:
        return []
    try:
        value = json.loads(str(raw))
    except ValueError:
        _log.warning("%s: annotation %s is not JSON: ignored", ObjectRef.of(parent),
                     PLACED_ANNOTATION)
        return []
    entries: list[Entry] = []
    for item in value if isinstance(value, list) else ():
        if isinstance(item, list) and len(item) == 5 and all(isinstance(x, str) for x in item):
            entry: Entry = (item[0], item[1], item[2], item[3], item[4])
            if entry not in entries:
                entries.append(entry)
    return entries


def inventory_patch(entries: Sequence[Entry]) -> dict[str, Any]:
    """The merge patch recording ``entries`` (none: the annotation removed)."""
    value = json.dumps([list(e) for e in entries], separators=(",", ":")) if entries else None
    return {"metadata": {"annotations": {PLACED_ANNOTATION: value}}}


@attrs.frozen(kw_only=True)
class PlacementOutcome:
    """What one pass over a parent's placed children did: ``results`` (written or found
    unchanged, each child's), ``errors`` (a child that failed, its cluster in the message),
    ``waiting`` (children whose cluster cannot be used now), ``retry_after`` (seconds: when to
    try those clusters again), ``parent`` (the parent as the inventory write returned it) and
    ``clusters`` (one line per cluster the parent places in or recorded: converged, or waiting
    with the first reason)."""

    results: tuple[ReconcileResult, ...] = ()
    errors: tuple[ChildError, ...] = ()
    waiting: tuple[Wait, ...] = ()
    retry_after: float | None = None
    parent: Mapping[str, Any] | None = None
    clusters: tuple[dict[str, Any], ...] = ()
    """The summary per cluster (:data:`CLUSTERS_STATUS` of the parent's status), by name."""


@attrs.frozen(kw_only=True)
class Removal:
    """One pass of :meth:`Placement.remove_all`: ``deleted`` (a delete sent in this pass),
    ``left`` (still there: just deleted, or being deleted), ``waiting`` (why a cluster could
    not be used) and ``failed`` (a delete refused), each a line naming the cluster."""

    deleted: tuple[str, ...] = ()
    left: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()


class Placement:
    """The placed children of one operator's parents, over ``connections``; ``client`` is
    the operator's own cluster (the parent's inventory is written there). One
    ``ResourceReconciler`` per cluster client (rebuilt when the client is: a rotated Secret),
    with ``settings`` (``ResourceSettings``: the home children's)."""

    def __init__(self, client: ClusterClient, connections: ClusterConnections, *,
                 settings: ResourceSettings | None = None, clock: Clock | None = None,
                 dry_run: bool = False) -> None:
        self.client = client
        self.connections = connections
        self.settings = settings if settings is not None else ResourceSettings()
        """How a placed child is written: the home children's settings (strategy, per-kind
        strategies, recreate, field manager), so a placed child is written as any other."""
        self.clock: Clock = clock if clock is not None else RealClock()
        self.dry_run = dry_run
        self._resources: dict[str, tuple[ClusterClient, ResourceReconciler]] = {}
        self._failures: dict[str, int] = {}
        self._lock = threading.Lock()
        self.caches: RemoteCaches | None = None
        """The placed children's informers per (cluster, kind) (:meth:`use_informers`);
        None: each placed child is read with one GET per reconcile."""
        self.guards: Callable[[], PlanGuard | None] | None = None
        """Makes each cluster's ``PlanGuard`` (per-object policies, the drift mode,
        contention: the operator's, one per cluster since one name may live in several)."""

    def use_informers(self, caches: RemoteCaches, secrets: ReadCache) -> None:
        """Under a running operator: read the placed children from ``caches`` (informers per
        (cluster, kind), started and stopped as parents place kinds) and the clusters'
        Secrets from ``secrets`` (the driver's informer on their namespace): a steady state
        makes no request to any cluster."""
        self.caches = caches
        self.connections.reader = secrets
        self.connections.on_drop = caches.drop
        with self._lock:
            self._resources.clear()

    def forget(self, parent: ParentKey) -> None:
        """``parent`` is gone: the informers it held are let go."""
        if self.caches is not None:
            self.caches.forget(parent)

    @property
    def secrets(self) -> ClusterSecrets:
        """Where the clusters are declared."""
        return self.connections.secrets

    # -- while the parent lives -------------------------------------------------------------

    def apply(self, parent: Mapping[str, Any], uid: str, placed: Sequence[PlacedChild], *,
              prune: bool = True, gate: Callable[[PlacedChild], Wait | None] | None = None,
              observe: Callable[[PlacedChild, Mapping[str, Any] | None], None] | None = None,
              ) -> PlacementOutcome:
        """Bring ``placed`` to their states in their clusters, in that order, and prune what
        the inventory holds and the build no longer does (not when ``prune`` is False: a
        builder failed). ``gate(child)`` says why a child waits for its dependencies (then it
        is not written; ``reconciler._reconcile.ordering``), ``observe(child, live)`` hears
        what each write left. Never raises for a cluster's answer."""
        recorded = inventory_of(parent)
        wanted = [c.entry for c in placed]
        run = _Pass(self, parent, uid)
        view = run.view()
        self._hold(run, view, placed, recorded)
        # what may be created: recorded first (ABSENT needs no record, nor a cluster no
        # Secret declares: nothing can be created there)
        created = [c.entry for c in placed if c.state.is_present and c.cluster in view.clusters]
        before = [*recorded, *(e for e in created if e not in recorded)]
        if before != recorded and not run.record(before):
            return run.outcome()  # nothing placed before it is recorded
        gone: set[Entry] = set()
        for child in placed:
            run.touched.setdefault(child.cluster, 0)
            if child.state.is_present:
                run.touched[child.cluster] += 1
            if gate is not None and (wait := gate(child)) is not None:
                run.waiting.append(wait)
                run.troubles.setdefault(child.cluster, []).append((wait.reason, wait.message))
                continue
            result = run.place(view, child.cluster, child.obj, child.state)
            if observe is not None and result is not None:
                observe(child, result.live)
            if result is not None and child.state.is_absent and _gone(result):
                gone.add(child.entry)
        if prune:
            for entry in (e for e in recorded if e not in wanted):
                stub = _stub(_ref(entry))
                result = run.place(view, entry[0], stub, DesiredState.ABSENT, pruning=True)
                if result is not None and _gone(result):
                    gone.add(entry)
        after = [e for e in before if e not in gone]
        if after != inventory_of(run.parent):
            run.record(after)
        if gone:  # what is no longer placed nor recorded is watched no more
            self._hold(run, view, [c for c in placed if c.state.is_present], after)
        return run.outcome()

    def _hold(self, run: _Pass, view: ClusterView, placed: Sequence[PlacedChild],
              recorded: Sequence[Entry]) -> None:
        """The informers of the kinds this parent places (or recorded) in each usable cluster
        run; those it placed before and places no more are let go."""
        if self.caches is None or self.dry_run:
            return
        kinds: dict[str, set[tuple[str, str]]] = {}
        for child in placed:
            kinds.setdefault(child.cluster, set()).add((child.ref.api_version, child.ref.kind))
        for entry in recorded:
            kinds.setdefault(entry[0], set()).add((entry[1], entry[2]))
        key = run.ref.namespaced_name
        for cluster, record in view.clusters.items():
            try:
                client = self.connections.client(record)
            except ClusterUnavailableError:
                continue
            self.caches.hold(key, run.uid, cluster, client, kinds.get(cluster, ()))

    def namespaced(self, cluster: str, api_version: str, kind: str) -> bool | None:
        """Whether the kind is namespaced in ``cluster`` (its discovery, as its client caches
        it); None when that cluster does not serve it or cannot be used (the caller falls back
        to the home cluster's answer, ``reconciler._reconcile.declared``)."""
        try:
            record = self.connections.view().clusters.get(cluster)
            if record is None:
                return None
            return self.connections.client(record).is_namespaced(api_version, kind)
        except ReconcilerError:
            return None

    def served(self, cluster: str, api_version: str, kind: str) -> bool:
        """Whether ``cluster`` serves the kind now (its discovery; False when it cannot be
        used: the child waits either way)."""
        try:
            record = self.connections.view().clusters.get(cluster)
            return record is not None and self.connections.client(record).is_served(
                api_version, kind)
        except ReconcilerError:
            return False

    def read(self, cluster: str, ref: ObjectRef) -> Mapping[str, Any] | None:
        """``ref`` as ``cluster`` has it now (from its informer under a running operator),
        or None: not there, or the cluster cannot be used (a dependency there is not ready)."""
        try:
            record = self.connections.view().clusters.get(cluster)
            if record is None:
                return None
            client = self.connections.client(record)
            return self.resources(cluster, client).reader.get(
                ref.api_version, ref.kind, ref.name, namespace=ref.namespace)
        except ReconcilerError:
            return None

    # -- while it is being deleted ----------------------------------------------------------

    def teardown(self, parent: Mapping[str, Any], uid: str, *,
                 gate: Callable[[Entry], Wait | None] | None = None) -> str | None:
        """Delete every recorded child (last built first, each once ``gate`` lets it: what
        depends on it is gone) from its cluster: why the cleanup must wait (a cluster that
        cannot be used, children still being deleted or waiting for their dependents), or
        None when none is left. Raises ``ReconcilerError`` when a delete failed otherwise."""
        done = self.remove_all(parent, uid, gate=gate)
        if done.failed:
            raise ReconcilerError("; ".join(done.failed))
        if done.waiting:
            return "; ".join(done.waiting)
        if done.left:
            return "being deleted in other clusters: " + ", ".join(done.left)
        return None

    def remove_all(self, parent: Mapping[str, Any], uid: str, *,
                   gate: Callable[[Entry], Wait | None] | None = None) -> Removal:
        """One pass deleting every child ``parent``'s inventory records, last built first,
        each in its cluster and only while ours and ``gate`` lets it (for the cleanup
        finalizer; ``optk uninstall`` passes none); never raises for a cluster's answer."""
        recorded = inventory_of(parent)
        if not recorded:
            return Removal()
        run = _Pass(self, parent, uid)
        view = run.view()
        deleted: list[str] = []
        left: list[str] = []
        held: list[str] = []
        for entry in reversed(recorded):
            if gate is not None and (wait := gate(entry)) is not None:
                held.append(wait.message)
                continue
            result = run.place(view, entry[0], _stub(_ref(entry)), DesiredState.ABSENT,
                               pruning=True)
            if result is None:
                continue  # waits or failed: in the pass
            where = f"{_ref(entry)} in cluster {entry[0]!r}"
            if result.action is Action.DELETED:
                deleted.append(where)
            if not _gone(result) or result.action is Action.DELETED:
                left.append(where)
        return Removal(deleted=tuple(deleted), left=tuple(left),
                       waiting=tuple(dict.fromkeys([*(w.message for w in run.waiting), *held])),
                       failed=tuple(e.message for e in run.errors))

    # -- per cluster ------------------------------------------------------------------------

    def resources(self, cluster: str, client: ClusterClient) -> ResourceReconciler:
        """The resource reconciler of ``cluster`` over ``client`` (kept while it is the same)."""
        with self._lock:
            kept = self._resources.get(cluster)
            if kept is not None and kept[0] is client:
                return kept[1]
            caches = self.caches
            guard = self.guards() if self.guards is not None else None
            if caches is None:
                made = ResourceReconciler(client, settings=self.settings, clock=self.clock,
                                          dry_run=self.dry_run, guard=guard)
            else:  # writes recorded into the cluster's informers, reads from them
                made = ResourceReconciler(caches.client(cluster, client), settings=self.settings,
                                          reader=caches.reader(cluster, client),
                                          clock=self.clock, dry_run=self.dry_run, guard=guard)
            self._resources[cluster] = (client, made)
            return made

    def failed(self, cluster: str) -> float:
        """Count a failure of ``cluster``: the delay before it is tried again (bounded)."""
        with self._lock:
            count = self._failures.get(cluster, 0)
            self._failures[cluster] = count + 1
        delay: float = self.secrets.retry_after * (2 ** min(count, 20))
        return min(float(self.secrets.retry_max), delay)

    def answered(self, cluster: str) -> None:
        """``cluster`` answered: its backoff starts over."""
        with self._lock:
            self._failures.pop(cluster, None)


class _Pass:
    """One pass over one parent's placed children."""

    def __init__(self, owner: Placement, parent: Mapping[str, Any], uid: str) -> None:
        self.o = owner
        self.parent = parent
        self.uid = uid
        self.ref = ObjectRef.of(parent)
        self.results: list[ReconcileResult] = []
        self.errors: list[ChildError] = []
        self.waiting: list[Wait] = []
        self.retry: list[float] = []
        self.down: dict[str, str] = {}  # clusters found unusable in this pass: why
        self.written: Mapping[str, Any] | None = None
        self.recorded = set(inventory_of(parent))  # placed before: orphaned if its cluster goes
        self.touched: dict[str, int] = {}  # the clusters of this pass: children present there
        self.troubles: dict[str, list[tuple[str, str]]] = {}  # by cluster: (reason, message)

    def view(self) -> ClusterView:
        try:
            return self.o.connections.view()
        except ReconcilerError as exc:  # the Secrets cannot be read: every cluster waits
            why = f"the cluster Secrets in {self.o.secrets.namespace} cannot be read: {exc}"
            return ClusterView(unreadable=why)

    def record(self, entries: Sequence[Entry]) -> bool:
        """Write the inventory; False (and an error on the parent) when that failed."""
        if self.o.dry_run:
            return True
        try:
            self.written = self.o.client.patch(
                self.ref.api_version, self.ref.kind, self.ref.name, inventory_patch(entries),
                patch_type=_MERGE, namespace=self.ref.namespace)
        except ReconcilerError as exc:
            self.errors.append(ChildError(
                ref=self.ref, message=f"recording the placed children failed: {exc}",
                error=exc))
            return False
        self.parent = self.written
        return True

    def place(self, view: ClusterView, cluster: str, obj: dict[str, Any], state: DesiredState,
              *, pruning: bool = False) -> ReconcileResult | None:
        """One child in its cluster: its result, or None when it waits or failed."""
        ref = ObjectRef.of(obj)
        why = self.down.get(cluster) or view.why_not(cluster, self.o.secrets)
        if why is None:
            try:
                client = self.o.connections.client(view.clusters[cluster])
            except ClusterUnavailableError as exc:
                why = str(exc)
        if why is not None:
            if view.removed(cluster) and _entry(cluster, ref) in self.recorded:
                self._wait(cluster, ref, why, reason=ORPHANED_REASON, message=(
                    f"{ref} in cluster {cluster!r} is orphaned: {why}; it stays recorded "
                    f"until that Secret returns (or optk uninstall)"))
            else:
                self._wait(cluster, ref, why)
            return None
        try:
            result = self.o.resources(cluster, client).reconcile_resource(
                copy_object(obj), state, owner_uid=self.uid)
        except ApiError as exc:
            if exc.code == 0:  # no answer: refused, reset, timed out
                self._wait(cluster, ref, f"cluster {cluster!r} did not answer: {exc}")
                return None
            if pruning and isinstance(exc, NotFoundError):  # the kind is not served there
                return None
            self.o.answered(cluster)
            what = "prune" if pruning else "placing"
            self._error(cluster, ChildError(
                ref=ref, message=f"{what} {ref} in cluster {cluster!r} failed: {exc}",
                error=exc))
            return None
        except ReconcilerError as exc:
            self._error(cluster, ChildError(
                ref=ref, message=f"{ref} in cluster {cluster!r}: {exc}", error=exc))
            return None
        self.o.answered(cluster)
        result = attrs.evolve(result, cluster=cluster)
        if result.action is not Action.UNCHANGED or not pruning:
            self.results.append(result)
        return result

    def _error(self, cluster: str, error: ChildError) -> None:
        self.errors.append(error)
        self.troubles.setdefault(cluster, []).append(("Failed", error.message))

    def _wait(self, cluster: str, ref: ObjectRef, why: str, *,
              reason: str = UNAVAILABLE_REASON, message: str = "") -> None:
        if cluster not in self.down:
            self.down[cluster] = why
            delay = self.o.failed(cluster)
            self.retry.append(delay)
            _log.info("%s: cluster %r cannot be used, its children wait (again in %.0fs): %s",
                      self.ref, cluster, delay, why)
        wait = Wait(ref=ref, reason=reason, message=message
                    or f"{ref} waits for cluster {cluster!r}: {why}")
        self.waiting.append(wait)
        self.troubles.setdefault(cluster, []).append((wait.reason, wait.message))

    def outcome(self) -> PlacementOutcome:
        return PlacementOutcome(results=tuple(self.results), errors=tuple(self.errors),
                                waiting=tuple(self.waiting),
                                retry_after=min(self.retry) if self.retry else None,
                                parent=self.written, clusters=self.summary())

    def summary(self) -> tuple[dict[str, Any], ...]:
        """One line per cluster of this pass: converged, or waiting with its first trouble."""
        lines = []
        for cluster in sorted({*self.touched, *(e[0] for e in self.recorded), *self.troubles}):
            troubles = self.troubles.get(cluster)
            count = self.touched.get(cluster, 0)
            if troubles:
                reason, message = troubles[0]
                more = f" (and {len(troubles) - 1} more)" if len(troubles) > 1 else ""
                lines.append({"name": cluster, "state": WAITING, "reason": reason,
                              "message": bounded(message + more), "children": count})
            else:
                lines.append({"name": cluster, "state": CONVERGED, "reason": CONVERGED,
                              "message": f"{count} children converged", "children": count})
        return tuple(lines)


def _gone(result: ReconcileResult) -> bool:
    """Whether an ABSENT child is off this parent's hands: not there, or not ours (skipped:
    another owner's, never deleted by us)."""
    return result.live is None or result.action is Action.SKIPPED


def _stub(ref: ObjectRef) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": ref.name}
    if ref.namespace:
        meta["namespace"] = ref.namespace
    return {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": meta}
