"""The plan of one child: every decision of a resource reconcile, in pure code.

``plan_child(live=..., desired=..., state=..., owner_uid=...)`` says what to do to bring one live
object (or its absence) to a built object in a ``DesiredState`` (DESIGN.md section 4): whether the
object is ours (a controller owner reference to the parent, or our last-applied annotation; else a
conflict, skipped unless adoption is on), whether it is being deleted (wait and requeue), the
hooks (``before_create``, ``before_update``, ``should_update``, ``before_delete``), the three-way
match (``objectmatcher.calculate_patch``), the request body (a create carrying the last-applied
annotation of the object as built, or a patch preconditioned on the live ``resourceVersion`` that
updates the annotation in the same request) and the action: create, patch, delete, skip or
unchanged. A refused update on immutable fields becomes a recreate by :func:`plan_recreate`.

No I/O and no client here: ``reconciler._reconcile.reconciling`` reads the live object, asks for a
plan, sends the one request it names and, when the server answers with a conflict or a race, plans
again with what it read.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import attrs

from builders import DesiredState, ObjectRef
from builders.names import OWNER_UID_LABEL, label_value
from objectmatcher import (
    LAST_APPLIED_ANNOTATION,
    ORIGINAL_FOREIGN,
    ORIGINAL_RECORDED,
    ORIGINAL_UNREADABLE,
    KubeObject,
    calculate_patch,
    set_last_applied,
)
from reconciler._base.keys import meta_of
from reconciler._reconcile.applying import (
    APPLIED_DIGEST_ANNOTATION,
    APPLY_PATCH,
    ApplyStrategy,
    ServerSideApply,
    apply_configuration,
    decide_apply,
    has_managed_fields,
    original_from_apply,
)
from reconciler._reconcile.sharing import (
    MAX_SHARERS,
    OWNER_ANNOTATION,
    SHARED_BY_ANNOTATION,
    holder_of,
    is_shared,
    record_patch,
    shared_record,
    wants_shared,
)

__all__ = [
    "ChildPlan",
    "PlanAction",
    "create_body",
    "is_owned",
    "kind_key",
    "may_recreate",
    "plan_child",
    "plan_recreate",
]


class PlanAction(enum.Enum):
    """The one thing a plan asks the executor to do."""

    CREATE = "create"
    """Send ``ChildPlan.body`` as a create."""
    PATCH = "patch"
    """Send ``ChildPlan.body`` as a patch of ``ChildPlan.patch_type``."""
    RECREATE = "recreate"
    """Delete the live object (foreground), wait until it is gone, then create it again."""
    DELETE = "delete"
    """Delete the object (background propagation, preconditioned on its uid)."""
    SKIP = "skip"
    """Write nothing: not ours, being deleted, or a race (``ChildPlan.reason`` says which)."""
    UNCHANGED = "unchanged"
    """Write nothing: the object is as desired (or the state or a hook says to leave it)."""


@attrs.frozen(kw_only=True)
class ChildPlan:
    """What to do to one object, with everything the request needs."""

    action: PlanAction
    ref: ObjectRef
    reason: str = ""
    """Why nothing is written, or why a recreate, for people."""
    requeue: bool = False
    """True when the object should be looked at again later (being deleted, a race)."""
    body: Mapping[str, Any] | list[dict[str, Any]] | None = attrs.field(default=None,
                                                                           repr=False)
    """The create body or the patch body (a list: a JSON patch)."""
    patch_type: str = ""
    diff: tuple[Any, ...] = ()
    """``objectmatcher`` diff items of a patch or recreate (Secret values redacted)."""
    delete_uid: str | None = None
    """The uid precondition of a delete (the object planned against, not a newcomer)."""
    propagation: str | None = None
    """The propagation policy of a delete: ``Background``, or ``Foreground`` for a recreate."""
    live: Mapping[str, Any] | None = attrs.field(default=None, repr=False, eq=False)
    """The live object the plan was made against."""
    force: bool = False
    """A server-side apply sent with ``force=true`` (``applying``)."""
    reread: bool = False
    """Read the object from the server (its ``managedFields``) and plan again."""
    replan: bool = False
    """After this patch (a migration of ownership), plan again with what it returned."""
    conflicts: tuple[tuple[str, str], ...] = ()
    """Server-side apply: (field, manager) another apply manager owns with another value."""
    original_status: str = ORIGINAL_RECORDED
    """The matcher's ``PatchResult.original_status`` of the live object's last-applied
    annotation: ``recorded``, ``absent``, ``unreadable`` (corrupt, oversized or too deeply
    nested) or ``foreign`` (it records another object). The last two are worth a Warning on
    the parent; the plan then patches from the desired object and rewrites the annotation."""
    held: str = ""
    """Why a write was held back (a policy, the drift mode, contention: ``guard``), or ""."""
    drift: tuple[str, ...] = ()
    """The field paths (JSON pointers) of a held patch: drift reported, not repaired."""
    requeue_after: float | None = None
    """Seconds until the object should be looked at again, when not the default requeue."""

    @property
    def writes(self) -> bool:
        """Whether executing the plan sends a write."""
        return self.action in (
            PlanAction.CREATE, PlanAction.PATCH, PlanAction.RECREATE, PlanAction.DELETE
        )


def kind_key(obj_or_ref: Mapping[str, Any] | ObjectRef) -> str:
    """``Kind.group`` (``Kind`` for the core group): how kinds are named in allow-lists."""
    ref = obj_or_ref if isinstance(obj_or_ref, ObjectRef) else ObjectRef.of(obj_or_ref)
    group = ref.api_version.rpartition("/")[0]
    return f"{ref.kind}.{group}" if group else ref.kind


def is_owned(live: KubeObject, *, owner_uid: str | None = None) -> tuple[bool, str]:
    """Whether ``live`` is ours (DESIGN.md section 4), and if not, why.

    Ours: it has a controller owner reference to ``owner_uid``, or it carries our last-applied
    annotation and no controller owner reference to some other owner, nor (unless shared:
    ``sharing``) an ``optk.dev/owner-uid`` label naming another parent: a child without an
    owner reference follows that label, so two parents never take it from each other.
    """
    meta = meta_of(live)
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
    label = (meta.get("labels") or {}).get(OWNER_UID_LABEL)
    if owner_uid and label and label != label_value(owner_uid) and not controllers \
            and not is_shared(live):
        return False, (
            f"held by {holder_of(live)}: a child without an owner reference belongs to the "
            f"parent its {OWNER_UID_LABEL} label names (declare it shared with builders.shared "
            "for several parents to keep it)"
        )
    annotations = meta.get("annotations") or {}
    if LAST_APPLIED_ANNOTATION in annotations or APPLIED_DIGEST_ANNOTATION in annotations:
        return True, ""
    return False, (
        f"not managed by the toolkit: no {LAST_APPLIED_ANNOTATION} annotation and no controller "
        "owner reference to this parent"
    )


def _annotation(desired: KubeObject) -> str:
    """The last-applied annotation of the object as built (hooks' additions are not ours: they
    keep or stamp values, and recording them would make them look like our fields)."""
    return str(set_last_applied(desired)["metadata"]["annotations"][LAST_APPLIED_ANNOTATION])


def create_body(desired: KubeObject, state: DesiredState) -> dict[str, Any]:
    """What to create: ``before_create(desired)`` with the last-applied annotation of
    ``desired`` and no ``resourceVersion``."""
    body = dict(state.before_create(desired))
    meta = dict(meta_of(body))
    meta.pop("resourceVersion", None)
    meta["annotations"] = {
        **(meta.get("annotations") or {}), LAST_APPLIED_ANNOTATION: _annotation(desired),
    }
    body["metadata"] = meta
    return body


def _patch_body(
    patch: Mapping[str, Any], live: KubeObject, annotation: str
) -> dict[str, Any] | None:
    """The patch to send, recording the built object and preconditioned on the live
    ``resourceVersion``; None when all it would change is an annotation that already records
    the built object (the difference came from a hook)."""
    body = dict(patch)
    meta = dict(body.get("metadata") or {})
    annotations = dict(meta.get("annotations") or {})
    annotations[LAST_APPLIED_ANNOTATION] = annotation
    live_annotations = meta_of(live).get("annotations") or {}
    rest = {k: v for k, v in annotations.items() if k != LAST_APPLIED_ANNOTATION}
    other_meta = {k: v for k, v in meta.items() if k != "annotations"}
    if (
        not rest and not other_meta and body.keys() <= {"metadata"}
        and live_annotations.get(LAST_APPLIED_ANNOTATION) == annotation
    ):
        return None
    meta["annotations"] = annotations
    resource_version = meta_of(live).get("resourceVersion")
    if resource_version:
        meta["resourceVersion"] = str(resource_version)
    body["metadata"] = meta
    return body


def plan_child(
    *,
    live: KubeObject | None,
    desired: KubeObject,
    state: DesiredState,
    owner_uid: str | None = None,
    adopt: bool = False,
    match_options: Sequence[Any] = (),
    crd_schema: Mapping[str, Any] | None = None,
    raced: bool = False,
    ref: ObjectRef | None = None,
    apply: ApplyStrategy | None = None,
    manager: str = "optk",
    now: str = "",
) -> ChildPlan:
    """The plan that brings ``live`` (None: missing) to ``desired`` in ``state``.

    ``owner_uid`` names the parent whose controller owner reference makes an object ours;
    ``adopt`` writes objects that are not. ``match_options`` and ``crd_schema`` go to
    ``calculate_patch``. ``raced`` says the executor's create found the name taken (``live`` is
    what it read then): a CREATED object made by someone else is left as it is, and a name that
    is free again is retried later instead of at once. ``ref`` is ``ObjectRef.of(desired)``
    when the caller has it already. ``apply`` is the write strategy (``applying``; default the
    three-way merge), ``manager`` the field manager of server-side apply and ``now`` the time
    of a migrated ``Apply`` entry.
    """
    ssa = apply if isinstance(apply, ServerSideApply) else None
    if ref is None:
        ref = ObjectRef.of(desired)
    if state.is_absent:
        return _plan_absent(ref, live, state, owner_uid=owner_uid, adopt=adopt)
    sharer = None
    if is_shared(desired):  # the record, not the three-way merge, says who builds it
        sharer = str((meta_of(desired).get("annotations") or {}).get(OWNER_ANNOTATION) or "")
        desired, ssa = wants_shared(desired), None
    if live is None and sharer is not None and not raced and owner_uid:
        created = create_body(desired, state)
        created["metadata"]["annotations"][SHARED_BY_ANNOTATION] = json.dumps(
            {owner_uid: sharer or owner_uid}, separators=(",", ":"))
        return ChildPlan(action=PlanAction.CREATE, ref=ref, body=created)
    if live is not None and (sharer is not None or is_shared(live)) and owner_uid and (
            joining := _join_shared(ref, live, sharer, owner_uid)) is not None:
        return joining
    if live is None:
        if raced:
            return ChildPlan(action=PlanAction.SKIP, ref=ref, requeue=True,
                             reason="create raced with a delete")
        if ssa is not None:
            return ChildPlan(action=PlanAction.PATCH, ref=ref,
                             body=apply_configuration(state.before_create(desired)),
                             patch_type=APPLY_PATCH, force=ssa.force)
        return ChildPlan(action=PlanAction.CREATE, ref=ref, body=create_body(desired, state))
    if state.is_created:
        reason = "created by someone else" if raced else "exists; CREATED never updates"
        return ChildPlan(action=PlanAction.UNCHANGED, ref=ref, live=live, reason=reason)
    if meta_of(live).get("deletionTimestamp"):
        return ChildPlan(action=PlanAction.SKIP, ref=ref, live=live, requeue=True,
                         reason="being deleted; will create it again once gone")
    owned, why = is_owned(live, owner_uid=owner_uid)
    if not owned and not adopt:
        return ChildPlan(action=PlanAction.SKIP, ref=ref, live=live, reason=why)
    hooked = state.before_update(live, desired)
    if not state.should_update(live, hooked):
        return ChildPlan(action=PlanAction.UNCHANGED, ref=ref, live=live,
                         reason="should_update said no")
    if ssa is not None:
        return _plan_apply(ref, live, hooked, ssa, manager=manager, crd_schema=crd_schema,
                           now=now)
    compared = live
    if APPLIED_DIGEST_ANNOTATION in (meta_of(live).get("annotations") or {}):
        # back from server-side apply: the original is what our Apply entry owns
        compared = original_from_apply(live, manager=manager, crd_schema=crd_schema) or live
        if compared is live and not has_managed_fields(live):
            return ChildPlan(action=PlanAction.SKIP, ref=ref, live=live, reread=True,
                             reason="switching back from server-side apply")
    match = calculate_patch(compared, hooked, *match_options, crd_schema=crd_schema)
    original = match.original_status
    if match.is_empty and original not in _BAD_ORIGINALS:
        return ChildPlan(action=PlanAction.UNCHANGED, ref=ref, live=live)
    # an unreadable or foreign record is replaced even when nothing else differs
    body = _patch_body(match.patch, live, _annotation(desired))
    if body is not None and compared is not live:  # the digest of server-side apply goes
        body["metadata"]["annotations"][APPLIED_DIGEST_ANNOTATION] = None
    if body is None:
        return ChildPlan(action=PlanAction.UNCHANGED, ref=ref, live=live,
                         original_status=original)
    return ChildPlan(action=PlanAction.PATCH, ref=ref, live=live, body=body,
                     patch_type=match.patch_type or _MERGE, diff=tuple(match.diff),
                     original_status=original)


def _plan_apply(
    ref: ObjectRef, live: KubeObject, desired: KubeObject, strategy: ServerSideApply, *,
    manager: str, crd_schema: Mapping[str, Any] | None, now: str,
) -> ChildPlan:
    decision = decide_apply(live=live, desired=desired, strategy=strategy, manager=manager,
                            crd_schema=crd_schema, now=now)
    if decision.reread:
        return ChildPlan(action=PlanAction.SKIP, ref=ref, live=live, reread=True,
                         reason=decision.reason)
    if decision.body is None:
        action = PlanAction.SKIP if decision.conflicts else PlanAction.UNCHANGED
        return ChildPlan(action=action, ref=ref, live=live, reason=decision.reason,
                         diff=decision.diff, conflicts=decision.conflicts)
    return ChildPlan(action=PlanAction.PATCH, ref=ref, live=live, body=decision.body,
                     patch_type=decision.patch_type, force=decision.force,
                     replan=decision.migrating, diff=decision.diff, reason=decision.reason)


def _join_shared(ref: ObjectRef, live: KubeObject, sharer: str | None,
                 owner_uid: str) -> ChildPlan | None:
    """Before a shared child is written: this parent recorded on it (a JSON patch, then plan
    again), or why it is skipped; None when it is recorded already."""
    if meta_of(live).get("deletionTimestamp"):
        return None  # planned as any child being deleted
    if sharer is None:
        return ChildPlan(action=PlanAction.SKIP, ref=ref, live=live, reason=(
            "shared by other parents (optk.dev/shared); this parent's builder does not "
            "declare it shared (builders.shared)"))
    owned, why = is_owned(live, owner_uid=owner_uid)
    if not owned:
        return ChildPlan(action=PlanAction.SKIP, ref=ref, live=live, reason=why)
    record = shared_record(live)
    if owner_uid in record:
        return None
    if len(record) >= MAX_SHARERS:
        return ChildPlan(action=PlanAction.SKIP, ref=ref, live=live, reason=(
            f"shared by {len(record)} parents, the most its {SHARED_BY_ANNOTATION} "
            "annotation records; waits for one of them to leave"))
    return ChildPlan(action=PlanAction.PATCH, ref=ref, live=live, replan=True,
                     body=record_patch(live, {**record, owner_uid: sharer or owner_uid}),
                     patch_type=_JSON_PATCH, reason="recorded as a parent of the shared child")


_JSON_PATCH = "application/json-patch+json"
_BAD_ORIGINALS = frozenset({ORIGINAL_UNREADABLE, ORIGINAL_FOREIGN})
_MERGE = "application/merge-patch+json"


ABSENT_NOT_OURS = "absent: the object of that name is not ours"
"""The reason of an ABSENT child whose place another owner's object holds (done, left alone;
the parent still hears of that object being handed over: ``parents.not_ours_waits``)."""


def _plan_absent(
    ref: ObjectRef, live: KubeObject | None, state: DesiredState, *, owner_uid: str | None,
    adopt: bool,
) -> ChildPlan:
    if live is None:
        return ChildPlan(action=PlanAction.UNCHANGED, ref=ref, reason="absent")
    if meta_of(live).get("deletionTimestamp"):
        return ChildPlan(action=PlanAction.UNCHANGED, ref=ref, live=live,
                         reason="already being deleted")
    if is_shared(live) and owner_uid:
        record = shared_record(live)
        others = {uid: who for uid, who in record.items() if uid != owner_uid}
        if others:  # only the last parent that builds it deletes it
            kept = (f"shared: kept for {len(others)} other parent(s): "
                    f"{', '.join(sorted(others.values())[:3])}")
            if owner_uid not in record:
                return ChildPlan(action=PlanAction.UNCHANGED, ref=ref, live=live, reason=kept)
            return ChildPlan(action=PlanAction.PATCH, ref=ref, live=live, reason=kept,
                             body=record_patch(live, others), patch_type=_JSON_PATCH)
    owned, why = is_owned(live, owner_uid=owner_uid)
    if not owned and not adopt:
        # Not this parent's child: what ABSENT asks (no such child of this parent) holds, and
        # the object is left alone. Said as "absent", as a cache that does not hold someone
        # else's objects says it (a shard's, or one without the managed-by label): every view
        # gives one answer, and nothing waits for the other owner (issue 38).
        return ChildPlan(action=PlanAction.UNCHANGED, ref=ref, reason=f"{ABSENT_NOT_OURS} ({why})")
    target = state.before_delete(live)
    if target is None:
        return ChildPlan(action=PlanAction.UNCHANGED, ref=ref, live=live,
                         reason="before_delete kept it")
    uid = meta_of(target).get("uid")
    return ChildPlan(action=PlanAction.DELETE, ref=ref, live=live, propagation="Background",
                     delete_uid=str(uid) if uid else None)


def may_recreate(ref: ObjectRef, *, recreate: bool, recreate_kinds: Collection[str]) -> bool:
    """Whether an object the server refuses to update may be deleted and created again."""
    return recreate and kind_key(ref) in recreate_kinds


def plan_recreate(
    plan: ChildPlan, *, fields: Sequence[str], recreate: bool, recreate_kinds: Collection[str]
) -> ChildPlan | None:
    """The recreate that replaces a ``plan``'s patch the server refused on immutable ``fields``;
    None when recreating is off or its kind is not allowed (the refusal stands)."""
    if plan.action is not PlanAction.PATCH or not may_recreate(
        plan.ref, recreate=recreate, recreate_kinds=recreate_kinds
    ):
        return None
    uid = meta_of(plan.live or {}).get("uid")
    return ChildPlan(
        action=PlanAction.RECREATE, ref=plan.ref, live=plan.live, diff=plan.diff,
        propagation="Foreground", delete_uid=str(uid) if uid else None,
        reason=f"would delete and recreate: {', '.join(fields)} changed",
    )
