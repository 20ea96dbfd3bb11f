"""``plan_child``: every decision of a resource reconcile, checked as pure code.

One test per branch of the plan, and a Hypothesis property: executing a plan on a small in-memory
model of the server (create, ``objectmatcher.apply_patch``, delete) and planning again gives
``UNCHANGED``, or a terminal ``SKIP`` (not ours, being deleted) that changes nothing.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import DesiredState, ObjectRef, keep_cluster_ip
from objectmatcher import (
    LAST_APPLIED_ANNOTATION,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    apply_patch,
    get_last_applied,
    set_last_applied,
)
from reconciler._reconcile.planning import (
    ChildPlan,
    PlanAction,
    create_body,
    kind_key,
    may_recreate,
    plan_child,
    plan_recreate,
)

PRESENT, ABSENT, CREATED = DesiredState.PRESENT, DesiredState.ABSENT, DesiredState.CREATED
UID = "parent-uid"


def cm(name: str = "c", **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns"}, "data": dict(data)}


def stored(obj: dict[str, Any], *, rv: str = "7", uid: str = "u-1") -> dict[str, Any]:
    """``obj`` as the server keeps it after our create: annotation, uid, resourceVersion."""
    live = set_last_applied(obj)
    live["metadata"] = {**live["metadata"], "uid": uid, "resourceVersion": rv}
    return live


def foreign(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` created by someone else: no annotation, no owner reference."""
    return {**obj, "metadata": {**obj["metadata"], "uid": "u-2", "resourceVersion": "3"}}


def plan(live: Any, desired: Any, state: DesiredState = PRESENT, **kw: Any) -> ChildPlan:
    return plan_child(live=live, desired=desired, state=state, owner_uid=UID, **kw)


# -- PRESENT and CREATED ------------------------------------------------------------------------


def test_missing_is_created_with_the_annotation_of_the_object_as_built() -> None:
    p = plan(None, cm(a="1"))
    assert p.action is PlanAction.CREATE
    assert p.ref == ObjectRef(api_version="v1", kind="ConfigMap", name="c", namespace="ns")
    assert p.body is not None
    assert p.writes
    assert get_last_applied(p.body) == cm(a="1")
    assert "resourceVersion" not in p.body["metadata"]


def test_before_create_shapes_the_body_but_not_the_annotation() -> None:
    state = PRESENT.with_hooks(before_create=lambda d: {**d, "data": {"a": "hooked"}})
    body = create_body(cm(a="1"), state)
    assert body["data"] == {"a": "hooked"}
    assert get_last_applied(body) == cm(a="1")


def test_a_create_that_raced_with_a_delete_is_retried_later() -> None:
    p = plan(None, cm(a="1"), raced=True)
    assert (p.action, p.requeue, p.reason) == (PlanAction.SKIP, True, "create raced with a delete")


def test_created_never_updates() -> None:
    live = stored(cm(a="old"))
    p = plan(live, cm(a="new"), CREATED)
    assert (p.action, p.reason) == (PlanAction.UNCHANGED, "exists; CREATED never updates")
    raced = plan(live, cm(a="new"), CREATED, raced=True)
    assert (raced.action, raced.reason) == (PlanAction.UNCHANGED, "created by someone else")


def test_equal_object_is_unchanged() -> None:
    p = plan(stored(cm(a="1")), cm(a="1"))
    assert (p.action, p.body, p.writes) == (PlanAction.UNCHANGED, None, False)


