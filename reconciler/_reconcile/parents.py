"""The parent reconcile: run one parent's builders and bring every child to its desired state.

``ParentReconciler.reconcile(parent)`` is a plain call (the driver's work queue calls it, and so can
a test or a script). It builds the children, stamps the identity of DESIGN.md section 5 on each
(labels, controller owner reference, namespace), reads the live children with one LIST per kind
(by the ``optk.dev/owner-uid`` label) instead of one GET per child, reconciles every child through
``ResourceReconciler`` (one child's error never stops the others), optionally prunes children that
are ours and no longer built (per-kind allow-list; cluster-scoped kinds cluster-wide, CRDs last
and never while they hold users' custom resources), records Events on the parent, and writes the
parent's status conditions (DESIGN.md section 6) only when they changed. Before any child the
garbage collector cannot collect is written, the cleanup finalizer is put on the parent
(``reconciler._reconcile.cleanups``); the worker runs the cleanup when the parent is deleted.

The module is over 500 lines because one parent's reconcile is one sequence (build, finalizer,
one LIST per kind, each child, prune, Events, status) whose steps share the run's state; the
decisions it takes are elsewhere (``planning``, ``conditions``, ``finalizing``, ``declared``),
so what is left is the sequence itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

import attrs

from builders import DesiredState, ObjectRef, ResourceBuilder
from builders.composition import Dependencies, builder_name
from builders.convert import is_client_model, to_plain_object
from builders.names import (
    OWNER_UID_LABEL,
    label_value,
)
from builders.objects import copy_object
from reconciler._base.clocks import Clock, RealClock
from reconciler._base.errors import (
    ApiError,
    KindUnlistableError,
    LeadershipLostError,
    NamespaceTerminatingError,
    NotFoundError,
    ReconcilerError,
    ReconcilerUsageError,
)
from reconciler._base.keys import meta_of
from reconciler._base.ratelimit import CauseLimiter
from reconciler._base.text import bounded
from reconciler._client.caches import PassThroughCache, ReadCache
from reconciler._client.clusters import ClusterConnections
from reconciler._client.counting import (
    counting,
    counting_reader,
    recording,
    uncounted,
)
from reconciler._client.protocol import ClusterClient, KubeObject
from reconciler._reconcile.cleanups import (
    ParentCleanup,
    count_custom_resources,
    release_kept,
    release_to_others,
)
from reconciler._reconcile.conditions import (
    ChildError,
    ParentResult,
    described,
    parent_conditions,
    parent_events,
    prune_conditions,
    status_patch,
)
from reconciler._reconcile.contention import ContentionDetector, Contest
from reconciler._reconcile.declared import DeclaredChildren, declared_children, stamp_child
from reconciler._reconcile.events import EventRecorder, EventSink
from reconciler._reconcile.failures import builder_failure
from reconciler._reconcile.finalizing import is_uncollectable, refuses_data_loss
from reconciler._reconcile.guard import PlanGuard
from reconciler._reconcile.interventions import (
    intervention_conditions,
    intervention_events,
    paused_status_patch,
    with_interventions,
)
from reconciler._reconcile.memo import BuildMemo, ChildMemo, RecentKeys, StatusMemo
from reconciler._reconcile.ordering import ChildGates, PlacedKey
from reconciler._reconcile.parent_settings import ParentSettings
from reconciler._reconcile.placement import (
    CLUSTERS_STATUS,
    PlacedChild,
    Placement,
    inventory_of,
)
from reconciler._reconcile.planning import ABSENT_NOT_OURS
from reconciler._reconcile.readiness import (
    health_waits,
    not_ready,
    readiness_status_patch,
)
from reconciler._reconcile.reconciling import (
    Action,
    ReconcileResult,
    ResourceReconciler,
    is_owned,
)
from reconciler._reconcile.resource_settings import moved_into
from reconciler._reconcile.sharing import is_kept, is_shared, ownership_marker, shared_record
from reconciler._reconcile.waits import NOT_OURS, Wait, WaitRegistry, Watch, waiting_message

__all__ = ["ChildError", "ParentReconciler", "ParentResult", "parent_conditions",
           "unlisted_cause"]

_log = logging.getLogger(__name__)

_READ: Any = object()  # "read this child on its own"
_SERVER: Any = object()  # "read this child from the server, not a cache"
_RELEASED = "released"  # a CRD left to the parents of its custom resources (sharing)
_AGAIN = 0.001  # seconds: a reconcile whose awaited child changed meanwhile runs again
_PLACED_AGAIN = 0.05  # seconds: a home child waits on a placed one this pass wrote
_TERMINATING_KEPT = 4096  # parents whose namespace is being deleted, remembered by uid
_UNLISTABLE = ("; its children fail, pruning it is blocked (condition PruneBlocked) until it "
               "lists")


def unlisted_cause(api_version: str, kind: str) -> tuple[str, str, str]:
    """The cause key (``CauseLimiter``) of every line about a kind that cannot be listed."""
    return ("unlistable", api_version, kind)


def _order(ref: ObjectRef) -> str:
    """The order children are listed and pruned in (stable across runs)."""
    return str((ref.api_version, ref.kind, ref.namespace, ref.name))


class ParentReconciler:
    """Reconciles parents of one kind: ``reconcile(parent) -> ParentResult``.

    ``build(parent)`` returns the parent's ``ResourceBuilder`` list, in order. ``operator_name``
    fills the ``app.kubernetes.io/managed-by`` label and is the Events' reporting component.
    ``settings`` (``ParentSettings``) says what the reconcile does besides the children:
    ``prune_kinds`` lists the ``(apiVersion, kind)`` pairs whose unbuilt children (ours, found by
    the ``optk.dev/owner-uid`` label) are deleted; pruning is off when it is empty. Events and
    status writing can be switched off. ``dry_run`` writes nothing (server-side dry runs for
    creates and patches, no Events, no status): the result is a plan. The flat keywords of
    earlier releases (``events=False``, ...) still work with a ``DeprecationWarning``. The
    status (with
    ``lastReconcileTime``) is written only when its conditions or ``observedGeneration`` change,
    so a steady state makes no writes; the driver's restart-proof resync schedule needs no fresher
    time (it rests on its own heartbeat). ``status_refresh`` (seconds, default ``None``: off)
    optionally also rewrites the time once it is that old, at one write per parent per period.
    ``reuse_builds``: see ``Applying.reuse_builds`` and ``reconciler._reconcile.memo.BuildMemo``.
    ``child_labels(parent)``: labels each of its children carries besides its identity (a
    sharded operator's: the parent's shard label). ``parent_alive``: see the attribute.
    ``event_sink``: where the Events go (default: an ``EventRecorder`` over ``client``, inline;
    the driver passes its ``EventSender``).
    """

    def __init__(
        self,
        client: ClusterClient,
        build: Callable[[KubeObject], Iterable[ResourceBuilder]],
        *,
        operator_name: str,
        settings: ParentSettings | None = None,
        reader: ReadCache | None = None,
        resources: ResourceReconciler | None = None,
        clock: Clock | None = None,
        event_sink: EventSink | None = None,
        parent_alive: Callable[[KubeObject], bool] | None = None,
        **flat: Any,
    ) -> None:
        settings = moved_into(settings, flat, owner="ParentReconciler", kind=ParentSettings)
        self.settings = settings
        dry_run, child_labels = settings.dry_run, settings.child_labels
        self.client = counting(client)
        self.build = build
        self.child_labels = child_labels
        """A parent's labels for its children, stamped with their identity
        (``reconciler._reconcile.declared``); None: none."""
        self.operator_name = operator_name
        self.clock: Clock = clock if clock is not None else RealClock()
        self.reader = counting_reader(
            reader if reader is not None else PassThroughCache(uncounted(client))
        )
        self.resources = resources if resources is not None else ResourceReconciler(
            self.client, reader=self.reader, clock=self.clock, dry_run=dry_run
        )
        if self.resources.dry_run != dry_run:
            raise ReconcilerUsageError(
                "ParentReconciler(dry_run=...) must match its resources' dry_run"
            )
        self.dry_run = dry_run
        self.prune_kinds = frozenset(settings.prune_kinds)
        self.recorder: EventSink | None = None if (not settings.events or dry_run) else (
            event_sink or EventRecorder(self.client, component=operator_name, clock=self.clock))
        self.write_status = settings.write_status and not dry_run
        self.status_refresh = settings.status_refresh
        # Ready from the children's health (reconciler._reconcile.readiness)
        self.readiness = settings.readiness
        self.status_builder = settings.status
        self.memo = ChildMemo()  # a resync of an unchanged child skips the match (_memo)
        self.statuses = StatusMemo()  # nor writes a status the server took (a pruning schema)
        # nor builds an unchanged parent
        self.builds = BuildMemo() if settings.reuse_builds else None
        self._no_status_subresource: set[tuple[str, str]] = set()
        self.cleanup = ParentCleanup(self.client, on_delete=settings.on_delete, clock=self.clock,
                                     dry_run=dry_run)
        """The cleanup finalizer of this operator's parents (``reconciler._reconcile.cleanups``)."""
        self._terminating: RecentKeys[str] = RecentKeys(size=_TERMINATING_KEPT)  # parent uids
        self.waits = WaitRegistry()
        """What each parent waits on (its children's dependencies, unhealthy children): the
        driver's event routing wakes it when that changes (``reconciler._reconcile.waits``)."""
        self.cleanup.teardown = self.teardown
        # placed children are written as the others, under the same field manager (a
        # cluster's client has no operator name of its own)
        written = attrs.evolve(self.resources.settings,
                               field_manager=self.resources.field_manager)
        self.placement = None if settings.clusters is None else Placement(
            self.client, ClusterConnections(settings.clusters, PassThroughCache(self.client),
                                            operator_name=self.resources.field_manager),
            settings=written, clock=self.clock, dry_run=dry_run)
        """The children placed in other clusters (``reconciler._reconcile.placement``);
        None: the operator has no clusters (``ParentSettings(clusters=...)``). On its own, the
        cluster Secrets are read with one LIST per reconcile that places children and each
        placed child with one GET (not through ``reader``: the child informers see only objects
        with the operator's managed-by label, which a cluster Secret does not carry); the driver
        hands it informers for both (``Placement.use_informers``). Each cluster's children are
        written under a guard like the home one's (per-object policies, the drift mode,
        contention), one per cluster."""
        home_guard = self.resources.guard
        if self.placement is not None and home_guard is not None:
            self.placement.guards = partial(_guard_like, home_guard, self.clock)
        self.parent_alive = parent_alive
        """Whether a parent is still there and not being deleted, as the caller's cache says
        (the driver passes its parent informer's view; no request): asked before each child
        write and the status, so that no child is created for a parent that went away
        meanwhile (``ParentResult.parent_gone``). None: not asked."""
        self.pause = settings.pause
        """Operator- and namespace-wide pauses; a parent's own annotation is read too."""
        self.drifted: dict[str, int] = {}
        """Children whose drift is reported instead of repaired, by parent uid."""
        self.warnings = CauseLimiter(self.clock)
        """One WARNING per cause per interval (``reconciler._base.ratelimit``): a kind that
        cannot be listed is said once, not once per parent per retry; the driver's failure
        lines share it."""

    def namespace_terminating(self, uid: str) -> None:
        """Remember that parent ``uid``'s namespace is being deleted: leave the parent alone."""
        self._terminating.add(uid)

    # -- entry point ------------------------------------------------------------------------

    def reconcile(self, parent: KubeObject) -> ParentResult:
        """Reconcile every child of ``parent`` (a live object with a uid); never raises for a
        child's failure: those are in ``ParentResult.errors`` and in the parent's status."""
        # Builders and hooks get a private copy: the informer cache shares equal parts between
        # cached objects, and a builder that edits its parent in place must not reach them.
        parent = to_plain_object(parent) if is_client_model(parent) else copy_object(parent)
        parent_ref = ObjectRef.of(parent)
        uid = meta_of(parent).get("uid")
        if not uid or not parent_ref.name:
            raise ReconcilerUsageError(
                f"parent {parent_ref} must be a live object with metadata.uid"
            )
        if self._terminating.touch(str(uid)):  # a hit keeps it: least recently used dropped
            return ParentResult(parent=parent_ref, namespace_terminating=True)
        run = _ParentRun(self, parent, str(uid))
        paused = self.pause.reason(parent)  # honoured before anything is written
        since = self.waits.mark()
        with recording() as calls:
            result = run.execute() if paused is None else run.paused(*paused)
        self._report(str(uid), result)
        if not self.dry_run and self.waits.replace(
                parent_ref.namespaced_name, () if result.parent_gone else
                (*run.waiting, *run.health, *not_ours_waits(run.results)), since=since):
            # what it waits on changed during this reconcile: look again at once
            result = attrs.evolve(result, requeue_after=_AGAIN)
        return attrs.evolve(result, api_calls=tuple(calls))

    def teardown(self, parent: KubeObject) -> str | None:
        """For the cleanup finalizer of a parent being deleted: delete its children that
        belong to components in reverse dependency order (``reconciler._reconcile.ordering``),
        and those placed in other clusters (the same order across clusters);
        why the cleanup must wait (children waiting for their dependents to be gone), or None
        when nothing of them is left to delete in order; raises ``ReconcilerError`` naming the
        children whose deletion failed."""
        parent = to_plain_object(parent) if is_client_model(parent) else copy_object(parent)
        uid = str(meta_of(parent).get("uid") or "")
        run = _ParentRun(self, parent, uid)
        with recording():
            deleted = run.teardown()
        self.waits.replace(run.ref.namespaced_name, run.waiting)
        if run.errors:  # a failure, not a wait: the cleanup reports it as one
            raise ReconcilerError("; ".join(described(e) for e in run.errors))
        home = waiting_message(run.waiting) if run.waiting else (
            "children are still being deleted" if any(
                r.action is Action.DELETED for r in deleted) else None)
        if self.placement is not None:  # and those placed in other clusters, last first,
            # each once what depends on it is gone (at home or in another cluster)
            placed = self.placement.teardown(parent, uid, gate=run.placed_teardown_gate)
            return "; ".join(why for why in (home, placed) if why) or None
        if home is not None:
            return home
        if recorded := inventory_of(parent):
            return (f"{len(recorded)} children placed in other clusters are recorded "
                    f"(annotation optk.dev/placed) but the operator has no clusters "
                    f"(ParentSettings(clusters=...)): they cannot be deleted")
        return None

    def drifted_count(self) -> int:
        """Children whose drift is reported instead of repaired (``optk_drifted_objects``)."""
        return sum(self.drifted.values())

    def contested_count(self) -> int:
        """Children whose repair contention holds back (``optk_contested_objects``)."""
        return PlanGuard.contested(self.resources.guard)

    def paused(self, parent: KubeObject) -> str | None:
        """Why ``parent`` is paused, or None (``reconciler._reconcile.policies``)."""
        found = self.pause.reason(parent)
        return None if found is None else found[0]

    def _report(self, uid: str, result: ParentResult) -> None:
        """Drift counts for the metric, and the one log line of each contest detected."""
        drifted = sum(1 for r in (*result.children, *result.pruned) if r.drift)
        if result.parent_gone or not drifted:
            self.drifted.pop(uid, None)
        elif not result.paused:
            self.drifted[uid] = drifted
        contention = self.resources.guard.contention if self.resources.guard else None
        if contention is not None:
            if result.parent_gone:
                contention.forget(uid)
            for contest in contention.take_detected():
                _log.warning("contested: %s", contest.describe())

    def forget_builds(self, parent: tuple[str, str] | None = None) -> None:
        """Drop every reused build, or only that of ``parent`` (namespace, name), if any."""
        if self.builds is not None:
            self.builds.forget(parent)

    # -- identity ---------------------------------------------------------------------------

    def decorate(self, parent: KubeObject, obj: KubeObject, state: DesiredState) -> dict[str, Any]:
        """``obj`` (a dict or an official model) with the namespace, labels and controller owner
        reference of section 5, as ``builders.stamp_identity`` decides them."""
        return stamp_child(parent, obj, state, operator_name=self.operator_name,
                           namespaced=self._namespaced, labels=self._child_labels(parent))

    def declared(self, parent: KubeObject) -> DeclaredChildren:
        """What ``build`` declares for ``parent``, evaluated as the reconcile evaluates it
        (``reconciler._reconcile.declared``): stamped children in order and the builders that
        failed."""
        return declared_children(
            self.build, parent, operator_name=self.operator_name, namespaced=self._namespaced,
            labels=self._child_labels(parent),
            placed_namespaced=None if self.placement is None else self.placement.namespaced)

    def served(self, api_version: str, kind: str) -> bool:
        """Whether the cluster serves the kind now (discovery, as the client caches it)."""
        try:
            self.client.is_namespaced(api_version, kind)
        except ReconcilerError:
            return False
        return True

    def _child_labels(self, parent: KubeObject) -> Mapping[str, str] | None:
        return None if self.child_labels is None else self.child_labels(parent)

    def _namespaced(self, api_version: str, kind: str) -> bool | None:
        try:
            return self.client.is_namespaced(api_version, kind)
        except NotFoundError:
            return None  # not served: the child's or the parent's namespace decides


