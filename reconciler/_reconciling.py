"""``ResourceReconciler``: bring one built object to its desired state with the fewest safe writes.

This is where the pure layers meet the cluster. ``builders`` says what one object should be and in
which ``DesiredState``; ``objectmatcher`` says whether and how the live object differs; this module
reads the live object (through a ``ReadCache``), decides, and writes at most what is needed: a
create carrying the last-applied annotation, or one PATCH (with the live ``resourceVersion`` as
precondition and the annotation updated in the same request) when the three-way diff is not empty,
or a delete. It owns the rules of DESIGN.md section 4 (hooks, ownership, adoption) and the
recovery paths (409 retries, create races, objects being deleted, recreation on immutable fields).
Running many children of one parent is ``reconciler._parents``' job.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import attrs

from builders import DesiredState
from builders.convert import is_client_model, to_plain_object
from objectmatcher import (
    LAST_APPLIED_ANNOTATION,
    calculate_patch,
    has_builtin_schema,
    set_last_applied,
)
from reconciler._caches import PassThroughCache, ReadCache
from reconciler._clients import ClusterClient, KubeObject
from reconciler._clocks import Clock, RealClock
from reconciler._errors import (
    AlreadyExistsError,
    ConflictError,
    InvalidError,
    NotFoundError,
    ObjectRef,
    ReconcilerError,
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
]

DEFAULT_RECREATE_KINDS: frozenset[str] = frozenset({
    "Deployment.apps", "StatefulSet.apps", "DaemonSet.apps", "Job.batch",
    "Service", "ConfigMap", "Secret",
})
"""Kinds (``Kind.group``, or ``Kind`` for the core group) that may be recreated when enabled.

PersistentVolumeClaims are deliberately absent: recreating one loses its data.
"""


class Action(enum.Enum):
    """What a reconcile did to one object."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    DELETED = "deleted"
    RECREATED = "recreated"
    SKIPPED = "skipped"


@attrs.frozen(kw_only=True)
class ApiCall:
    """One request the reconciler sent (reads from an in-memory cache are not calls)."""

    verb: str
    """Kubernetes verb: ``get``, ``list``, ``create``, ``patch``, ``delete``."""
    ref: ObjectRef


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

    @property
    def requeue(self) -> bool:
        """Whether the caller should reconcile this object again later."""
        return self.requeue_after is not None

    @property
    def writes(self) -> int:
        """How many write requests (create, patch, update, delete) were made."""
        return sum(1 for c in self.api_calls if c.verb in _WRITE_VERBS)


_WRITE_VERBS = frozenset({"create", "patch", "update", "delete"})


class ImmutableFieldError(InvalidError):
    """An update needs a change the server refuses on an existing object, and recreate is off."""

    def __init__(self, source: InvalidError, *, fields: Sequence[str], kind_key: str) -> None:
        names = ", ".join(fields)
        message = (
            f"cannot update immutable field(s) {names}; pass recreate=True to "
            f"ResourceReconciler (or to reconcile_resource) and allow {kind_key!r} in "
            f"recreate_kinds to delete and recreate the object"
        )
        super().__init__(message, status=source.status, code=source.code, ref=source.ref)
        self.fields = tuple(fields)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def kind_key(obj_or_ref: Mapping[str, Any] | ObjectRef) -> str:
    """``Kind.group`` (``Kind`` for the core group): how kinds are named in allow-lists."""
    if isinstance(obj_or_ref, ObjectRef):
        api_version, kind = obj_or_ref.api_version, obj_or_ref.kind
    else:
        api_version, kind = str(obj_or_ref.get("apiVersion", "")), str(obj_or_ref.get("kind", ""))
    group = api_version.rpartition("/")[0]
    return f"{kind}.{group}" if group else kind


def is_owned(live: KubeObject, *, owner_uid: str | None = None) -> tuple[bool, str]:
    """Whether ``live`` is ours (DESIGN.md section 4), and if not, why.

    Ours: it has a controller owner reference to ``owner_uid``, or it carries our last-applied
    annotation and no controller owner reference to some other owner.
    """
    meta = _meta(live)
    controllers = [
        ref for ref in meta.get("ownerReferences") or () if isinstance(ref, Mapping)
        and ref.get("controller")
    ]
    if owner_uid and any(ref.get("uid") == owner_uid for ref in controllers):
        return True, ""
    if controllers and owner_uid:
        other = controllers[0]
        return False, (
            f"controlled by {other.get('kind')} {other.get('name')} (uid {other.get('uid')}), "
            "not by this parent"
        )
    if LAST_APPLIED_ANNOTATION in (meta.get("annotations") or {}):
        return True, ""
    return False, (
        f"not managed by the toolkit: no {LAST_APPLIED_ANNOTATION} annotation and no controller "
        "owner reference to this parent; pass adopt=True to take it over"
    )


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

    def get(
        self, api_version: str, kind: str, *, calls: _Calls | None = None
    ) -> Mapping[str, Any] | None:
        """The schema of a custom kind; None for built-in kinds and kinds no CRD defines."""
        if has_builtin_schema(api_version, kind):
            return None
        key = (api_version, kind)
        with self._lock:
            if key in self._schemas:
                return self._schemas[key]
        if calls is not None:
            calls.add("list")
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