def test_a_difference_is_one_patch_with_precondition_and_new_annotation() -> None:
    p = plan(stored(cm(a="1", b="2"), rv="41"), cm(a="9"))
    assert p.action is PlanAction.PATCH
    assert p.patch_type == STRATEGIC_MERGE_PATCH
    assert p.body is not None
    assert p.body["data"] == {"a": "9", "b": None}  # b was ours: the three-way merge deletes it
    assert p.body["metadata"]["resourceVersion"] == "41"
    annotation = p.body["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
    assert get_last_applied({"metadata": {"annotations": {LAST_APPLIED_ANNOTATION: annotation}}}
                            ) == cm(a="9")
    assert {(d.op, d.path) for d in p.diff} >= {("change", ("data", "a")),
                                                ("remove", ("data", "b"))}


def test_custom_kinds_are_merge_patched() -> None:
    desired = {"apiVersion": "x.dev/v1", "kind": "Widget",
               "metadata": {"name": "w", "namespace": "ns"}, "spec": {"size": 2}}
    p = plan(stored({**desired, "spec": {"size": 1}}), desired)
    assert (p.action, p.patch_type) == (PlanAction.PATCH, MERGE_PATCH)


def test_being_deleted_waits_and_requeues() -> None:
    live = stored(cm(a="1"))
    live["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    p = plan(live, cm(a="2"))
    assert (p.action, p.requeue) == (PlanAction.SKIP, True)
    assert "being deleted" in p.reason


def test_not_ours_is_a_conflict_skipped_with_the_reason() -> None:
    p = plan(foreign(cm(a="theirs")), cm(a="ours"))
    assert (p.action, p.requeue, p.writes) == (PlanAction.SKIP, False, False)
    assert "not managed by the toolkit" in p.reason


def test_controlled_by_another_owner_is_skipped_naming_it() -> None:
    live = stored(cm(a="1"))
    live["metadata"]["ownerReferences"] = [
        {"kind": "Other", "name": "boss", "uid": "other-uid", "controller": True}]
    p = plan(live, cm(a="2"))
    assert p.action is PlanAction.SKIP
    assert "Other boss" in p.reason


def test_a_controller_reference_to_the_parent_makes_it_ours_without_annotation() -> None:
    live = foreign(cm(a="1"))
    live["metadata"]["ownerReferences"] = [{"uid": UID, "controller": True}]
    assert plan(live, cm(a="2")).action is PlanAction.PATCH


def test_adopt_patches_in_the_annotation() -> None:
    p = plan(foreign(cm(a="1")), cm(a="1"), adopt=True)
    assert p.action is PlanAction.PATCH
    assert p.body is not None
    assert LAST_APPLIED_ANNOTATION in p.body["metadata"]["annotations"]


def test_should_update_can_veto() -> None:
    state = PRESENT.with_hooks(should_update=lambda current, desired: False)
    p = plan(stored(cm(a="1")), cm(a="2"), state)
    assert (p.action, p.reason) == (PlanAction.UNCHANGED, "should_update said no")


def test_a_difference_only_a_hook_made_writes_nothing() -> None:
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "s", "namespace": "ns"},
               "spec": {"ports": [{"port": 80}]}}
    live = stored(service)
    live["spec"] = {**live["spec"], "clusterIP": "10.0.0.9"}
    state = PRESENT.with_hooks(before_update=keep_cluster_ip)
    assert plan(live, service, state).action is PlanAction.UNCHANGED


def test_before_update_output_is_compared_but_not_recorded() -> None:
    state = PRESENT.with_hooks(before_update=lambda cur, d: {**d, "data": {"a": "hooked"}})
    p = plan(stored(cm(a="1")), cm(a="1"), state)
    assert p.action is PlanAction.PATCH
    assert p.body is not None
    assert p.body["data"] == {"a": "hooked"}


# -- ABSENT -------------------------------------------------------------------------------------


def test_absent_and_missing_is_done() -> None:
    p = plan(None, cm(), ABSENT)
    assert (p.action, p.reason) == (PlanAction.UNCHANGED, "absent")


def test_absent_and_ours_is_deleted_in_the_background_with_uid_precondition() -> None:
    p = plan(stored(cm(a="1"), uid="u-9"), cm(), ABSENT)
    assert (p.action, p.propagation, p.delete_uid) == (PlanAction.DELETE, "Background", "u-9")