def _guard_like(guard: PlanGuard, clock: Clock) -> PlanGuard:
    """A guard with ``guard``'s settings and a contention state of its own (another
    cluster's: one object name may live in several)."""
    detector = guard.contention
    return PlanGuard(drift=guard.drift, ignore_fields=guard.ignore_fields,
                     contention=None if detector is None else ContentionDetector(
                         detector.settings, clock=clock, field_manager=detector.field_manager))


_Built = tuple[ObjectRef, dict[str, Any], DesiredState, bytes | None]  # the digest when kept


class _ParentRun:
    """One ``reconcile(parent)`` call."""

    def __init__(self, owner: ParentReconciler, parent: KubeObject, uid: str) -> None:
        self.o = owner
        self.parent = parent
        self.uid = uid
        self.ref = ObjectRef.of(parent)
        self.results: list[ReconcileResult] = []
        self.errors: list[ChildError] = []
        self.build_failed = False
        self.terminating = False
        self.selector = f"{OWNER_UID_LABEL}={label_value(uid)}"
        self.recheck: float | None = None
        self.gone = False
        self.nodes: dict[ObjectRef, Dependencies | None] = {}  # from the builders' components
        self.waiting: list[Wait] = []  # children held back by their dependencies
        self.waiting_live: list[dict[str, Any]] = []  # those of them that exist (observed)
        self.health: list[Wait] = []  # children whose health Ready reads
        self.teardown_mode = False  # the parent is being deleted: see teardown()
        self.interventions: list[dict[str, Any]] = []  # Drifted, Contested (interventions)
        self.prune_blocked: list[ChildError] = []  # prune kinds that cannot be listed
        self.placed: list[PlacedChild] = []  # children placed in other clusters (placement)
        self.placed_retry: float | None = None  # when to try an unusable cluster again
        self.built_from: KubeObject | None = None  # the parent the kept build is keyed on
        self.gates: ChildGates | None = None  # this pass's, the placed children's too
        self.torn_placed: list[PlacedChild] = []  # teardown: placed children of components
        self.placed_summary: tuple[dict[str, Any], ...] | None = None  # per cluster

    def paused(self, reason: str, may_write: bool) -> ParentResult:
        """A paused parent: no child is read or written; its status condition says so (the one
        write, only for a pause asked on the parent itself; none while one is in force)."""
        written, error = False, ""
        if may_write and self.o.write_status:
            patch = paused_status_patch(self.parent, reason=reason, now=self.o.clock.time())
            if patch is not None:
                written, error = self._write_status(patch)
        return ParentResult(parent=self.ref, paused=reason, status_written=written,
                            status_error=error, parent_gone=self.gone, dry_run=self.o.dry_run)

    def execute(self) -> ParentResult:
        built = self._build()
        built = self._ensure_finalizer(built)
        live, unlisted = self._prefetch(built)
        built_refs = self._apply(built, live, unlisted)
        if isinstance(live, _LazyLive):
            live.load_all()  # the prune kinds' lists too (their failures are reported below)
        self.waiting_live = self._waiting_live(live)
        if self.terminating:
            self.o.namespace_terminating(self.uid)
            return ParentResult(parent=self.ref, children=tuple(self.results),
                                errors=tuple(self.errors), namespace_terminating=True,
                                dry_run=self.o.dry_run)
        for scope, failure in sorted(unlisted.items(), key=lambda item: _order(item[0])):
            if scope.type_key in self.o.prune_kinds and not any(
                    _scope(ref) == scope for ref in built_refs):
                # Nothing built of that kind, but pruning must look. A kind that cannot be
                # listed (RBAC) blocks only the pruning: said in PruneBlocked, looked at again
                # when it lists. Any other failure (throttled, a server error): retried.
                why = f"pruning {scope.kind} skipped: listing it failed: {failure}"
                if isinstance(failure, KindUnlistableError):
                    self.prune_blocked.append(ChildError(ref=scope, message=why, error=failure))
                else:
                    self._fail(scope, why, failure)
        if self.gone or self._went_away():
            _log.debug("reconcile of %s stopped: the parent went away", self.ref)
            return ParentResult(parent=self.ref, children=tuple(self.results),
                                errors=tuple(self.errors), parent_gone=True,
                                dry_run=self.o.dry_run)
        self._place()
        pruned = self._prune(live, built_refs)
        guard = self.o.resources.guard
        contests = self._contests(guard.contention) if guard and guard.contention else []
        self.interventions = [
            *intervention_conditions(self.parent, [*self.results, *pruned], contests),
            *prune_conditions(self.parent, self.prune_blocked)]
        self._emit_events(pruned)
        status_written, status_error = self._status(pruned)
        if status_written:  # once per change of the status, not per reconcile
            self._warn_skipped()
        if self.gone:  # the status write was answered 404: the parent is gone
            return ParentResult(parent=self.ref, children=tuple(self.results),
                                pruned=tuple(pruned), errors=tuple(self.errors),
                                parent_gone=True, dry_run=self.o.dry_run)
        requeues = [r.requeue_after for r in (*self.results, *pruned) if r.requeue_after]
        if self.recheck is not None:  # a child is not ready yet: look again
            requeues.append(self.recheck)
        if self.placed_retry is not None:  # a cluster could not be used: try it again
            requeues.append(self.placed_retry)
        requeues += [e.retry_after for e in self.errors if e.retry_after]
        return ParentResult(
            parent=self.ref, children=tuple(self.results), pruned=tuple(pruned),
            errors=tuple(self.errors), status_written=status_written, status_error=status_error,
            requeue_after=min(requeues) if requeues else None, dry_run=self.o.dry_run,
            waiting=tuple(self.waiting), prune_blocked=tuple(self.prune_blocked),
            placed=frozenset(c.ref for c in self.placed),
        )

    def teardown(self) -> list[ReconcileResult]:
        """The parent is being deleted: its children that belong to components, deleted in
        reverse dependency order (dependents first, each waiting until those are gone); the
        children deleted by this pass (what waits is in ``waiting``)."""
        built = [(ref, obj, DesiredState.ABSENT, digest) for ref, obj, _, digest in self._build()
                 if ((node := self.nodes.get(ref)) is not None and node.gated)
                 or self._dependency(ref)]
        # the placed children of components take part (deleted by the placement, gated here)
        self.torn_placed = [attrs.evolve(c, state=DesiredState.ABSENT) for c in self.placed
                            if c.node is not None]
        if (not built and not self.torn_placed) or self.build_failed:
            self.errors.clear()  # nothing ordered, or not known: the cleanup goes on
            self.torn_placed = []
            return []
        self.teardown_mode = True
        live, unlisted = self._prefetch(built)
        self._apply(built, live, unlisted)
        return self.results

    def _place(self) -> None:
        """The children placed in other clusters, through their clusters' clients
        (``reconciler._reconcile.placement``): results, errors and waits join the others'."""
        placement = self.o.placement
        if placement is None:
            for child in self.placed:
                self.errors.append(ChildError(ref=child.ref, message=(
                    f"{child.ref} is placed in cluster {child.cluster!r} but the operator has "
                    f"no clusters (ParentSettings(clusters=ClusterSecrets(...)))"),
                    error=ReconcilerUsageError("no clusters")))
            return
        if not self.placed and not inventory_of(self.parent):
            return
        gates = self.gates
        placed = self.placed
        gate = observe = None
        if gates is not None and gates.active:  # in the gates' order, each gated
            order: dict[int | None, int] = {i: n for n, i in enumerate(gates.ordered())}
            placed = sorted(placed, key=lambda c: order.get(
                gates.index_of(PlacedKey(c.cluster, c.ref)), len(order)))

            def gate(child: PlacedChild) -> Wait | None:
                index = gates.index_of(PlacedKey(child.cluster, child.ref))
                return None if index is None else gates.gate(index)

            def observe(child: PlacedChild, live: Mapping[str, Any] | None) -> None:
                gates.observe(PlacedKey(child.cluster, child.ref), live)

        home_waits_on_placed = gates is not None and gates.waited_on_placed
        outcome = placement.apply(self.parent, self.uid, placed, prune=not self.build_failed,
                                  gate=gate, observe=observe)
        if outcome.parent is not None:
            self.parent = dict(outcome.parent)
        self.results.extend(outcome.results)
        self.errors.extend(outcome.errors)
        self.waiting.extend(outcome.waiting)
        self.placed_retry = outcome.retry_after
        self.placed_summary = outcome.clusters
        if home_waits_on_placed and any(r.action in (Action.CREATED, Action.UPDATED)
                                        for r in outcome.results):
            # a home child waits on a placed one just written: its own write wakes no one
            self.placed_retry = min(self.placed_retry or _PLACED_AGAIN, _PLACED_AGAIN)
        if gates is not None and gates.placed_kind_waits:
            # a kind not served yet in its cluster: no watch there says when
            again = placement.secrets.retry_after
            self.placed_retry = min(self.placed_retry or again, again)

    def _dependency(self, ref: ObjectRef) -> bool:
        """Whether ``ref``'s component is named in another one's ``depends_on`` (a placed
        child's too)."""
        node = self.nodes.get(ref)
        others = [*self.nodes.values(), *(c.node for c in self.placed)]
        return node is not None and any(
            other is not None and node.name in other.depends_on for other in others)

    def placed_teardown_gate(self, entry: tuple[str, str, str, str, str]) -> Wait | None:
        """Why the placed child of inventory ``entry`` may not be deleted yet (a child
        depending on it, at home or elsewhere, still exists), or None."""
        gates = self.gates
        if gates is None or not self.teardown_mode:
            return None
        ref = ObjectRef(api_version=entry[1], kind=entry[2], namespace=entry[3] or None,
                        name=entry[4])
        index = gates.index_of(PlacedKey(entry[0], ref))
        return None if index is None else gates.gate(index)

    def _apply(self, built: Sequence[_Built], live: Mapping[ObjectRef, dict[str, Any]],
               unlisted: Mapping[ObjectRef, ReconcilerError]) -> set[ObjectRef]:
        """Every child that its dependencies let through, in their order; what waits goes to
        ``waiting``. Returns the refs built (waiting ones included: not to be pruned)."""
        built_refs = set()
        # the placed children take part in the gates (after the home ones: indices past
        # ``built``), applied by the placement after these
        placed = self.torn_placed if self.teardown_mode else self.placed
        placement = self.o.placement
        gates = ChildGates(
            [*((b[0], b[2], self.nodes.get(b[0])) for b in built),
             *((PlacedKey(c.cluster, c.ref), c.state, c.node) for c in placed)],
            parent=self.parent, live=live, served=self.o.served,
            placed_live=None if placement is None else (
                lambda key: placement.read(key.cluster, key.ref)),
            placed_served=None if placement is None else (
                lambda key: placement.served(key.cluster, key.ref.api_version, key.ref.kind)))
        self.gates = gates
        for index in gates.ordered():
            if index >= len(built):
                continue  # placed: the placement's, after these
            ref, obj, state, digest = built[index]
            if self.terminating or (not self.teardown_mode and self._went_away()):
                break  # every further create in the namespace would be refused as well
            built_refs.add(ref)
            if (wait := gates.gate(index)) is not None:
                self.waiting.append(wait)  # held back: reported, woken by what it waits on
                if isinstance(live, _LazyLive):
                    live.hold(_scope(ref))  # not listed for it: a CRD may not serve it yet
                continue
            done = len(self.results)
            listed = ref in live  # lists its kind now, if not yet
            from_server = False
            failure = unlisted.get(_scope(ref))
            if failure is not None:
                # The list of its kind failed (throttled, server error): one GET per child
                # would only add load; the child fails with the list's error and is retried.
                self._fail(ref, f"listing its kind failed: {failure}", failure)
            elif listed:
                self._child(ref, obj, state, live[ref], digest)
            elif state.is_absent and self.o.child_labels is not None:
                # Sharded: the caches also select the shard label, which an object of this
                # child's may lack (handed over while it waited, or kept by its policy at a
                # move: never written by this shard); read from the server, or it would stay
                # (found by the sharded operator machine's soak, session 15)
                from_server = True
                self._child(ref, obj, state, _SERVER, digest)
            elif state.is_absent or is_shared(obj) or is_uncollectable(self.parent, ref):
                # Not labelled as ours: ABSENT must still find it by name; so must a shared
                # child (no owner label) and one another parent may hold (sharing).
                self._child(ref, obj, state, _READ, digest)
            else:
                # Missing from our labelled children: create; a taken name becomes an update.
                self._child(ref, obj, state, None, digest)
            if len(self.results) > done:
                left = _left(self.results[-1], live.get(ref))
                if from_server and self.results[-1].action is Action.DELETED:
                    left = self._read(ref)  # no cache of this shard hears of its going
                gates.observe(ref, left)
        return built_refs

    def _waiting_live(self, live: Mapping[ObjectRef, dict[str, Any]]) -> list[dict[str, Any]]:
        """The waiting children that exist, for the status function: held back, they are
        still the parent's (a Dashboard created before its dependency became unready is
        still there and may be ready). Looked up only for a status function (from the
        caches under a running operator: their informers are kept while they wait)."""
        if self.o.status_builder is None or not self.o.write_status:
            return []
        found = []
        for wait in self.waiting:
            try:
                found.append(live[wait.ref])
            except KeyError:
                continue  # not created yet (or its list failed: it is not observed)
        return found

    def _contests(self, contention: ContentionDetector) -> list[Contest]:
        """This parent's contested children, each other writer named from the child's
        ``managedFields`` (one read per newly contested child: caches drop them)."""
        for ref in contention.unnamed(self.uid):
            try:
                live = self.o.client.get(ref.api_version, ref.kind, ref.name,
                                         namespace=ref.namespace)
            except ApiError:
                continue  # named at a later reconcile; "an unknown writer" until then
            contention.name(self.uid, ref, live)
        return contention.contests(self.uid)

    def _went_away(self) -> bool:
        """Whether the caller's cache says the parent is gone or being deleted (no request)."""
        alive = self.o.parent_alive
        if not self.gone and alive is not None and not self.o.dry_run and not alive(self.parent):
            self.gone = True
        return self.gone

    def _names_parent(self, error: NotFoundError) -> bool:
        """Whether a 404 says that the parent itself does not exist (not a route or a child)."""
        return str(error.details.get("name") or "") == self.ref.name and (
            not error.ref or error.ref.name == self.ref.name)

    # -- children ---------------------------------------------------------------------------

    def _build(self) -> list[_Built]:
        """The evaluated builders, or those kept for this very parent (shared: see ``_own``)."""
        memo, epoch, inputs = self.o.builds, 0, ""
        if memo is not None:
            self.built_from = self.parent
            if (kept := memo.lookup(self.parent)) is not None:
                self.nodes = dict(kept.nodes)  # the gates are evaluated at each write
                self.placed = list(kept.placed)
                return list(kept.children)
            epoch, inputs = memo.epoch, memo.inputs_of(self.parent)  # before builders read
        built = self._evaluate()
        return built if memo is None else memo.remember(
            self.parent, built, epoch=epoch, failed=self.build_failed, inputs=inputs,
            nodes=self.nodes, placed=tuple(self.placed))

    def _evaluate(self) -> list[_Built]:
        declared = self.o.declared(self.parent)
        self.placed = [PlacedChild(cluster=c.cluster, ref=c.ref, obj=c.obj, state=c.state,
                                   node=c.node)
                       for c in declared.placed if c.cluster is not None]
        self.nodes = {c.ref: c.node for c in declared.children}
        if declared.build_error is not None:  # named after the build function, not the parent
            error, name = declared.build_error, builder_name(self.o.build)
            where = ObjectRef(api_version="", kind="build", name=name)
            self._fail(where, builder_failure("build function", name, self.ref, error), error,
                       trace=True)
        for failure in declared.failures:
            where = ObjectRef(api_version="", kind="builder", name=failure.name)
            self._fail(where, builder_failure("builder", failure.name, self.ref, failure.error),
                       failure.error, trace=True)
        self.build_failed = self.build_failed or declared.failed
        return [(c.ref, c.obj, c.state, None) for c in declared.children]

    def _ensure_finalizer(self, built: list[_Built]) -> list[_Built]:
        """The cleanup finalizer goes on before any child the garbage collector cannot collect
        is created; when adding it fails, those children wait (and nothing is pruned)."""
        try:
            updated = self.o.cleanup.ensure(self.parent, [b[0] for b in built], shared=[
                b[0] for b in built if b[2].is_present and is_shared(b[1])], remote=any(
                c.state.is_present for c in self.placed) or bool(inventory_of(self.parent)))
        except ReconcilerError as exc:
            if isinstance(exc, NotFoundError) and self._names_parent(exc):
                self.gone = True  # deleted meanwhile: nothing more to write for it
                return []
            self.build_failed = True
            self._fail(self.ref, f"adding the cleanup finalizer failed: {exc}", exc)
            return [b for b in built if not is_uncollectable(self.parent, b[0])]
        if updated is not None:
            self.parent = updated
        return built

    def _read(self, ref: ObjectRef) -> dict[str, Any] | None:
        """The child as the server has it (None: missing, or its namespace or its kind is)."""
        if not self.o.served(ref.api_version, ref.kind):
            return None  # nothing of a kind not served exists
        try:
            return self.o.client.get(ref.api_version, ref.kind, ref.name,
                                     namespace=ref.namespace)
        except NotFoundError:
            return None

    def _refuse_data_loss(self, ref: ObjectRef, live: Any) -> str | None:
        """Why deleting CRD ``ref`` is refused (custom resources remain), or None."""
        if ref.kind != "CustomResourceDefinition":
            return None
        if live is _READ or live is None:
            try:
                live = self.o.client.get(ref.api_version, ref.kind, ref.name)
            except NotFoundError:
                return None
        if not is_owned(live, owner_uid=self.uid)[0] or (
                is_shared(live) and set(shared_record(live)) - {self.uid}):
            return None  # not deleted by this parent: skipped, or kept for other parents
        refusal = refuses_data_loss(live, custom_resources=count_custom_resources(
            self.o.client, live, owner_uid=self.uid))
        if refusal is not None and not self.o.dry_run and release_to_others(
                self.o.client, live, owner_uid=self.uid):
            return _RELEASED  # theirs now: not deleted (sharing)
        return refusal

    def _release_kept(self, ref: ObjectRef, live: Any) -> None:
        """A child marked ``helm.sh/resource-policy: keep`` that would be deleted: released
        instead (``cleanups.release_kept``), so it is no longer this parent's."""
        if self.o.dry_run:
            return
        if not isinstance(live, Mapping):
            try:
                live = self.o.client.get(ref.api_version, ref.kind, ref.name,
                                         namespace=ref.namespace)
            except NotFoundError:
                return
        release_kept(self.o.client, live, owner_uid=self.uid)

    def _fail(self, ref: ObjectRef, message: str, exc: BaseException, *,
              trace: bool = False) -> None:
        # the caller reports it; a user's code that raised shows its traceback here (DEBUG)
        _log.debug("reconcile of %s: %s: %s", self.ref, ref, bounded(message),
                   exc_info=exc if trace else None)
        self.errors.append(ChildError(ref=ref, message=message, error=exc))
        self.o.forget_builds((self.ref.namespace or "", self.ref.name))  # retried afresh

    def _prefetch(
        self, built: Sequence[_Built]
    ) -> tuple[Mapping[ObjectRef, dict[str, Any]], dict[ObjectRef, ReconcilerError]]:
        """Our live children, by one LIST per (kind, namespace) with the owner-uid selector;
        and the scopes (refs without a name) whose list failed, with the error. For a parent
        with components, each scope is listed when first asked for (a scope only a held-back
        child needs is not listed: its CRD may not serve it yet)."""
        scopes: set[ObjectRef] = {_scope(b[0]) for b in built}
        for api_version, kind in self.o.prune_kinds:
            scopes.add(ObjectRef(api_version=api_version, kind=kind, name="",
                                 namespace=self._prune_scope(api_version, kind)))
        failed: dict[ObjectRef, ReconcilerError] = {}
        lazy = _LazyLive(self._list_scope, scopes, failed)
        if not self.nodes:
            lazy.load_all()
            return dict(lazy), failed
        return lazy, failed

    def _list_scope(self, scope: ObjectRef) -> list[dict[str, Any]]:
        """Our children in one scope (raises ``ReconcilerError`` when the list fails)."""
        if self.nodes and not self.o.served(scope.api_version, scope.kind):
            return []  # not served (a CRD not yet established): nothing of it can exist
        try:
            return self.o.reader.list(scope.api_version, scope.kind, namespace=scope.namespace,
                                      label_selector=self.selector)
        except ReconcilerError as exc:
            unlistable = isinstance(exc, KindUnlistableError)
            level, more = self.o.warnings.level(
                unlisted_cause(scope.api_version, scope.kind) if unlistable
                else ("list", scope.api_version, scope.kind, type(exc).__name__))
            _log.log(level, "listing %s %s for %s failed: %s%s%s", scope.kind,
                     scope.api_version, self.ref, bounded(exc), _UNLISTABLE if unlistable
                     else "", more)
            raise

    def _prune_scope(self, api_version: str, kind: str) -> str | None:
        """Where unbuilt children of a prune kind are looked for: the parent's namespace, or
        cluster-wide for a cluster-scoped kind (those go with the cleanup finalizer too)."""
        try:
            namespaced = self.o.client.is_namespaced(api_version, kind)
        except ReconcilerError:
            namespaced = True  # not served (yet): nothing of it to prune
        return self.ref.namespace if namespaced else None

    def _child(self, ref: ObjectRef, obj: dict[str, Any], state: DesiredState, live: Any,
               digest: bytes | None) -> None:
        try:
            if live is _SERVER:
                live = self._read(ref)
            if state.is_absent and (is_kept(obj) or (isinstance(live, Mapping)
                                                     and is_kept(live))):
                self._release_kept(ref, live)
                return
            refusal = self._refuse_data_loss(ref, live) if state.is_absent else None
            if refusal is _RELEASED:
                _log.info("%s: %s released to the parents of its custom resources", self.ref, ref)
                return
            if refusal is not None:
                self._fail(ref, refusal, ValueError(refusal))
                return
            if live is _READ:
                result = self.o.resources.reconcile_resource(
                    self._own(obj), state, owner_uid=self.uid)
            elif live is None:
                result = self.o.resources.reconcile_resource(
                    self._own(obj), state, owner_uid=self.uid, live=live
                )
            else:
                remembered, digest = self.o.memo.lookup(self.uid, ref, obj, state, live,
                                                        digest=digest)
                result = remembered or self.o.resources.reconcile_resource(
                    self._own(obj), state, owner_uid=self.uid, live=live
                )
                self.o.memo.remember(self.uid, ref, digest, state, live, result)
        except LeadershipLostError:
            raise  # no further write: the worker stops this reconcile
        except (NamespaceTerminatingError, NotFoundError) as exc:
            if self.o.dry_run or (isinstance(exc, NotFoundError)
                                  and not _namespace_gone(exc, ref)):
                self._fail(ref, str(exc), exc)  # a plan reports the refusal as it is
                return
            _log.info("reconcile of %s: namespace %s is being deleted", self.ref, ref.namespace)
            self.terminating = True
            return
        except Exception as exc:
            self._fail(ref, str(exc), exc)
            return
        self.results.append(result)
        guard = self.o.resources.guard
        seen = live if isinstance(live, Mapping) else result.live
        if guard is not None and (refused := guard.refusal(seen)) is not None:
            self._fail(ref, str(refused), refused)  # written, identity repaired; said on the parent

    def _own(self, obj: dict[str, Any]) -> dict[str, Any]:  # kept builds are shared: copy
        return obj if self.o.builds is None else copy_object(obj)

    def _emit_events(self, pruned: Sequence[ReconcileResult]) -> None:
        """The Events ``parent_events`` groups this outcome into, recorded on the parent."""
        if self.o.recorder is None:
            return
        for event in [*parent_events([*self.results, *pruned], self.errors),
                      *intervention_events(self.parent, self.interventions)]:
            self.o.recorder.record(
                self.parent, reason=event.reason, message=event.message, type=event.type
            )

    def _prune(
        self, live: Mapping[ObjectRef, dict[str, Any]], built: set[ObjectRef]
    ) -> list[ReconcileResult]:
        pruned: list[ReconcileResult] = []
        if not self.o.prune_kinds:
            return pruned
        if self.build_failed:  # an object a failed builder would have built is not "unbuilt"
            _log.warning("not pruning children of %s: a builder failed", self.ref)
            return pruned
        # CRDs last: the custom resources pruned in the same pass go first.
        for ref, obj in sorted(live.items(), key=lambda kv: (
                kv[0].kind == "CustomResourceDefinition", _order(kv[0]))):
            if ref in built or ref.type_key not in self.o.prune_kinds:
                continue
            if not is_owned(obj, owner_uid=self.uid)[0]:
                continue
            try:
                if is_kept(obj):
                    self._release_kept(ref, obj)
                    continue
                refusal = self._refuse_data_loss(ref, obj)
                if refusal is _RELEASED:
                    continue
                if refusal is not None:
                    self._fail(ref, f"prune refused: {refusal}", ValueError(refusal))
                    continue
                result = self.o.resources.reconcile_resource(
                    obj, DesiredState.ABSENT, owner_uid=self.uid, live=obj
                )
            except LeadershipLostError:
                raise
            except Exception as exc:
                self._fail(ref, f"prune failed: {exc}", exc)
                continue
            pruned.append(result)
        return pruned

    # -- status -----------------------------------------------------------------------------

    def _status(self, pruned: Sequence[ReconcileResult]) -> tuple[bool, str]:
        if not self.o.write_status:
            return False, ""
        if self.o.readiness is not None or self.o.status_builder is not None:
            return self._health_status(pruned)
        patch = status_patch(
            parent=self.parent, results=[*self.results, *pruned], errors=self.errors,
            children=self._children(),
            now=self.o.clock.time(), refresh=self.o.status_refresh, waiting=self.waiting,
        )
        patch = with_interventions(self.parent, patch, self.interventions,
                                   now=self.o.clock.time())
        patch = self._with_clusters(patch)
        if patch is None:
            return False, ""
        return self._write_status(patch)

    def _with_clusters(self, patch: dict[str, Any] | None) -> dict[str, Any] | None:
        """``patch`` with the summary of the placed children per cluster
        (``status.clusters``, ``reconciler._reconcile.placement``) when it changed."""
        summary = self.placed_summary
        if summary is None:
            return patch
        status = self.parent.get("status")
        current = status.get(CLUSTERS_STATUS) if isinstance(status, Mapping) else None
        if current == list(summary):
            return patch
        out = dict(patch or {})
        out["status"] = {**(out.get("status") or {}), CLUSTERS_STATUS: list(summary)}
        return out

    def _children(self) -> int:
        """How many children were built: applied, failed (a child applied and failed for its
        annotation counted once) or waiting."""
        return len({r.ref for r in self.results} | {e.ref for e in self.errors}
                   | {w.ref for w in self.waiting})

    def _health_status(self, pruned: Sequence[ReconcileResult]) -> tuple[bool, str]:
        try:
            patch, wanted = readiness_status_patch(
                parent=self.parent, results=[*self.results, *pruned], errors=self.errors,
                children=self._children(),
                now=self.o.clock.time(), readiness=self.o.readiness,
                status=self.o.status_builder, refresh=self.o.status_refresh,
                waiting=self.waiting, waiting_live=self.waiting_live,
            )
        except Exception as exc:  # a user's status builder failed: reported, retried
            return False, f"status builder failed: {type(exc).__name__}: {exc}"
        if self.o.readiness is not None:
            self.health = health_waits(self.results, self.o.readiness)
        if self.o.readiness is not None and not_ready(wanted):
            self.recheck = self.o.readiness.recheck
        patch = with_interventions(self.parent, patch, self.interventions,
                                   now=self.o.clock.time())
        patch = self._with_clusters(patch)
        return (False, "") if patch is None else self._write_status(patch)

    def _warn_skipped(self) -> None:
        skipped = [r for r in self.results
                   if r.action is Action.SKIPPED and r.requeue_after is None]
        if skipped:
            _log.warning("%s: %d children skipped, not ours (condition Reconciled, reason "
                         "ChildrenSkipped, says what to do): %s", self.ref, len(skipped),
                         "; ".join(f"{r.ref}: {r.reason}" for r in skipped))

    def _write_status(self, patch: Mapping[str, Any]) -> tuple[bool, str]:
        if self.o.status_refresh is None and self.o.statuses.taken(self.parent, patch):
            return False, ""
        kind = self.ref.type_key
        sub = None if kind in self.o._no_status_subresource else "status"
        while True:
            try:
                written = self.o.client.patch(
                    self.ref.api_version, self.ref.kind, self.ref.name, patch,
                    patch_type="application/merge-patch+json", namespace=self.ref.namespace,
                    subresource=sub,
                )
            except NotFoundError as exc:
                if self._names_parent(exc):  # the parent itself is gone, not the subresource
                    self.gone = True
                    return False, f"parent is gone: {exc}"
                if sub is None:
                    return False, f"parent is gone: {exc}"
                self.o._no_status_subresource.add(kind)  # 404 on /status: no such subresource
                sub = None
                continue
            except ApiError as exc:
                return False, f"status write failed: {exc}"
            self.o.statuses.remember(written, patch)
            if self.o.builds is not None and self.built_from is not None:
                self.o.builds.carry(self.built_from, written, patch)  # our write: same build
            return True, ""


