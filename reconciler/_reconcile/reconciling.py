"""``ResourceReconciler``: execute the plan of one object with the fewest safe writes.

This is where the pure layers meet the cluster, as a thin shell. ``builders`` says what one object
should be and in which ``DesiredState``; ``reconciler._reconcile.planning.plan_child`` decides, in
pure code, what to do about the live object (ownership, deletion in progress, hooks, the three-way
match, the request body); this module reads the live object (through a ``ReadCache``), asks for the
plan and sends the one request it names. It owns the recovery paths that depend on the server's
answer: the bounded re-read-and-replan on 409 Conflict, create races (AlreadyExists), the read
before a server-side apply would create a child a cache does not hold (it may exist, not ours), and
recreation when the server refuses an update on immutable fields (``plan_recreate`` decides whether
that is allowed). Requests are counted by ``reconciler._client.counting``, never here. A dry run
executes the plan only as server-side dry runs (``dryRun=All`` creates and patches; no delete is
sent). Running many children of one parent is ``reconciler._reconcile.parents``' job.

It is over 500 lines because every write path of one object goes through one execution: the
two write strategies (three-way merge and server-side apply, with the migration between them),
the guard of policies and contention, and the recovery paths above share the live object, the
plan and the request record; split apart, each would re-read what the others hold.
"""

from __future__ import annotations

import contextlib
import enum
import threading
from collections.abc import Mapping
from typing import Any

import attrs

from builders import DesiredState, ObjectRef
from builders.convert import is_client_model, to_plain_object
from objectmatcher import has_builtin_schema
from reconciler._base.clocks import Clock, RealClock
from reconciler._base.errors import (
    AlreadyExistsError,
    ConflictError,
    ImmutableFieldError,
    InvalidError,
    NotFoundError,
    ReconcilerError,
    ReconcilerUsageError,
    ReconcilerUsageTypeError,
)
from reconciler._client.caches import PassThroughCache, ReadCache
from reconciler._client.counting import ApiCall, counting, counting_reader, recording, uncounted
from reconciler._client.protocol import ClusterClient, KubeObject
from reconciler._reconcile.applying import ApplyStrategy
from reconciler._reconcile.guard import PlanGuard
from reconciler._reconcile.planning import (
    ChildPlan,
    PlanAction,
    is_owned,
    kind_key,
    plan_child,
    plan_recreate,
)
from reconciler._reconcile.resource_settings import (
    DEFAULT_RECREATE_KINDS,
    ResourceSettings,
    moved_into,
)

__all__ = [
    "DEFAULT_RECREATE_KINDS",
    "Action",
    "ApiCall",
    "CrdSchemas",
    "ImmutableFieldError",
    "ReconcileResult",
    "ResourceReconciler",
    "is_owned",
    "kind_key",
]



class Action(enum.Enum):
    """What a reconcile did to one object."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    DELETED = "deleted"
    RECREATED = "recreated"
    SKIPPED = "skipped"


@attrs.frozen(kw_only=True)
class ReconcileResult:
    """The outcome of reconciling one object."""

    action: Action
    ref: ObjectRef
    diff: tuple[Any, ...] = ()
    """``objectmatcher`` diff items of the update (Secret values redacted by the matcher)."""
    api_calls: tuple[ApiCall, ...] = ()
    requeue_after: float | None = None
    """Seconds after which the caller should reconcile again, or None."""
    reason: str = ""
    """Why the object was skipped or left as it is, for people."""
    live: Mapping[str, Any] | None = attrs.field(default=None, repr=False, eq=False)
    """The object as the server returned it after the last request, when known."""
    dry_run: bool = False
    """True when nothing was written: the action is what a real run would do."""
    original_status: str = "recorded"
    """What the live object's last-applied annotation was (``ChildPlan.original_status``):
    ``unreadable`` or ``foreign`` means it was replaced, and the parent gets a Warning."""
    conflicts: tuple[tuple[str, str], ...] = ()
    """Server-side apply: (field, manager) pairs another apply manager owns with another value,
    not written (the parent gets a Warning)."""
    held: str = ""
    """Why a write was held back (``ChildPlan.held``: a policy, the drift mode, contention)."""
    drift: tuple[str, ...] = ()
    """The drifted field paths reported instead of repaired (``ChildPlan.drift``)."""
    cluster: str | None = None
    """The cluster a placed child is in (``builders.placed``), None for the operator's own."""

    @property
    def requeue(self) -> bool:
        """Whether the caller should reconcile this object again later."""
        return self.requeue_after is not None

    @property
    def writes(self) -> int:
        """How many write requests (create, patch, update, delete) were made."""
        return sum(1 for c in self.api_calls if c.verb in _WRITE_VERBS)


