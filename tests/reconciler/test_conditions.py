"""The parent's conditions, status write decision and Events, as pure functions of the outcome."""

from __future__ import annotations

from typing import Any

from builders import ObjectRef
from reconciler._base.times import format_time as rfc3339
from reconciler._reconcile.conditions import (
    ChildError,
    merge_conditions,
    parent_conditions,
    parent_events,
    pending_children,
    status_patch,
)
from reconciler._reconcile.reconciling import Action, ReconcileResult

NOW = 1_800_000_000.0


def ref(name: str, kind: str = "ConfigMap") -> ObjectRef:
    return ObjectRef(api_version="v1", kind=kind, name=name, namespace="ns")


def result(name: str, action: Action, **kw: Any) -> ReconcileResult:
    return ReconcileResult(action=action, ref=ref(name), **kw)


def parent(generation: int = 3, status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "x.dev/v1", "kind": "Stack",
                           "metadata": {"name": "s", "namespace": "ns", "generation": generation}}
    if status is not None:
        obj["status"] = status
    return obj


def by_type(conditions: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in conditions}


def test_all_applied_is_reconciled_and_ready_with_observed_generation() -> None:
    conds = by_type(parent_conditions(generation=4, errors=[], pending=[], children=2))
    assert (conds["Reconciled"]["status"], conds["Ready"]["status"]) == ("True", "True")
    assert conds["Ready"]["reason"] == "ChildrenReady"
    assert {c["observedGeneration"] for c in conds.values()} == {4}


def test_a_failure_beside_waiting_and_skipped_children_says_all_three() -> None:
    """The reason is the failure's; the message also names the children that wait on their
    dependencies and the ones skipped, so that fixing the failure does not reveal them only
    then (found by the server-side-apply machine's soak, session 15: a handed-over
    StatefulSet's refused change hid a query frontend waiting for a query that builds
    nothing, and the skipped child hid nothing less)."""
    from reconciler._reconcile.waits import Wait

    wait = Wait(ref=ref("front", kind="Deployment"), reason="DependencyNotBuilt",
                message="Deployment ns/front (component 'front') waits for component 'query', "
                        "which builds nothing")
    skipped = result("theirs", Action.SKIPPED, reason="not managed by the toolkit")
    failing = [ChildError(ref=ref("rule", kind="StatefulSet"), message="immutable",
                          error=RuntimeError())]
    conds = by_type(parent_conditions(generation=2, errors=failing, pending=[skipped],
                                      waiting=[wait], children=4))
    message = conds["Reconciled"]["message"]
    assert conds["Reconciled"]["reason"] == conds["Ready"]["reason"] == "ChildrenFailed"
    assert message.startswith("1 of 4 children failed: StatefulSet.v1 ns/rule: immutable; ")
    assert "1 waiting: Deployment ns/front (component 'front') waits for" in message
    assert message.endswith("1 of 4 children skipped, not ours: ConfigMap.v1 ns/theirs: "
                            "not managed by the toolkit")
    assert conds["Ready"]["message"] == message
    # a wait beside a skip: the wait's reason, both said (the skip with what to do)
    conds = by_type(parent_conditions(generation=2, errors=[], pending=[skipped],
                                      waiting=[wait], children=4))
    assert conds["Reconciled"]["reason"] == "DependencyNotBuilt"
    assert conds["Reconciled"]["message"].startswith("1 waiting: Deployment ns/front ")
    assert "; 1 of 4 children skipped, not ours: ConfigMap.v1 ns/theirs: " in conds[
        "Reconciled"]["message"]
    assert "delete the object to have it created" in conds["Reconciled"]["message"]


def test_pending_and_skipped_children_keep_the_parent_not_ready() -> None:
    waiting = result("a", Action.SKIPPED, requeue_after=2.0, reason="being deleted")
    skipped = result("b", Action.SKIPPED, reason="not ours")
    done = result("c", Action.UNCHANGED)
    assert pending_children([waiting, skipped, done]) == [waiting, skipped]
    conds = by_type(parent_conditions(generation=1, errors=[], pending=[waiting], children=3))
    assert (conds["Reconciled"]["status"], conds["Ready"]["reason"]) == ("True", "ChildrenPending")
    conds = by_type(parent_conditions(generation=1, errors=[], pending=[waiting, skipped],
                                      children=3))
    assert conds["Ready"]["reason"] == conds["Reconciled"]["reason"] == "ChildrenSkipped"
    assert conds["Reconciled"]["status"] == "False"
    assert "1 of 3 children skipped, not ours: " in conds["Reconciled"]["message"]
    assert "delete the object" in conds["Ready"]["message"]
    assert "optk.dev/last-applied" in conds["Ready"]["message"]
    assert "adopt=True" not in conds["Ready"]["message"]
    assert (conds["Stalled"]["status"], conds["Reconciling"]["status"]) == ("True", "False")


def test_errors_fail_both_conditions_naming_the_child() -> None:
    error = ChildError(ref=ref("bad"), message="forbidden", error=RuntimeError("x"))
    conds = by_type(parent_conditions(generation=1, errors=[error], pending=[], children=2))
    assert conds["Reconciled"]["reason"] == conds["Ready"]["reason"] == "ChildrenFailed"
    assert "1 of 2 children failed" in conds["Ready"]["message"]
    assert "bad: forbidden" in conds["Ready"]["message"]
    assert error.retry_after is None