class _LazyLive(Mapping[ObjectRef, dict[str, Any]]):
    """Our live children by ref, each scope (kind and namespace) listed when first asked for;
    a failed list goes to ``failed``. Iterating lists every scope not held back."""

    def __init__(self, list_scope: Callable[[ObjectRef], list[dict[str, Any]]],
                 scopes: Iterable[ObjectRef], failed: dict[ObjectRef, ReconcilerError]) -> None:
        self._list = list_scope
        self._pending = set(scopes)
        self._held: set[ObjectRef] = set()
        self._items: dict[ObjectRef, dict[str, Any]] = {}
        self.failed = failed

    def _load(self, scope: ObjectRef) -> None:
        if scope not in self._pending:
            return
        self._pending.discard(scope)
        try:
            items = self._list(scope)
        except ReconcilerError as exc:
            self.failed[scope] = exc
            return
        for item in items:
            self._items[ObjectRef.of(item)] = item

    def hold(self, scope: ObjectRef) -> None:
        """Do not list ``scope`` unless a child of it is asked for by name."""
        if scope in self._pending:
            self._held.add(scope)

    def load_all(self) -> None:
        """List every scope not yet listed and not held back."""
        for scope in sorted(self._pending - self._held, key=_order):
            self._load(scope)

    def __getitem__(self, ref: ObjectRef) -> dict[str, Any]:
        self._load(_scope(ref))
        return self._items[ref]

    def __iter__(self) -> Iterator[ObjectRef]:
        self.load_all()
        return iter(dict(self._items))

    def __len__(self) -> int:
        self.load_all()
        return len(self._items)