_WRITE_VERBS = frozenset({"create", "patch", "update", "delete"})



class CrdSchemas:
    """Custom resources' ``openAPIV3Schema`` by (apiVersion, kind), read from the CRDs.

    ``objectmatcher`` merges lists of custom resources item by item only when it is given the
    schema that declares their list-map keys. All CRDs are read with one LIST the first time an
    unknown custom kind is compared (and again for a kind still unknown), then kept.
    """

    def __init__(self, client: ClusterClient) -> None:
        self._client = client
        self._schemas: dict[tuple[str, str], Mapping[str, Any] | None] = {}
        self._lock = threading.Lock()

    def get(self, api_version: str, kind: str) -> Mapping[str, Any] | None:
        """The schema of a custom kind; None for built-in kinds and kinds no CRD defines."""
        if has_builtin_schema(api_version, kind):
            return None
        key = (api_version, kind)
        with self._lock:
            if key in self._schemas:
                return self._schemas[key]
        try:
            crds = self._client.list(_CRD_API, "CustomResourceDefinition")["items"]
        except ReconcilerError:
            return None  # not cached: the next comparison tries again
        found: dict[tuple[str, str], Mapping[str, Any] | None] = {}
        for crd in crds:
            spec = crd.get("spec") or {}
            names = spec.get("names") or {}
            for version in spec.get("versions") or ():
                schema = (version.get("schema") or {}).get("openAPIV3Schema")
                found[(f"{spec.get('group')}/{version.get('name')}", str(names.get("kind")))] = (
                    schema if isinstance(schema, Mapping) else None
                )
        with self._lock:
            self._schemas.update(found)
            return self._schemas.setdefault(key, None)


_CRD_API = "apiextensions.k8s.io/v1"


def _field_manager_of(client: Any) -> str:
    """The ``fieldManager`` the client sends (through wrappers), else ``optk``."""
    for _ in range(10):
        manager = getattr(client, "field_manager", None)
        if isinstance(manager, str) and manager:
            return manager
        client = getattr(client, "inner", None)
        if client is None:
            break
    return "optk"


def _forced(force: bool) -> dict[str, Any]:
    return {"force": True} if force else {}


def _rfc3339(seconds: float) -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))

_UNKNOWN: Any = object()

_RESULTS = {
    PlanAction.CREATE: Action.CREATED,
    PlanAction.PATCH: Action.UPDATED,
    PlanAction.RECREATE: Action.RECREATED,
    PlanAction.DELETE: Action.DELETED,
    PlanAction.SKIP: Action.SKIPPED,
    PlanAction.UNCHANGED: Action.UNCHANGED,
}


