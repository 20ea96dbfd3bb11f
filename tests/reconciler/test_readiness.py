"""Readiness from the children's health and the status builder, as pure functions."""

from __future__ import annotations

from typing import Any

import pytest

from builders import ObjectRef
from reconciler._reconcile.readiness import (
    Readiness,
    child_health,
    custom_status,
    readiness_status_patch,
)
from reconciler._reconcile.reconciling import Action, ReconcileResult


def _deployment(replicas: int, available: int, generation: int = 1,
                observed: int = 1) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "generation": generation},
            "spec": {"replicas": replicas, "progressDeadlineSeconds": 600},
            "status": {"availableReplicas": available, "observedGeneration": observed,
                       "replicas": replicas, "updatedReplicas": replicas,
                       "readyReplicas": available,
                       "conditions": [
                           {"type": "Available", "status": "True"},
                           {"type": "Progressing", "status": "True",
                            "reason": "NewReplicaSetAvailable"}]}}


def _job(condition: str | None) -> dict[str, Any]:
    conditions = [{"type": condition, "status": "True", "reason": "BackoffLimitExceeded"}]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "status": {"conditions": conditions if condition else []}}


def test_the_builtin_checks_are_kstatus_rules() -> None:
    readiness = Readiness()
    assert child_health(_deployment(2, 2), readiness) is None
    assert child_health(_deployment(2, 1), readiness) == "available: 1/2"
    assert child_health(_deployment(2, 2, generation=2), readiness) == (
        "Deployment generation is 2, but latest observed generation is 1")
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
           "spec": {"replicas": 3}, "status": {"replicas": 3, "readyReplicas": 2}}
    assert child_health(sts, readiness) == "ready: 2/3"
    assert child_health(_job("Complete"), readiness) is None
    assert child_health(_job(None), readiness) == "Job not started"
    assert child_health(_job("Failed"), readiness) == (
        "Job failed: 0/1 failed (BackoffLimitExceeded)")
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"}}
    assert child_health(service, readiness) is None
    custom = {"apiVersion": "x.dev/v1", "kind": "Widget", "metadata": {"name": "w"},
              "status": {"conditions": [{"type": "Ready", "status": "False",
                                         "message": "warming up"}]}}
    assert child_health(custom, readiness) == "warming up"
    assert child_health(custom, Readiness(defaults=False)) is None


def test_a_custom_check_per_kind_overrides_and_adds() -> None:
    readiness = Readiness(checks={"Service": lambda o: bool(o.get("spec", {}).get("clusterIP")),
                                  ("apps/v1", "Deployment"): lambda o: True})
    assert child_health({"apiVersion": "v1", "kind": "Service", "metadata": {}}, readiness) == (
        "not ready")
    assert child_health(_deployment(2, 0), readiness) is None
    with pytest.raises(TypeError, match="must be callable"):
        Readiness(checks={"Job": "yes"})  # type: ignore[dict-item]


def _result(live: dict[str, Any]) -> ReconcileResult:
    return ReconcileResult(action=Action.UNCHANGED, ref=ObjectRef.of(live), live=live)


def test_ready_is_distinct_from_reconciled_and_the_status_builder_is_merged() -> None:
    parent = {"apiVersion": "x/v1", "kind": "P", "metadata": {"name": "p", "generation": 3}}
    patch, wanted = readiness_status_patch(
        parent=parent, results=[_result(_deployment(2, 1))], errors=[], children=1, now=1e9,
        readiness=Readiness(), status=lambda p, children: {"replicas": len(children)})
    assert patch is not None
    conditions = {c["type"]: c for c in wanted["conditions"]}
    assert conditions["Reconciled"]["status"] == "True"
    assert conditions["Ready"]["status"] == "False"
    assert conditions["Ready"]["reason"] == "ChildrenNotReady"
    assert "Deployment web: available: 1/2" in conditions["Ready"]["message"]
    assert wanted["replicas"] == 1
    settled = {**parent, "status": wanted}
    again, _ = readiness_status_patch(
        parent=settled, results=[_result(_deployment(2, 1))], errors=[], children=1, now=1e9 + 5,
        readiness=Readiness(), status=lambda p, children: {"replicas": len(children)})
    assert again is None  # nothing changed: no write
    ready, wanted = readiness_status_patch(
        parent=settled, results=[_result(_deployment(2, 2))], errors=[], children=1, now=1e9 + 9,
        readiness=Readiness(), status=lambda p, children: {"replicas": len(children)})
    assert ready is not None
    assert {c["type"]: c["status"] for c in wanted["conditions"]}["Ready"] == "True"
    with pytest.raises(ValueError, match="must not set observedGeneration"):
        custom_status(lambda p, c: {"observedGeneration": 1}, parent, [])
