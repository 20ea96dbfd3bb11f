"""Our parents' status is kstatus-readable (``Reconciling``, ``Stalled``, ``observedGeneration``),
permanent errors stall, and conditions of one's own are merged or refused: pure functions."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import BuilderFailedError, InvalidSpecError, ObjectRef
from builders.health import HealthStatus, health_of
from reconciler import Operator, PermanentError, ReconcilerUsageError, Reporting
from reconciler._reconcile.conditions import (
    ChildError,
    ParentResult,
    parent_conditions,
    status_patch,
)
from reconciler._reconcile.readiness import Readiness, readiness_status_patch
from reconciler._reconcile.reconciling import Action, ReconcileResult

_REF = ObjectRef(api_version="v1", kind="ConfigMap", name="c", namespace="ns")


def _wrapped(error: Exception) -> BuilderFailedError:
    """A builder's exception as the reconcile sees it (wrapped, the cause chained)."""
    try:
        raise BuilderFailedError(builder="cm", parent="Stack ns/s", reason=str(error)) from error
    except BuilderFailedError as wrapped:
        return wrapped


_errors = st.lists(st.sampled_from([
    ChildError(ref=_REF, message="boom", error=RuntimeError("boom")),
    ChildError(ref=_REF, message="bad", error=_wrapped(PermanentError("bad size",
                                                                      reason="BadSize"))),
    ChildError(ref=_REF, message="invalid", error=_wrapped(
        InvalidSpecError(field="spec.size", value=-1, reason="negative"))),
]), max_size=3)
_pending = st.lists(st.sampled_from([
    ReconcileResult(action=Action.SKIPPED, ref=_REF, reason="not ours"),
    ReconcileResult(action=Action.SKIPPED, ref=_REF, reason="being deleted", requeue_after=1.0),
]), max_size=2)


def _parent(generation: int, status: dict[str, Any] | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"apiVersion": "x.dev/v1", "kind": "Stack",
                             "metadata": {"name": "s", "namespace": "ns",
                                          "generation": generation}}
    if status is not None:
        found["status"] = status
    return found


@given(generation=st.integers(1, 5), errors=_errors, pending=_pending)
def test_health_of_reads_our_parent_as_its_conditions_say(
        generation: int, errors: list[ChildError], pending: list[ReconcileResult]) -> None:
    patch = status_patch(parent=_parent(generation), results=pending, errors=errors,
                         children=3, now=1e9)
    assert patch is not None
    conditions = {c["type"]: c for c in patch["status"]["conditions"]}
    assert set(conditions) == {"Reconciled", "Ready", "Reconciling", "Stalled"}
    assert {c["observedGeneration"] for c in conditions.values()} == {generation}
    health = health_of(_parent(generation, patch["status"]))
    stalled = (bool(errors) and all(e.permanent for e in errors)) or (
        not errors and any(r.requeue_after is None for r in pending))
    if not errors and not pending:
        assert health.status is HealthStatus.CURRENT
    elif stalled:
        assert health.status is HealthStatus.FAILED
        assert conditions["Stalled"]["message"] == conditions["Ready"]["message"]
    else:
        assert health.status is HealthStatus.IN_PROGRESS
    # a spec change not reconciled yet reads as InProgress, whatever the conditions say
    bumped = _parent(generation + 1, patch["status"])
    assert health_of(bumped).status is HealthStatus.IN_PROGRESS


def test_a_permanent_error_names_its_reason_and_the_result_is_permanent() -> None:
    error = ChildError(ref=_REF, message="m", error=_wrapped(PermanentError("size must be odd",
                                                                            reason="EvenSize")))
    conds = {c["type"]: c for c in parent_conditions(generation=2, errors=[error], pending=[],
                                                      children=1)}
    assert conds["Ready"]["reason"] == conds["Stalled"]["reason"] == "EvenSize"
    assert conds["Stalled"]["status"] == "True"
    assert ParentResult(parent=_REF, errors=(error,)).permanent
    transient = ChildError(ref=_REF, message="m", error=RuntimeError("x"))
    assert not ParentResult(parent=_REF, errors=(error, transient)).permanent


def test_a_status_functions_permanent_error_stalls_without_failing_the_reconcile() -> None:
    def status(parent: Any, children: Any) -> dict[str, Any]:
        raise PermanentError("replicas must be odd", reason="EvenReplicas")

    patch, wanted = readiness_status_patch(parent=_parent(1), results=[], errors=[], children=0,
                                           now=1e9, readiness=None, status=status)
    assert patch is not None
    conds = {c["type"]: c for c in wanted["conditions"]}
    assert (conds["Stalled"]["status"], conds["Stalled"]["reason"]) == ("True", "EvenReplicas")
    assert conds["Ready"]["message"] == "status function: replicas must be odd"
    assert health_of(_parent(1, wanted)).status is HealthStatus.FAILED