class _Calls:
    """The requests one reconcile made, recorded as it goes."""

    def __init__(self, ref: ObjectRef) -> None:
        self.ref = ref
        self.calls: list[ApiCall] = []

    def add(self, verb: str) -> None:
        self.calls.append(ApiCall(verb=verb, ref=self.ref))


_UNKNOWN: Any = object()


class ResourceReconciler:
    """Reconciles one object at a time against a cluster (DESIGN.md section 4).

    ``recreate`` (default off) lets an update that the server refuses on immutable fields delete
    the object (foreground propagation), wait until it is gone (``recreate_timeout``) and create it
    again, for the kinds in ``recreate_kinds`` only. ``adopt`` lets it take over objects that are
    not ours. ``conflict_retries`` bounds the re-read-and-retry loop on 409 Conflict. Reads go
    through ``reader`` (default: straight to the cluster); conflicts re-read from the cluster.
    """

    def __init__(
        self,
        client: ClusterClient,
        *,
        reader: ReadCache | None = None,
        match_options: Sequence[Any] = (),
        adopt: bool = False,
        recreate: bool = False,
        recreate_kinds: Collection[str] = DEFAULT_RECREATE_KINDS,
        recreate_timeout: float = 60.0,
        poll_interval: float = 0.2,
        conflict_retries: int = 3,
        deleting_requeue: float = 2.0,
        dry_run: bool = False,
        clock: Clock | None = None,
    ) -> None:
        if conflict_retries < 0:
            raise ValueError(f"conflict_retries must be >= 0, got {conflict_retries}")
        self.client = client
        self.reader: ReadCache = reader if reader is not None else PassThroughCache(client)
        self.match_options = tuple(match_options)
        self.adopt = adopt
        self.recreate = recreate
        self.recreate_kinds = frozenset(recreate_kinds)
        self.recreate_timeout = recreate_timeout
        self.poll_interval = poll_interval
        self.conflict_retries = conflict_retries
        self.deleting_requeue = deleting_requeue
        self.dry_run = dry_run
        self.clock: Clock = clock if clock is not None else RealClock()
        self.crd_schemas = CrdSchemas(client)

    # -- entry point ------------------------------------------------------------------------

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
        if is_client_model(obj):  # an official model at the public edge
            obj = to_plain_object(obj)
        if not isinstance(obj, Mapping):
            raise TypeError(
                f"reconcile_resource needs a JSON-shaped dict, got {type(obj).__name__}"
            )
        if not isinstance(state, DesiredState):
            raise TypeError(f"reconcile_resource needs a DesiredState, got {state!r}")
        ref = ObjectRef.of(obj)
        if not ref.name or not ref.kind or not ref.api_version:
            raise ValueError(f"object {ref} lacks apiVersion, kind or metadata.name")
        calls = _Calls(ref)
        if live is _UNKNOWN:
            live = self._read(ref, calls)
        run = _Run(
            self, obj, state, ref, calls, owner_uid=owner_uid,
            adopt=self.adopt if adopt is None else adopt,
            recreate=self.recreate if recreate is None else recreate,
        )
        if state.is_absent:
            return run.absent(live)
        if live is None:
            return run.create()
        if state.is_created:
            return run.result(Action.UNCHANGED, live=live, reason="exists; CREATED never updates")
        return run.update(live)

    # -- reads ------------------------------------------------------------------------------

    def _read(self, ref: ObjectRef, calls: _Calls) -> dict[str, Any] | None:
        if not self.reader.from_memory:
            calls.add("get")
        return self.reader.get(ref.api_version, ref.kind, ref.name, namespace=ref.namespace)

    def _read_live(self, ref: ObjectRef, calls: _Calls) -> dict[str, Any] | None:
        """Read from the cluster itself (after a conflict or a race; never from a cache)."""
        calls.add("get")
        try:
            return self.client.get(ref.api_version, ref.kind, ref.name, namespace=ref.namespace)
        except NotFoundError:
            return None