def test_merge_keeps_others_and_the_transition_time_unless_the_status_flips() -> None:
    theirs = {"type": "Available", "status": "True"}
    old = {"type": "Ready", "status": "True", "reason": "ChildrenReady", "message": "m",
           "observedGeneration": 1, "lastTransitionTime": "2020-01-01T00:00:00Z"}
    same = {k: v for k, v in old.items() if k != "lastTransitionTime"}
    merged, changed = merge_conditions([theirs, old], [same], "2030-01-01T00:00:00Z")
    assert (merged, changed) == ([theirs, old], False)
    flipped = {**same, "status": "False"}
    merged, changed = merge_conditions([theirs, old], [flipped], "2030-01-01T00:00:00Z")
    assert changed
    assert merged[1]["lastTransitionTime"] == "2030-01-01T00:00:00Z"
    merged, changed = merge_conditions(None, [same], "2030-01-01T00:00:00Z")
    assert changed
    assert merged == [{**same, "lastTransitionTime": "2030-01-01T00:00:00Z"}]


def test_status_is_written_on_change_only() -> None:
    results = [result("a", Action.CREATED)]
    first = status_patch(parent=parent(), results=results, errors=[], children=1, now=NOW)
    assert first is not None
    status = first["status"]
    assert (status["observedGeneration"], status["lastReconcileTime"]) == (3, rfc3339(NOW))
    later = parent(status=status)
    assert status_patch(parent=later, results=results, errors=[], children=1,
                        now=NOW + 86400) is None
    bumped = {**later, "metadata": {**later["metadata"], "generation": 4}}
    assert status_patch(parent=bumped, results=results, errors=[], children=1,
                        now=NOW + 1) is not None
    failing = [ChildError(ref=ref("a"), message="boom", error=RuntimeError())]
    assert status_patch(parent=later, results=[], errors=failing, children=1,
                        now=NOW + 1) is not None


def test_status_refresh_rewrites_only_an_old_time() -> None:
    results = [result("a", Action.UNCHANGED)]
    first = status_patch(parent=parent(), results=results, errors=[], children=1, now=NOW)
    assert first is not None
    later = parent(status=first["status"])
    kwargs: dict[str, Any] = {"results": results, "errors": [], "children": 1, "refresh": 600.0}
    assert status_patch(parent=later, now=NOW + 599, **kwargs) is None
    again = status_patch(parent=later, now=NOW + 600, **kwargs)
    assert again is not None
    assert again["status"]["lastReconcileTime"] == rfc3339(NOW + 600)
    unreadable = parent(status={**first["status"], "lastReconcileTime": "yesterday"})
    assert status_patch(parent=unreadable, results=results, errors=[], children=1,
                        now=NOW) is not None


def test_events_group_changes_by_kind_and_warn_about_failures() -> None:
    results = [result("a", Action.CREATED), result("b", Action.UNCHANGED),
               result("c", Action.CREATED), result("d", Action.UPDATED),
               result("e", Action.DELETED), result("f", Action.SKIPPED)]
    events = parent_events(results, [])
    assert [(e.reason, e.type) for e in events] == [
        ("Created", "Normal"), ("Updated", "Normal"), ("Deleted", "Normal")]
    assert events[0].message == "Created 2 children: ConfigMap.v1 ns/a, ConfigMap.v1 ns/c"
    assert events[1].message == "Updated child: ConfigMap.v1 ns/d"
    failing = [ChildError(ref=ref("x"), message="denied", error=RuntimeError())]
    [warning] = parent_events([], failing)
    assert (warning.reason, warning.type) == ("ReconcileError", "Warning")
    assert warning.message == "1 children failed: ConfigMap.v1 ns/x: denied"
    assert parent_events([result("b", Action.UNCHANGED)], []) == []


def test_a_refused_immutable_change_is_worded_for_the_parents_owner() -> None:
    """Issue 31: the owner of the parent cannot pass ``recreate=True`` to the operator's
    ResourceReconciler; the condition and the Warning say what is immutable and what the owner
    can do (revert the parent's change, or delete the child to have it created anew)."""
    from reconciler._base.errors import ImmutableFieldError, InvalidError

    cause = {"reason": "FieldValueForbidden", "field": "spec",
             "message": "Forbidden: updates to statefulset spec for fields other than 'replicas', "
                        "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' "
                        "and 'minReadySeconds' are forbidden"}
    refused = InvalidError("refused", status={"reason": "Invalid", "details": {"causes": [cause]}},
                           code=422)
    sts = ObjectRef(api_version="apps/v1", kind="StatefulSet", name="db", namespace="ns")
    error = ImmutableFieldError(refused, fields=["spec"], kind_key="apps/StatefulSet")
    child = ChildError(ref=sts, message=str(error), error=error)
    conds = by_type(parent_conditions(generation=2, errors=[child], pending=[], children=1))
    (warning,) = [e for e in parent_events([], [child]) if e.type == "Warning"]
    for message in (conds["Reconciled"]["message"], conds["Ready"]["message"], warning.message):
        assert "recreate=True" not in message, message
        assert "recreate_kinds" not in message, message
        assert "the change of spec cannot be applied to the existing StatefulSet" in message, \
            message
        assert "are forbidden" in message, message
        assert "delete StatefulSet db" in message, message
        assert "revert the change" in message, message
    assert conds["Reconciled"]["reason"] == "ImmutableFieldChanged"