def _left(result: ReconcileResult, before: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """What a child's write left, as its dependents and dependencies see it: a deleted child
    is not gone until the caches say so (it may hold finalizers), an absent one is, and so is
    one whose place another's object holds (whichever way it was read)."""
    if result.action is Action.DELETED:
        return result.live or before or {"metadata": {}}
    if result.action is Action.UNCHANGED and result.reason.startswith(ABSENT_NOT_OURS):
        return None  # another's object at an ABSENT child's place: the parent has no child
    return result.live


def not_ours_waits(results: Iterable[ReconcileResult]) -> list[Wait]:
    """The children skipped because another owner holds their name, each waiting for that
    owner to let go: deleted, handed over or released (its ownership marks changed: the child
    informer's event wakes this parent, ``reconciler._reconcile.waits``)."""
    return [Wait(ref=r.ref, reason=NOT_OURS, message=f"{r.ref}: {r.reason}",
                 watches=(Watch(ref=r.ref, rule=ownership_marker,
                                seen=None if r.live is None else ownership_marker(r.live)),))
            for r in results if not r.dry_run and (
                (r.action is Action.SKIPPED and r.requeue_after is None and not r.held
                 and not r.conflicts)
                # an ABSENT child whose place another's object holds is done, but that object
                # may be handed over (then it is this parent's, to delete): heard of at once
                or (r.action is Action.UNCHANGED and r.reason.startswith(ABSENT_NOT_OURS)))]


def _namespace_gone(error: NotFoundError, ref: ObjectRef) -> bool:
    """Whether a 404 says the child's namespace is gone (not the object)."""
    found = (error.details.get("kind"), error.details.get("name"))
    return bool(ref.namespace) and found == ("namespaces", ref.namespace)


def _scope(ref: ObjectRef) -> ObjectRef:
    """Where an object is listed from: its kind in its namespace (a ref without a name)."""
    return attrs.evolve(ref, name="")