class _Run:
    """One ``reconcile_resource`` call: its inputs, options and recorded calls."""

    def __init__(
        self,
        owner: ResourceReconciler,
        obj: KubeObject,
        state: DesiredState,
        ref: ObjectRef,
        calls: _Calls,
        *,
        owner_uid: str | None,
        adopt: bool,
        recreate: bool,
    ) -> None:
        self.r = owner
        self.client = owner.client
        self.obj = obj
        self.state = state
        self.ref = ref
        self.calls = calls
        self.owner_uid = owner_uid
        self.adopt = adopt
        self.recreate = recreate
        self._annotation: str | None = None

    def result(
        self,
        action: Action,
        *,
        live: Mapping[str, Any] | None = None,
        diff: Sequence[Any] = (),
        reason: str = "",
        requeue_after: float | None = None,
    ) -> ReconcileResult:
        return ReconcileResult(
            action=action, ref=self.ref, diff=tuple(diff),
            api_calls=tuple(self.calls.calls), requeue_after=requeue_after, reason=reason,
            live=live, dry_run=self.r.dry_run,
        )

    def _ownership(self, live: KubeObject) -> str:
        """Empty when we may write ``live``; else the reason we may not."""
        owned, reason = is_owned(live, owner_uid=self.owner_uid)
        return "" if owned or self.adopt else reason

    # -- create -----------------------------------------------------------------------------

    def annotation(self) -> str:
        """The last-applied annotation of the object as built (hooks' additions are not ours:
        they keep or stamp values, and recording them would make them look like our fields)."""
        if self._annotation is None:
            built = set_last_applied(self.obj)
            self._annotation = str(built["metadata"]["annotations"][LAST_APPLIED_ANNOTATION])
        return self._annotation

    def _create_body(self) -> dict[str, Any]:
        body = dict(self.state.before_create(self.obj))
        meta = dict(_meta(body))
        meta.pop("resourceVersion", None)
        meta["annotations"] = {
            **(meta.get("annotations") or {}), LAST_APPLIED_ANNOTATION: self.annotation(),
        }
        body["metadata"] = meta
        return body

    def create(self) -> ReconcileResult:
        self.calls.add("create")
        try:
            created = self.client.create(self._create_body(), dry_run=self.r.dry_run)
        except AlreadyExistsError:
            live = self.r._read_live(self.ref, self.calls)
            if live is None:  # deleted again in between: the next reconcile creates it
                return self.result(
                    Action.SKIPPED, reason="create raced with a delete",
                    requeue_after=self.r.deleting_requeue,
                )
            if self.state.is_created:
                return self.result(Action.UNCHANGED, live=live, reason="created by someone else")
            return self.update(live)
        return self.result(Action.CREATED, live=created)

    # -- update -----------------------------------------------------------------------------

    def _deleting(self, live: KubeObject) -> ReconcileResult | None:
        if _meta(live).get("deletionTimestamp"):
            return self.result(
                Action.SKIPPED, live=live, reason="being deleted; will create it again once gone",
                requeue_after=self.r.deleting_requeue,
            )
        return None

    def update(self, live: KubeObject) -> ReconcileResult:
        attempts = 0
        while True:
            deleting = self._deleting(live)
            if deleting is not None:
                return deleting
            reason = self._ownership(live)
            if reason:
                return self.result(Action.SKIPPED, live=live, reason=reason)
            desired = self.state.before_update(live, self.obj)
            if not self.state.should_update(live, desired):
                return self.result(Action.UNCHANGED, live=live, reason="should_update said no")
            patch_result = calculate_patch(
                live, desired, *self.r.match_options,
                crd_schema=self.r.crd_schemas.get(
                    self.ref.api_version, self.ref.kind, calls=self.calls
                ),
            )
            if patch_result.is_empty:
                return self.result(Action.UNCHANGED, live=live)
            body = self._patch_body(patch_result.patch, live)
            if body is None:
                return self.result(Action.UNCHANGED, live=live)
            self.calls.add("patch")
            try:
                patched = self.client.patch(
                    self.ref.api_version, self.ref.kind, self.ref.name, body,
                    patch_type=patch_result.patch_type, namespace=self.ref.namespace,
                    dry_run=self.r.dry_run,
                )
            except ConflictError as exc:
                attempts += 1
                if attempts > self.r.conflict_retries:
                    raise ConflictError(
                        f"still conflicting after {attempts} attempts: {exc.message}",
                        status=exc.status, ref=self.ref,
                    ) from exc
                fresh = self.r._read_live(self.ref, self.calls)
                if fresh is None:
                    return self.create()
                live = fresh
                continue
            except InvalidError as exc:
                fields = exc.immutable_fields
                if not fields:
                    raise
                return self._recreate(live, exc, fields, patch_result.diff)
            return self.result(Action.UPDATED, live=patched, diff=patch_result.diff)

    def _patch_body(self, patch: Mapping[str, Any], live: KubeObject) -> dict[str, Any] | None:
        """The patch to send, recording the built object and preconditioned on the live
        ``resourceVersion``; None when all it would change is an annotation that already
        records the built object (the difference came from a hook)."""
        body = dict(patch)
        meta = dict(body.get("metadata") or {})
        annotations = dict(meta.get("annotations") or {})
        annotations[LAST_APPLIED_ANNOTATION] = self.annotation()
        live_annotations = _meta(live).get("annotations") or {}
        rest = {k: v for k, v in annotations.items() if k != LAST_APPLIED_ANNOTATION}
        other_meta = {k: v for k, v in meta.items() if k != "annotations"}
        if (
            not rest and not other_meta and body.keys() <= {"metadata"}
            and live_annotations.get(LAST_APPLIED_ANNOTATION) == self.annotation()
        ):
            return None
        meta["annotations"] = annotations
        resource_version = _meta(live).get("resourceVersion")
        if resource_version:
            meta["resourceVersion"] = str(resource_version)
        body["metadata"] = meta
        return body

    # -- recreate ---------------------------------------------------------------------------

    def _recreate(
        self, live: KubeObject, exc: InvalidError, fields: Sequence[str], diff: Sequence[Any]
    ) -> ReconcileResult:
        key = kind_key(self.ref)
        if not self.recreate or key not in self.r.recreate_kinds:
            raise ImmutableFieldError(exc, fields=fields, kind_key=key) from exc
        if self.r.dry_run:
            return self.result(Action.RECREATED, diff=diff,
                               reason=f"would delete and recreate: {', '.join(fields)} changed")
        self._delete(live, propagation="Foreground")
        return self.create_after_gone(diff)

    def create_after_gone(self, diff: Sequence[Any]) -> ReconcileResult:
        clock = self.r.clock
        deadline = clock.monotonic() + self.r.recreate_timeout
        while True:
            if self.r._read_live(self.ref, self.calls) is None:
                break
            if clock.monotonic() >= deadline:
                return self.result(
                    Action.DELETED, diff=diff, requeue_after=self.r.deleting_requeue,
                    reason=f"deleted to recreate, still present after {self.r.recreate_timeout}s",
                )
            clock.sleep(self.r.poll_interval)
        self.calls.add("create")
        try:
            created = self.client.create(self._create_body())
        except AlreadyExistsError:  # someone recreated it between our read and create
            return self.result(
                Action.DELETED, diff=diff, requeue_after=self.r.deleting_requeue,
                reason="deleted to recreate; the name was taken again before our create",
            )
        return self.result(Action.RECREATED, live=created, diff=diff)

    # -- delete -----------------------------------------------------------------------------

    def _delete(self, live: KubeObject, *, propagation: str | None = None) -> bool:
        """Delete ``live`` if it is still the same object; False when it was already gone.
        In a dry run nothing is sent (a delete has no server-side dry run in the protocol)."""
        if self.r.dry_run:
            return True
        uid = _meta(live).get("uid")
        self.calls.add("delete")
        try:
            self.client.delete(
                self.ref.api_version, self.ref.kind, self.ref.name, namespace=self.ref.namespace,
                propagation_policy=propagation,
                preconditions={"uid": str(uid)} if uid else None,
            )
        except NotFoundError:
            return False
        return True

    def absent(self, live: KubeObject | None) -> ReconcileResult:
        if live is None:
            return self.result(Action.UNCHANGED, reason="absent")
        if _meta(live).get("deletionTimestamp"):
            return self.result(Action.UNCHANGED, live=live, reason="already being deleted")
        reason = self._ownership(live)
        if reason:
            return self.result(Action.SKIPPED, live=live, reason=reason)
        target = self.state.before_delete(live)
        if target is None:
            return self.result(Action.UNCHANGED, live=live, reason="before_delete kept it")
        try:
            deleted = self._delete(target, propagation="Background")
        except ConflictError:  # replaced by another object of the same name meanwhile
            return self.result(
                Action.SKIPPED, reason="replaced by a new object before the delete",
                requeue_after=self.r.deleting_requeue,
            )
        if not deleted:
            return self.result(Action.UNCHANGED, reason="absent")
        return self.result(Action.DELETED)