def test_conditions_of_ones_own_are_merged_with_ours() -> None:
    def status(parent: Any, children: Any) -> dict[str, Any]:
        return {"size": 3, "conditions": [
            {"type": "Available", "status": "True", "reason": "AllUp", "message": "3 up"},
            {"type": "example.com/Degraded", "status": "False"}]}

    _patch, wanted = readiness_status_patch(parent=_parent(4), results=[], errors=[], children=0,
                                           now=1e9, readiness=None, status=status)
    conds = {c["type"]: c for c in wanted["conditions"]}
    assert set(conds) == {"Reconciled", "Ready", "Reconciling", "Stalled", "Available",
                          "example.com/Degraded"}
    assert conds["Available"]["observedGeneration"] == 4
    assert conds["Available"]["lastTransitionTime"]
    assert wanted["size"] == 3
    settled = _parent(4, wanted)
    again, _ = readiness_status_patch(parent=settled, results=[], errors=[], children=0,
                                      now=1e9 + 1, readiness=None, status=status)
    assert again is None  # unchanged: no write


@pytest.mark.parametrize(("conditions", "message"), [
    ([{"type": "Ready", "status": "True"}], "'Ready' is the toolkit's own"),
    ([{"type": "Stalled", "status": "False"}], "'Stalled' is the toolkit's own"),
    ([{"type": "Available", "status": "yes"}], "status must be one of True, False, Unknown"),
    ([{"type": "Available", "status": "True", "reason": "not camel"}], "must be CamelCase"),
    ([{"type": "has space", "status": "True"}], "not a valid type"),
    (["Available"], "a condition must be a dict"),
    ([{"type": "A", "status": "True"}, {"type": "A", "status": "False"}], "'A' twice"),
])
def test_a_bad_condition_stalls_the_parent_naming_it(
        conditions: list[Any], message: str) -> None:
    _patch, wanted = readiness_status_patch(
        parent=_parent(1), results=[], errors=[], children=0, now=1e9, readiness=None,
        status=lambda p, c: {"conditions": conditions})
    conds = {c["type"]: c for c in wanted["conditions"]}
    assert conds["Stalled"]["status"] == "True"
    assert message in conds["Stalled"]["message"]
    assert not any(c.get("status") not in ("True", "False") for c in conds.values())


def _build(parent: Any) -> list[Any]:
    return []


def test_declared_condition_types_are_checked_when_the_operator_is_built() -> None:
    with pytest.raises(ReconcilerUsageError, match="'Reconciled' is the toolkit's own"):
        Operator(
            api_version="x.dev/v1", kind="Stack", build=_build,
            reporting=Reporting(condition_types=("Available", "Reconciled")),
        )
    with pytest.raises(ReconcilerUsageError, match="not a valid type"):
        Operator(
            api_version="x.dev/v1", kind="Stack", build=_build,
            reporting=Reporting(condition_types=("a b",)),
        )
    with pytest.raises(TypeError, match="not a string"):
        Operator(
            api_version="x.dev/v1", kind="Stack", build=_build,
            reporting=Reporting(condition_types="Available"),
        )
    operator = Operator(
        api_version="x.dev/v1", kind="Stack", build=_build,
        reporting=Reporting(
            condition_types=("Available",),
            status=lambda p, c: {"conditions": [{"type": "Degraded", "status": "True"}]}),
    )
    assert operator.status_function is not None
    _, wanted = readiness_status_patch(parent=_parent(1), results=[], errors=[], children=0,
                                       now=1e9, readiness=None, status=operator.status_function)
    stalled = {c["type"]: c for c in wanted["conditions"]}["Stalled"]
    assert "'Degraded' is not among the declared" in stalled["message"]


@pytest.mark.parametrize(("job_condition", "expected"), [
    ("Complete", HealthStatus.CURRENT),
    (None, HealthStatus.IN_PROGRESS),
    ("Failed", HealthStatus.FAILED),
])
def test_with_readiness_the_parent_reads_as_its_childrens_health(
        job_condition: str | None, expected: HealthStatus) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns"},
           "status": {"conditions": [{"type": job_condition, "status": "True"}]
                      if job_condition else []}}
    result = ReconcileResult(action=Action.UNCHANGED, ref=ObjectRef.of(job), live=job)
    _, wanted = readiness_status_patch(parent=_parent(2), results=[result], errors=[],
                                       children=1, now=1e9, readiness=Readiness(), status=None)
    assert health_of(_parent(2, wanted)).status is expected
