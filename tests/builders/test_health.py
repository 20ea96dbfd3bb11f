"""``builders.health``: kstatus' rules per kind, the generic rule as properties, user rules."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import InvalidSpecError
from builders.health import (
    SCHEDULE_WINDOW,
    Health,
    HealthStatus,
    as_health,
    health_of,
    jsonpath_rule,
)

CURRENT, IN_PROGRESS, FAILED = HealthStatus.CURRENT, HealthStatus.IN_PROGRESS, HealthStatus.FAILED


def obj(api_version: str, kind: str, *, spec: Any = None, status: Any = None,
        generation: int | None = None, **meta: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"apiVersion": api_version, "kind": kind,
                             "metadata": {"name": "x", **meta}}
    if generation is not None:
        found["metadata"]["generation"] = generation
    if spec is not None:
        found["spec"] = spec
    if status is not None:
        found["status"] = status
    return found


def cond(type_: str, status: str = "True", reason: str = "", message: str = "") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message}


AVAILABLE = [cond("Available"), cond("Progressing", reason="NewReplicaSetAvailable")]


@pytest.mark.parametrize(("thing", "status", "reason"), [
    (obj("apps/v1", "Deployment", spec={"replicas": 2, "progressDeadlineSeconds": 600},
         status={"replicas": 2, "updatedReplicas": 2, "readyReplicas": 2,
                 "availableReplicas": 2, "conditions": AVAILABLE}), CURRENT, ""),
    (obj("apps/v1", "Deployment", spec={"replicas": 2},
         status={"replicas": 1, "conditions": AVAILABLE}), IN_PROGRESS, "LessReplicas"),
    (obj("apps/v1", "Deployment", spec={"replicas": 1, "progressDeadlineSeconds": 600},
         status={"replicas": 1, "updatedReplicas": 1, "readyReplicas": 1,
                 "availableReplicas": 1, "conditions": [cond("Available")]}),
     IN_PROGRESS, "ReplicaSetNotAvailable"),
    (obj("apps/v1", "Deployment", spec={"replicas": 1},
         status={"conditions": [cond("Progressing", "False", "ProgressDeadlineExceeded")]}),
     FAILED, "ProgressDeadlineExceeded"),
    (obj("apps/v1", "StatefulSet", spec={"replicas": 2},
         status={"replicas": 2, "readyReplicas": 2, "currentReplicas": 2,
                 "currentRevision": "a", "updateRevision": "b"}), IN_PROGRESS,
     "RevisionMismatch"),
    (obj("apps/v1", "StatefulSet", spec={"replicas": 2, "updateStrategy": {"type": "OnDelete"}}),
     CURRENT, ""),
    (obj("apps/v1", "DaemonSet", generation=1, status={"observedGeneration": 1}), IN_PROGRESS,
     "NoDesiredNumber"),
    (obj("apps/v1", "DaemonSet", status={}), IN_PROGRESS, "NoGeneration"),
    (obj("apps/v1", "DaemonSet", generation=2, status={
        "observedGeneration": 2, "desiredNumberScheduled": 3, "currentNumberScheduled": 3,
        "updatedNumberScheduled": 3, "numberAvailable": 3, "numberReady": 3}), CURRENT, ""),
    (obj("apps/v1", "ReplicaSet", spec={"replicas": 1},
         status={"conditions": [cond("ReplicaFailure")]}), IN_PROGRESS, "ReplicaFailure"),
    (obj("batch/v1", "Job", status={"conditions": [cond("Complete")]}), CURRENT, ""),
    (obj("batch/v1", "Job", status={"conditions": [cond("Failed")]}), FAILED, "JobFailed"),
    (obj("batch/v1", "Job", status={"startTime": "2026-01-01T00:00:00Z"}), CURRENT, ""),
    (obj("v1", "Pod", status={"phase": "Running", "conditions": [cond("Ready")]}), CURRENT, ""),
    (obj("v1", "Pod", status={"phase": "Running", "containerStatuses": [
        {"name": "app", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}),
     FAILED, "ContainerCrashLooping"),
    (obj("v1", "Pod", status={}), IN_PROGRESS, "PodNotObserved"),
    (obj("v1", "PersistentVolumeClaim", status={"phase": "Pending"}), IN_PROGRESS, "NotBound"),
    (obj("v1", "PersistentVolumeClaim", status={"phase": "Bound"}), CURRENT, ""),
    (obj("v1", "Service", spec={"type": "LoadBalancer"}), IN_PROGRESS, "NoIPAssigned"),
    (obj("v1", "Service", spec={"type": "LoadBalancer", "clusterIP": "10.0.0.1"}), CURRENT, ""),
    (obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", status={"conditions": [
        cond("NamesAccepted"), cond("Established")]}), CURRENT, ""),
    (obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", status={"conditions": [
        cond("NamesAccepted", "False", "PluralConflict", "taken")]}), FAILED, "PluralConflict"),
    (obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", status={"conditions": [
        cond("Established", "False", "Installing")]}), IN_PROGRESS, "Installing"),
    (obj("policy/v1", "PodDisruptionBudget", generation=1, status={"observedGeneration": 1}),
     CURRENT, ""),
    (obj("v1", "ConfigMap"), CURRENT, ""),
    (obj("x.dev/v1", "Widget", status={"conditions": [cond("Ready", "False", "Waiting")]}),
     IN_PROGRESS, "Waiting"),
    (obj("x.dev/v1", "Widget", status={"conditions": [cond("Ready", "True")]}), CURRENT, ""),
])
def test_kstatus_rules_per_kind(thing: dict[str, Any], status: HealthStatus, reason: str) -> None:
    verdict = health_of(thing)
    assert verdict.status is status, verdict
    if reason:
        assert verdict.reason == reason


def test_an_unschedulable_pod_fails_after_the_schedule_window_only_with_a_clock() -> None:
    pod = obj("v1", "Pod", creationTimestamp="2026-01-01T00:00:00Z", status={
        "phase": "Pending", "conditions": [cond("PodScheduled", "False", "Unschedulable")]})
    created = 1767225600.0
    assert health_of(pod).status is IN_PROGRESS
    assert health_of(pod, now=created + 1).status is IN_PROGRESS
    assert health_of(pod, now=created + SCHEDULE_WINDOW + 1).status is FAILED


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                               max_size=3),
    max_leaves=10)
_kinds = st.sampled_from([
    ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("apps/v1", "DaemonSet"),
    ("apps/v1", "ReplicaSet"), ("batch/v1", "Job"), ("v1", "Pod"),
    ("v1", "PersistentVolumeClaim"), ("v1", "Service"), ("policy/v1", "PodDisruptionBudget"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"), ("x.dev/v1", "Widget"),
])
_conditions = st.lists(st.fixed_dictionaries({
    "type": st.sampled_from(["Ready", "Available", "Reconciling", "Stalled", "Established"]),
    "status": st.sampled_from(["True", "False", "Unknown"]),
}), max_size=4)


@given(kind=_kinds, spec=_json, status=_json)
def test_health_of_never_raises_on_malformed_objects(
        kind: tuple[str, str], spec: Any, status: Any) -> None:
    verdict = health_of({"apiVersion": kind[0], "kind": kind[1], "metadata": {"name": "x"},
                         "spec": spec, "status": status})
    assert isinstance(verdict, Health)


@given(kind=_kinds, generation=st.integers(1, 10), observed=st.integers(0, 10),
       conditions=_conditions)
def test_a_generation_not_observed_is_in_progress(
        kind: tuple[str, str], generation: int, observed: int, conditions: Any) -> None:
    thing = obj(*kind, generation=generation,
                status={"observedGeneration": observed, "conditions": conditions})
    verdict = health_of(thing)
    if observed != generation:
        assert verdict.status is IN_PROGRESS
        assert verdict.reason == "LatestGenerationNotObserved"


@given(kind=_kinds, generation=st.integers(1, 10), conditions=_conditions)
def test_stalled_is_failed_and_reconciling_is_in_progress(
        kind: tuple[str, str], generation: int, conditions: Any) -> None:
    thing = obj(*kind, generation=generation,
                status={"observedGeneration": generation, "conditions": conditions})
    verdict = health_of(thing)
    first = next((c for c in conditions if c["status"] == "True"
                  and c["type"] in ("Reconciling", "Stalled")), None)
    if first is not None:
        assert verdict.status is (FAILED if first["type"] == "Stalled" else IN_PROGRESS)


@given(kind=_kinds, status=_json)
def test_an_object_being_deleted_is_terminating(kind: tuple[str, str], status: Any) -> None:
    thing = obj(*kind, deletionTimestamp="2026-01-01T00:00:00Z", status=status)
    assert health_of(thing).status is HealthStatus.TERMINATING


@given(verdict=st.one_of(st.none(), st.booleans(), st.text(max_size=10)))
def test_as_health_reads_every_rule_verdict(verdict: bool | str | None) -> None:
    health = as_health(verdict)
    assert health.current == (verdict is None or verdict is True)
    if isinstance(verdict, str):
        assert health.message == verdict


def test_jsonpath_rules() -> None:
    bound = jsonpath_rule("$.status.phase", equals="Bound", failed_if=["Lost"])
    assert bound(obj("v1", "PersistentVolumeClaim", status={"phase": "Bound"})).current
    waiting = bound(obj("v1", "PersistentVolumeClaim", status={"phase": "Pending"}))
    assert (waiting.status, waiting.message) == (
        IN_PROGRESS, "$.status.phase is 'Pending', waiting for 'Bound'")
    assert bound(obj("v1", "PersistentVolumeClaim", status={"phase": "Lost"})).status is FAILED
    assert bound(obj("v1", "PersistentVolumeClaim")).message == "$.status.phase has no value yet"
    replicas = jsonpath_rule("$.status.readyReplicas", at_least="$.spec.replicas")
    assert replicas(obj("x/v1", "W", spec={"replicas": 3}, status={"readyReplicas": 3})).current
    short = replicas(obj("x/v1", "W", spec={"replicas": 3}, status={"readyReplicas": 2}))
    assert short.message == "$.status.readyReplicas is 2, waiting for at least 3"
    available = jsonpath_rule("$.status.conditions[?(@.type=='Available')].status",
                              equals="True", message="not available yet")
    assert available(obj("x/v1", "W", status={"conditions": [cond("Available")]})).current
    assert available(obj("x/v1", "W", status={"conditions": [cond("Available", "False")]})
                     ).message == "not available yet"
    truthy = jsonpath_rule("status.ready")
    assert truthy(obj("x/v1", "W", status={"ready": True})).current
    assert not truthy(obj("x/v1", "W", status={"ready": False})).current


def test_a_malformed_rule_is_refused_when_made_naming_the_expression() -> None:
    with pytest.raises(InvalidSpecError, match=r"invalid jsonpath: '\$\.\[\[': not a JSONPath"):
        jsonpath_rule("$.[[")
    with pytest.raises(InvalidSpecError, match="at_least"):
        jsonpath_rule("$.status.n", at_least=[1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty"):
        jsonpath_rule("")