class ResourceReconciler:
    """Reconciles one object at a time against a cluster (DESIGN.md section 4).

    ``settings`` (``ResourceSettings``) says how a child is written: the strategy (``apply``,
    per kind ``apply_kinds``) and field manager, recreation of a child whose update the server
    refuses on immutable fields (``recreate``, ``recreate_kinds``, ``recreate_timeout``),
    ``conflict_retries``, ``adopt``, ``match_options``; the flat keywords of earlier releases
    (``recreate=True``, ...) still work with a ``DeprecationWarning``. Reads go through
    ``reader`` (default: straight to the cluster); conflicts re-read from the cluster. ``dry_run``
    executes plans only as server-side dry runs: nothing is written. ``guard`` restricts plans to
    what policies, the drift mode and contention allow (``PlanGuard``).
    """

    def __init__(
        self,
        client: ClusterClient,
        *,
        settings: ResourceSettings | None = None,
        reader: ReadCache | None = None,
        clock: Clock | None = None,
        guard: PlanGuard | None = None,
        dry_run: bool = False,
        **flat: Any,
    ) -> None:
        settings = moved_into(settings, flat, owner="ResourceReconciler", kind=ResourceSettings)
        self.settings = settings
        self.client = counting(client)
        self.reader = counting_reader(
            reader if reader is not None else PassThroughCache(uncounted(client))
        )
        self.match_options = tuple(settings.match_options)
        self.adopt = settings.adopt
        self.recreate = settings.recreate
        self.recreate_kinds = frozenset(settings.recreate_kinds)
        self.recreate_timeout = settings.recreate_timeout
        self.poll_interval = settings.poll_interval
        self.conflict_retries = settings.conflict_retries
        self.deleting_requeue = settings.deleting_requeue
        self.dry_run = dry_run
        self.planned_namespaces: set[str] = set()
        """A dry run: the Namespaces its creates would make, so that a child in one is planned
        as a create, not refused (the server answers its dry run with the namespace's 404)."""
        self.clock: Clock = clock if clock is not None else RealClock()
        self.crd_schemas = CrdSchemas(self.client)
        self.apply: ApplyStrategy = settings.apply
        self.apply_kinds: Mapping[str, ApplyStrategy] = dict(settings.apply_kinds)
        self.field_manager = settings.field_manager or _field_manager_of(client)
        self.guard = guard
        """What people and other writers say about each plan (``PlanGuard``), or None."""

    # -- entry points -----------------------------------------------------------------------

    def reconcile_resource(
        self,
        obj: KubeObject | object,
        state: DesiredState,
        *,
        owner_uid: str | None = None,
        live: KubeObject | None = _UNKNOWN,
        adopt: bool | None = None,
        recreate: bool | None = None,
    ) -> ReconcileResult:
        """Bring the object named by ``obj`` (a dict, or an official model) to ``state``.

        ``live`` may pass the live object (or None for "known missing") when the caller already
        read it, e.g. from one list of all children; otherwise it is read through ``reader``.
        ``owner_uid`` names the parent whose controller owner reference also makes an object
        ours. ``adopt`` and ``recreate`` override the reconciler's defaults for this call.
        Failures raise the ``reconciler`` error tree (``ImmutableFieldError`` for a refused
        immutable change; the last ``ConflictError`` when retries run out).
        """
        desired, ref = _checked(obj, state)
        with recording() as calls:
            if live is _UNKNOWN:
                live = self.reader.get(ref.api_version, ref.kind, ref.name,
                                       namespace=ref.namespace)
                read = not self.reader.from_memory  # a missing object is known missing
            else:
                read = False
            run = _Execution(
                self, desired, ref, state, calls, owner_uid=owner_uid,
                adopt=self.adopt if adopt is None else adopt,
                recreate=self.recreate if recreate is None else recreate,
            )
            try:
                return run.execute(run.plan(live), read=read)
            except ReconcilerError:
                if self.guard is not None and run.last_plan is not None:
                    # refused: nothing written, so no one's change undone (contention)
                    self.guard.refused(run.last_plan, owner_uid=owner_uid)
                raise

    def plan(
        self,
        obj: KubeObject | object,
        state: DesiredState,
        *,
        owner_uid: str | None = None,
        live: KubeObject | None = _UNKNOWN,
        adopt: bool | None = None,
    ) -> ChildPlan:
        """The plan ``reconcile_resource`` would execute first, without executing it (reads
        only: the live object unless given, and a custom kind's CRD schema once). A look
        changes no state: the contention detector records no round of a contest for it."""
        desired, ref = _checked(obj, state)
        if live is _UNKNOWN:
            live = self.reader.get(ref.api_version, ref.kind, ref.name, namespace=ref.namespace)
        run = _Execution(self, desired, ref, state, [], owner_uid=owner_uid,
                         adopt=self.adopt if adopt is None else adopt, recreate=self.recreate,
                         look=True)
        return run.plan(live)

    def _read_live(self, ref: ObjectRef) -> dict[str, Any] | None:
        """Read from the cluster itself (after a conflict or a race; never from a cache)."""
        try:
            return self.client.get(ref.api_version, ref.kind, ref.name, namespace=ref.namespace)
        except NotFoundError:
            return None


def _namespace_missing(exc: NotFoundError, ref: ObjectRef) -> bool:
    """Whether a create's 404 says its namespace does not exist (``details.kind`` is
    ``namespaces``): in a dry run, fine when the same plan creates that namespace first."""
    details = exc.details
    return bool(ref.namespace) and details.get("kind") == "namespaces" and (
        details.get("name") == ref.namespace)


def _checked(obj: KubeObject | object, state: DesiredState) -> tuple[KubeObject, ObjectRef]:
    if is_client_model(obj):  # an official model at the public edge
        obj = to_plain_object(obj)
    if not isinstance(obj, Mapping):
        raise ReconcilerUsageTypeError(
            f"reconcile_resource needs a JSON-shaped dict, got {type(obj).__name__}"
        )
    if not isinstance(state, DesiredState):
        raise ReconcilerUsageTypeError(f"reconcile_resource needs a DesiredState, got {state!r}")
    ref = ObjectRef.of(obj)
    if not ref.name or not ref.kind or not ref.api_version:
        raise ReconcilerUsageError(f"object {ref} lacks apiVersion, kind or metadata.name")
    return obj, ref


