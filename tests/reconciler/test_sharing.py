"""Children without an owner reference built by several parents (issue 36), as pure decisions:
``is_owned`` follows the ``optk.dev/owner-uid`` label; a shared child (``builders.shared``)
records its parents in ``optk.dev/shared-by``, a parent joins before writing it, leaves instead
of deleting it while others remain, and only the last one deletes it; the record is bounded;
``stamp_child`` marks such children (the holder named, no per-parent marks when shared)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from builders import DesiredState, ObjectRef, run_builders, shared
from builders.names import INSTANCE_LABEL, OWNER_UID_LABEL, SHARED_LABEL
from objectmatcher import apply_patch, set_last_applied
from reconciler._reconcile.declared import stamp_child
from reconciler._reconcile.planning import PlanAction, is_owned, plan_child
from reconciler._reconcile.sharing import (
    MAX_SHARERS,
    OWNER_ANNOTATION,
    SHARED_BY_ANNOTATION,
    ownership_marker,
    release_patch,
    shared_record,
)

PRESENT, ABSENT = DesiredState.PRESENT, DesiredState.ABSENT


def parent(ns: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": "x.dev/v1", "kind": "Observer",
            "metadata": {"name": "obs", "namespace": ns, "uid": uid}}


def role() -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "viewer"}, "rules": []}


def built(of: dict[str, Any], *, is_shared: bool = False) -> dict[str, Any]:
    obj = role()
    if is_shared:
        [(obj, _)] = run_builders([shared(lambda: role())])
    return stamp_child(of, obj, PRESENT, operator_name="op", namespaced=lambda *_: False)


def stored(obj: dict[str, Any], rv: str = "5") -> dict[str, Any]:
    live = set_last_applied(obj)
    live["metadata"] = {**live["metadata"], "uid": "c-1", "resourceVersion": rv}
    return live


A, B = parent("ns-a", "uid-a"), parent("ns-b", "uid-b")


def test_a_child_without_owner_reference_names_its_holder_and_belongs_to_it() -> None:
    child = built(A)
    assert child["metadata"]["labels"][OWNER_UID_LABEL] == "uid-a"
    assert child["metadata"]["annotations"][OWNER_ANNOTATION] == "Observer ns-a/obs"
    assert "ownerReferences" not in child["metadata"]
    live = stored(child)
    assert is_owned(live, owner_uid="uid-a") == (True, "")
    owned, why = is_owned(live, owner_uid="uid-b")
    assert not owned
    assert why.startswith("held by Observer ns-a/obs (uid uid-a)")
    # the second parent writes nothing, present (skipped: it cannot have its child) or
    # absent (done: it has no such child; the holder's object left alone)
    plan = plan_child(live=live, desired=built(B), state=PRESENT, owner_uid="uid-b")
    assert (plan.action, plan.writes) == (PlanAction.SKIP, False)
    plan = plan_child(live=live, desired=built(B), state=ABSENT, owner_uid="uid-b")
    assert (plan.action, plan.writes) == (PlanAction.UNCHANGED, False)
    assert "held by Observer ns-a/obs" in plan.reason


def test_a_released_child_is_taken_by_the_next_parent() -> None:
    live = stored(built(A))
    released = apply_patch(live, release_patch(live), patch_type="application/json-patch+json")
    assert OWNER_UID_LABEL not in released["metadata"]["labels"]
    assert ownership_marker(released) != ownership_marker(live)
    plan = plan_child(live=released, desired=built(B), state=PRESENT, owner_uid="uid-b")
    assert plan.action is PlanAction.PATCH
    taken = apply_patch(released, plan.body, patch_type=plan.patch_type)
    assert taken["metadata"]["labels"][OWNER_UID_LABEL] == "uid-b"


def test_a_shared_child_has_no_per_parent_marks_and_records_its_creator() -> None:
    child = built(A, is_shared=True)
    labels = child["metadata"]["labels"]
    assert labels[SHARED_LABEL] == "true"
    assert OWNER_UID_LABEL not in labels
    assert INSTANCE_LABEL not in labels
    plan = plan_child(live=None, desired=child, state=PRESENT, owner_uid="uid-a")
    assert plan.action is PlanAction.CREATE
    assert isinstance(plan.body, dict)
    annotations = plan.body["metadata"]["annotations"]
    assert json.loads(annotations[SHARED_BY_ANNOTATION]) == {"uid-a": "Observer ns-a/obs"}
    assert OWNER_ANNOTATION not in annotations  # it would differ between the parents


def _created(child: dict[str, Any], uid: str) -> dict[str, Any]:
    plan = plan_child(live=None, desired=child, state=PRESENT, owner_uid=uid)
    assert isinstance(plan.body, dict)
    return {**plan.body, "metadata": {**plan.body["metadata"], "uid": "c-1",
                                      "resourceVersion": "5"}}


def test_a_second_parent_joins_the_record_then_changes_nothing() -> None:
    live = _created(built(A, is_shared=True), "uid-a")
    join = plan_child(live=live, desired=built(B, is_shared=True), state=PRESENT,
                      owner_uid="uid-b")
    assert (join.action, join.replan) == (PlanAction.PATCH, True)
    assert join.body[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "5"}
    joined = apply_patch(live, join.body, patch_type=join.patch_type)
    assert set(shared_record(joined)) == {"uid-a", "uid-b"}
    for uid, p in (("uid-a", A), ("uid-b", B)):  # neither relabels it
        again = plan_child(live=joined, desired=built(p, is_shared=True), state=PRESENT,
                           owner_uid=uid)
        assert again.action is PlanAction.UNCHANGED, (uid, again)


def test_only_the_last_parent_deletes_a_shared_child() -> None:
    live = _created(built(A, is_shared=True), "uid-a")
    join = plan_child(live=live, desired=built(B, is_shared=True), state=PRESENT,
                      owner_uid="uid-b")
    both = apply_patch(live, join.body, patch_type=join.patch_type)
    leave = plan_child(live=both, desired=built(A), state=ABSENT, owner_uid="uid-a")
    assert leave.action is PlanAction.PATCH  # leaves the record, keeps the object
    assert "kept for 1 other parent" in leave.reason
    left = apply_patch(both, leave.body, patch_type=leave.patch_type)
    assert set(shared_record(left)) == {"uid-b"}
    gone = plan_child(live=left, desired=built(A), state=ABSENT, owner_uid="uid-a")
    assert gone.action is PlanAction.UNCHANGED  # not recorded: nothing of it to do
    last = plan_child(live=left, desired=built(B), state=ABSENT, owner_uid="uid-b")
    assert last.action is PlanAction.DELETE


def test_the_record_is_bounded() -> None:
    live = _created(built(A, is_shared=True), "uid-a")
    full = {f"uid-{i}": f"Observer ns-{i}/obs" for i in range(MAX_SHARERS)}
    live["metadata"]["annotations"][SHARED_BY_ANNOTATION] = json.dumps(full)
    plan = plan_child(live=live, desired=built(B, is_shared=True), state=PRESENT,
                      owner_uid="uid-b")
    assert (plan.action, plan.writes) == (PlanAction.SKIP, False)
    assert f"shared by {MAX_SHARERS} parents" in plan.reason


@pytest.mark.parametrize("desired_shared", [True, False])
def test_shared_and_exclusive_declarations_do_not_fight(desired_shared: bool) -> None:
    """A parent whose builder disagrees with how the live object is declared writes nothing."""
    holder_built = built(A, is_shared=not desired_shared)
    live = (_created(holder_built, "uid-a") if not desired_shared else stored(holder_built))
    plan = plan_child(live=live, desired=built(B, is_shared=desired_shared), state=PRESENT,
                      owner_uid="uid-b")
    assert (plan.action, plan.writes) == (PlanAction.SKIP, False), plan


def test_the_ownership_marker_ignores_other_changes() -> None:
    live = stored(built(A))
    edited = {**live, "rules": [{"verbs": ["get"]}],
              "metadata": {**live["metadata"], "resourceVersion": "9"}}
    assert ownership_marker(edited) == ownership_marker(live)
    assert ObjectRef.of(edited) == ObjectRef.of(live)