def test_absent_but_already_being_deleted_is_unchanged() -> None:
    live = stored(cm(a="1"))
    live["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    p = plan(live, cm(), ABSENT)
    assert (p.action, p.reason) == (PlanAction.UNCHANGED, "already being deleted")


def test_absent_but_not_ours_is_left_alone_and_holds() -> None:
    # the parent has no such child, which is what ABSENT asks: unchanged, as a cache that does
    # not hold someone else's object says it (issue 38), the object not the parent's live child
    p = plan(foreign(cm(a="1")), cm(), ABSENT)
    assert (p.action, p.live) == (PlanAction.UNCHANGED, None)
    assert p.reason.startswith("absent: the object of that name is not ours (not managed")
    assert plan(foreign(cm(a="1")), cm(), ABSENT, adopt=True).action is PlanAction.DELETE


def test_before_delete_can_keep_the_object() -> None:
    state = ABSENT.with_hooks(before_delete=lambda current: None)
    p = plan(stored(cm(a="1")), cm(), state)
    assert (p.action, p.reason) == (PlanAction.UNCHANGED, "before_delete kept it")


# -- recreate -----------------------------------------------------------------------------------


def test_kind_key_and_may_recreate() -> None:
    deployment = ObjectRef(api_version="apps/v1", kind="Deployment", name="d")
    assert kind_key(deployment) == "Deployment.apps"
    assert kind_key(cm()) == "ConfigMap"
    assert may_recreate(deployment, recreate=True, recreate_kinds={"Deployment.apps"})
    assert not may_recreate(deployment, recreate=False, recreate_kinds={"Deployment.apps"})
    assert not may_recreate(deployment, recreate=True, recreate_kinds={"Service"})


def test_a_refused_patch_becomes_a_foreground_recreate_only_when_allowed() -> None:
    patch = plan(stored(cm(a="1"), uid="u-5"), cm(a="2"))
    recreate = plan_recreate(patch, fields=["data"], recreate=True, recreate_kinds={"ConfigMap"})
    assert recreate is not None
    assert (recreate.action, recreate.propagation, recreate.delete_uid) == (
        PlanAction.RECREATE, "Foreground", "u-5")
    assert recreate.diff == patch.diff
    assert recreate.reason == "would delete and recreate: data changed"
    assert plan_recreate(patch, fields=["data"], recreate=False,
                         recreate_kinds={"ConfigMap"}) is None
    assert plan_recreate(patch, fields=["data"], recreate=True, recreate_kinds=()) is None
    unchanged = plan(stored(cm(a="1")), cm(a="1"))
    assert plan_recreate(unchanged, fields=["data"], recreate=True,
                         recreate_kinds={"ConfigMap"}) is None


def test_planning_never_mutates_its_inputs() -> None:
    live, desired = stored(cm(a="1", b="2")), cm(a="3")
    before = copy.deepcopy((live, desired))
    plan(live, desired)
    plan(live, desired, ABSENT)
    plan(None, desired)
    assert (live, desired) == before


# -- the property: execute, plan again, nothing left to do ----------------------------------------

_keys = st.sampled_from(["a", "b", "c", "d"])
_values = st.sampled_from(["1", "2", "x", ""])
_data = st.dictionaries(_keys, _values, max_size=4)
_labels = st.dictionaries(st.sampled_from(["app", "tier", "team"]), st.sampled_from(["p", "q"]),
                          max_size=3)


@st.composite
def _desired(draw: st.DrawFn) -> dict[str, Any]:
    obj = cm("prop", **draw(_data))
    labels = draw(_labels)
    if labels:
        obj["metadata"]["labels"] = labels
    return obj


@st.composite
def _live(draw: st.DrawFn) -> dict[str, Any] | None:
    """Missing, or an earlier version of ours, or someone else's, with drift by others."""
    how = draw(st.sampled_from(["missing", "ours", "owner-ref", "foreign", "deleting"]))
    if how == "missing":
        return None
    earlier = draw(_desired())
    live = stored(earlier, rv=str(draw(st.integers(1, 99))))
    if how in ("foreign", "owner-ref"):
        del live["metadata"]["annotations"]
    if how == "owner-ref":
        live["metadata"]["ownerReferences"] = [{"uid": UID, "controller": True}]
    if how == "deleting":
        live["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    drift = draw(_data)  # another writer's keys and values
    live["data"] = {**live.get("data", {}), **drift}
    extra_labels = draw(_labels)
    if extra_labels:
        live["metadata"]["labels"] = {**live["metadata"].get("labels", {}), **extra_labels}
    return live


_states = st.sampled_from([
    PRESENT, CREATED, ABSENT,
    PRESENT.with_hooks(before_update=lambda cur, d: {**d, "data": {
        **d.get("data", {}), **({"c": cur["data"]["c"]} if "c" in (cur.get("data") or {}) else {}),
    }}),
])


def _execute(model: dict[str, Any] | None, p: ChildPlan) -> dict[str, Any] | None:
    """The plan done by a tiny server: what the object is afterwards."""
    if p.action is PlanAction.CREATE:
        assert model is None
        assert p.body is not None
        created = copy.deepcopy(dict(p.body))
        created["metadata"] = {**created["metadata"], "uid": "new", "resourceVersion": "1"}
        return created
    if p.action is PlanAction.PATCH:
        assert model is not None
        assert p.body is not None
        assert p.body["metadata"]["resourceVersion"] == model["metadata"]["resourceVersion"]
        patched = apply_patch(model, p.body, patch_type=p.patch_type)
        rv = str(int(model["metadata"]["resourceVersion"]) + 1)
        patched["metadata"] = {**patched["metadata"], "resourceVersion": rv}
        return patched
    if p.action is PlanAction.DELETE:
        assert model is not None
        return None
    return model


@given(live=_live(), desired=_desired(), state=_states, adopt=st.booleans())
def test_after_executing_a_plan_the_next_plan_is_unchanged(
    live: dict[str, Any] | None, desired: dict[str, Any], state: DesiredState, adopt: bool
) -> None:
    first = plan(live, desired, state, adopt=adopt)
    after = _execute(live, first)
    second = plan(after, desired, state, adopt=adopt)
    if second.action is PlanAction.SKIP:  # terminal: not ours, or being deleted
        assert first.action is PlanAction.SKIP
        assert after == live
        assert not second.writes
        return
    assert second.action is PlanAction.UNCHANGED, (first, second)
    if state.is_present and after is not None and first.action is not PlanAction.UNCHANGED:
        for key, value in (desired.get("data") or {}).items():
            if key != "c" or not state.has_hooks:
                assert after["data"].get(key) == value


@pytest.mark.parametrize("state", [PRESENT, CREATED, ABSENT])
def test_from_nothing_two_steps_reach_unchanged(state: DesiredState) -> None:
    first = plan(None, cm(a="1"), state)
    second = plan(_execute(None, first), cm(a="1"), state)
    assert second.action is PlanAction.UNCHANGED