class _Execution:
    """One ``reconcile_resource`` call: plan, send, and on the server's answer plan again."""

    def __init__(
        self,
        owner: ResourceReconciler,
        desired: KubeObject,
        ref: ObjectRef,
        state: DesiredState,
        calls: list[ApiCall],
        *,
        owner_uid: str | None,
        adopt: bool,
        recreate: bool,
        look: bool = False,
    ) -> None:
        self.r = owner
        self.client = owner.client
        self.desired = desired
        self.state = state
        self.ref = ref
        self.calls = calls
        """The recording of this call: every request so far (results carry a copy)."""
        self.owner_uid = owner_uid
        self.adopt = adopt
        self.recreate = recreate
        self.last_plan: ChildPlan | None = None  # the latest plan, as the guard reviewed it
        self.look = look  # planned to answer a question, never executed (``plan``)

    def plan(self, live: KubeObject | None, *, raced: bool = False) -> ChildPlan:
        schema = None
        if live is not None and self.state.is_present:  # only an update compares
            schema = self.r.crd_schemas.get(self.ref.api_version, self.ref.kind)
        guard = self.r.guard  # policies, drift mode, contention (reconciler._reconcile.guard)
        options = self.r.match_options if guard is None else (
            *self.r.match_options, *guard.match_options(live))
        plan = plan_child(
            live=live, desired=self.desired, state=self.state, owner_uid=self.owner_uid,
            adopt=self.adopt, match_options=options, crd_schema=schema,
            raced=raced, ref=self.ref, manager=self.r.field_manager,
            apply=self.r.apply_kinds.get(kind_key(self.ref), self.r.apply),
            now=_rfc3339(self.r.clock.time()),
        )
        if guard is not None:
            plan = guard.review(plan, owner_uid=self.owner_uid, look=self.look)
        self.last_plan = plan
        return plan

    def result(
        self,
        plan: ChildPlan,
        *,
        action: Action | None = None,
        live: Mapping[str, Any] | None = _UNKNOWN,
        reason: str | None = None,
        requeue: bool | None = None,
    ) -> ReconcileResult:
        requeue = plan.requeue if requeue is None else requeue
        return ReconcileResult(
            action=_RESULTS[plan.action] if action is None else action, ref=self.ref,
            diff=plan.diff, api_calls=tuple(self.calls),
            requeue_after=plan.requeue_after if plan.requeue_after is not None
            else self.r.deleting_requeue if requeue else None,
            reason=plan.reason if reason is None else reason,
            live=plan.live if live is _UNKNOWN else live, dry_run=self.r.dry_run,
            original_status=plan.original_status, conflicts=plan.conflicts, held=plan.held,
            drift=plan.drift,
        )

    def execute(self, plan: ChildPlan, *, read: bool = False) -> ReconcileResult:
        """Send what ``plan`` names and plan again on the server's answer. ``read``: the plan's
        live object (or its absence) was read from the server, not from a cache or a list."""
        conflicts = 0
        rereads = 0
        while True:
            if plan.action is PlanAction.PATCH and plan.live is None and not read:
                # An apply creates what is missing and merges into what exists: a child missing
                # from a cache (or from a list by the owner label) may exist, someone else's.
                # Read it first so the ownership rules decide, as a create's 409 makes the
                # three-way merge read it (one GET per created child; none in steady state).
                read = True
                if (live := self.r._read_live(self.ref)) is not None:
                    plan = self.plan(live)
                    continue
            if plan.reread and rereads < 2:  # managedFields: the cache does not keep them
                rereads += 1
                plan = self.plan(self.r._read_live(self.ref))
                continue
            if plan.action is PlanAction.CREATE:
                assert isinstance(plan.body, Mapping)
                try:
                    created = self.client.create(plan.body, dry_run=self.r.dry_run)
                except AlreadyExistsError:
                    plan = self.plan(self.r._read_live(self.ref), raced=True)
                    continue
                except NotFoundError as exc:
                    if not (self.r.dry_run and _namespace_missing(exc, self.ref)
                            and self.ref.namespace in self.r.planned_namespaces):
                        raise
                    assert isinstance(plan.body, Mapping)
                    return self.result(plan, live=dict(plan.body), reason=(
                        f"in namespace {self.ref.namespace}, which this plan creates: "
                        f"not validated by the server"))
                if self.r.dry_run and (self.ref.api_version, self.ref.kind) == ("v1", "Namespace"):
                    self.r.planned_namespaces.add(self.ref.name)
                return self.result(plan, live=created)
            if plan.action is PlanAction.PATCH:
                try:
                    done = self._patch(plan)
                    if plan.replan and not self.r.dry_run and rereads < 2:
                        rereads += 1  # a migration of ownership: now apply
                        plan = self.plan(done.live)
                        continue
                    return done
                except ConflictError as exc:
                    conflicts += 1
                    if conflicts > self.r.conflict_retries:
                        raise ConflictError(
                            f"still conflicting after {conflicts} attempts: {exc.message}",
                            status=exc.status, ref=self.ref,
                        ) from exc
                    plan = self.plan(self.r._read_live(self.ref))
                    continue
            if plan.action is PlanAction.DELETE:
                return self._delete(plan)
            return self.result(plan)

    def _patch(self, plan: ChildPlan) -> ReconcileResult:
        assert plan.body is not None
        try:
            patched = self.client.patch(
                self.ref.api_version, self.ref.kind, self.ref.name, plan.body,
                patch_type=plan.patch_type, namespace=self.ref.namespace,
                dry_run=self.r.dry_run, **_forced(plan.force),
            )
        except NotFoundError as exc:  # a dry-run apply that would create, in a new namespace
            if not (plan.live is None and self.r.dry_run and _namespace_missing(exc, self.ref)
                    and self.ref.namespace in self.r.planned_namespaces):
                raise
            return self.result(plan, action=Action.CREATED, live=None, reason=(
                f"in namespace {self.ref.namespace}, which this plan creates: "
                f"not validated by the server"))
        except InvalidError as exc:
            fields = exc.immutable_fields
            if not fields:
                raise
            recreate = plan_recreate(plan, fields=fields, recreate=self.recreate,
                                     recreate_kinds=self.r.recreate_kinds)
            if recreate is None:
                raise ImmutableFieldError(exc, fields=fields, kind_key=kind_key(self.ref)) from exc
            return self._recreate(recreate)
        created = Action.CREATED if plan.live is None else None  # a server-side apply
        if created and self.r.dry_run and (self.ref.api_version, self.ref.kind) == (
                "v1", "Namespace"):
            self.r.planned_namespaces.add(self.ref.name)
        return self.result(plan, action=created, live=patched,
                           reason=plan.reason if plan.replan else "")

    # -- recreate ---------------------------------------------------------------------------

    def _recreate(self, plan: ChildPlan) -> ReconcileResult:
        if self.r.dry_run:
            return self.result(plan, live=None)
        with contextlib.suppress(NotFoundError):  # already gone: create it again all the same
            self.client.delete(
                self.ref.api_version, self.ref.kind, self.ref.name, namespace=self.ref.namespace,
                propagation_policy=plan.propagation,
                preconditions={"uid": plan.delete_uid} if plan.delete_uid else None,
            )
        clock = self.r.clock
        deadline = clock.monotonic() + self.r.recreate_timeout
        while self.r._read_live(self.ref) is not None:
            if clock.monotonic() >= deadline:
                return self.result(
                    plan, action=Action.DELETED, live=None, requeue=True,
                    reason=f"deleted to recreate, still present after {self.r.recreate_timeout}s",
                )
            clock.sleep(self.r.poll_interval)
        fresh = self.plan(None)
        if fresh.action is PlanAction.PATCH:  # server-side apply creates by applying
            return self.result(plan, live=self._patch(fresh).live, reason="")
        assert isinstance(fresh.body, Mapping)
        try:
            created = self.client.create(fresh.body)
        except AlreadyExistsError:  # someone recreated it between our read and create
            return self.result(
                plan, action=Action.DELETED, live=None, requeue=True,
                reason="deleted to recreate; the name was taken again before our create",
            )
        return self.result(plan, live=created, reason="")

    # -- delete -----------------------------------------------------------------------------

    def _delete(self, plan: ChildPlan) -> ReconcileResult:
        """Delete if it is still the same object. In a dry run nothing is sent (a delete has
        no server-side dry run in the protocol)."""
        if self.r.dry_run:
            return self.result(plan, live=None)
        try:
            self.client.delete(
                self.ref.api_version, self.ref.kind, self.ref.name, namespace=self.ref.namespace,
                propagation_policy=plan.propagation,
                preconditions={"uid": plan.delete_uid} if plan.delete_uid else None,
            )
        except NotFoundError:
            return self.result(plan, action=Action.UNCHANGED, live=None, reason="absent")
        except ConflictError:  # replaced by another object of the same name meanwhile
            return self.result(
                plan, action=Action.SKIPPED, live=None, requeue=True,
                reason="replaced by a new object before the delete",
            )
        return self.result(plan, live=None)
