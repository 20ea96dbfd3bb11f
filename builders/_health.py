"""The health of any Kubernetes object, kstatus-compatible: Current, InProgress, Failed.

Why it exists: readiness rules are declared where the children are composed (``builders``, which
may not import ``reconciler``), and the reconciler's ``Ready`` condition needs the same verdicts;
so the one health library lives here, pure, and ``reconciler._reconcile.readiness`` uses it.

:func:`health_of` follows the rules of kstatus (``sigs.k8s.io/cli-utils/pkg/kstatus``, which Flux
uses), in its order:

1. the generic rule, for every kind: a ``deletionTimestamp`` is Terminating; a
   ``status.observedGeneration`` that differs from ``metadata.generation`` is InProgress; a
   ``Reconciling`` condition True is InProgress and a ``Stalled`` condition True is Failed;
2. the rule of the built-in kind: Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, Pod,
   PersistentVolumeClaim, Service (LoadBalancer), CustomResourceDefinition (Established,
   NamesAccepted), PodDisruptionBudget;
3. for any other kind, a ``Ready`` condition (the Flux and cert-manager convention; kstatus reads
   only the two above): True is Current, False or Unknown is InProgress with its message;
4. otherwise Current (a ConfigMap, a Secret, a custom resource without conditions).

Boundary: a verdict on one object as given, with no I/O and no clock of its own (a Pod's
"unschedulable for 15 s" needs ``now``, passed by the caller). User rules (functions and
JSONPath expressions) are in ``builders._health_rules``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

__all__ = [
    "SCHEDULE_WINDOW",
    "Health",
    "HealthStatus",
    "health_of",
]

KubeObject = Mapping[str, Any]

SCHEDULE_WINDOW = 15.0
"""Seconds a Pod may stay unschedulable before it is Failed (kstatus' ``ScheduleWindow``)."""


class HealthStatus(enum.StrEnum):
    """kstatus' statuses: ``Current`` (as desired and working), ``InProgress`` (on its way),
    ``Failed`` (will not get there without a change), ``Terminating`` (being deleted)."""

    CURRENT = "Current"
    IN_PROGRESS = "InProgress"
    FAILED = "Failed"
    TERMINATING = "Terminating"


@attrs.frozen(kw_only=True)
class Health:
    """A verdict on one object: its ``status``, a short ``reason`` (CamelCase) and a ``message``
    people read."""

    status: HealthStatus = attrs.field(converter=HealthStatus)
    message: str = ""
    reason: str = ""

    @property
    def current(self) -> bool:
        """Whether the object is Current (ready)."""
        return self.status is HealthStatus.CURRENT

    @classmethod
    def ok(cls, message: str = "", reason: str = "") -> Health:
        """A Current verdict."""
        return cls(status=HealthStatus.CURRENT, message=message, reason=reason)

    @classmethod
    def in_progress(cls, message: str, reason: str = "") -> Health:
        """An InProgress verdict."""
        return cls(status=HealthStatus.IN_PROGRESS, message=message, reason=reason)

    @classmethod
    def failed(cls, message: str, reason: str = "") -> Health:
        """A Failed verdict."""
        return cls(status=HealthStatus.FAILED, message=message, reason=reason)


def _section(obj: KubeObject, key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _conditions(obj: KubeObject) -> list[Mapping[str, Any]]:
    found = _section(obj, "status").get("conditions")
    if not isinstance(found, Sequence) or isinstance(found, str):
        return []
    return [c for c in found if isinstance(c, Mapping)]


def _condition(obj: KubeObject, type_: str) -> Mapping[str, Any] | None:
    return next((c for c in _conditions(obj) if c.get("type") == type_), None)


def _is(obj: KubeObject, type_: str, status: str = "True") -> bool:
    return (_condition(obj, type_) or {}).get("status") == status


def _generic(obj: KubeObject) -> Health | None:
    meta = _section(obj, "metadata")
    if meta.get("deletionTimestamp"):
        return Health(status=HealthStatus.TERMINATING, message="being deleted",
                      reason="Terminating")
    generation = meta.get("generation")
    observed = _section(obj, "status").get("observedGeneration")
    if (isinstance(generation, int) and isinstance(observed, int)
            and observed != generation):
        return Health.in_progress(
            f"{obj.get('kind')} generation is {generation}, but latest observed generation "
            f"is {observed}", "LatestGenerationNotObserved")
    for cond in _conditions(obj):
        if cond.get("type") == "Reconciling" and cond.get("status") == "True":
            return Health.in_progress(str(cond.get("message") or "reconciling"),
                                      str(cond.get("reason") or "Reconciling"))
        if cond.get("type") == "Stalled" and cond.get("status") == "True":
            return Health.failed(str(cond.get("message") or "stalled"),
                                 str(cond.get("reason") or "Stalled"))
    return None


def _numbers(obj: KubeObject, section: str, **fields: int) -> dict[str, int]:
    values = _section(obj, section)
    return {name: _int(values.get(name), default) for name, default in fields.items()}


_NO_DEADLINE = 2**31 - 1


def _first_short(*steps: tuple[int, int, str, str]) -> Health | None:
    """The first step ``(need, have, what, reason)`` whose count falls short, as InProgress."""
    for need, have, what, reason in steps:
        if need > have:
            message = (f"pending termination: {have - need}" if reason == "ExtraPods"
                       else f"{what}: {have}/{need}")
            return Health.in_progress(message, reason)
    return None


def _extra(replicas: int, desired: int) -> tuple[int, int, str, str]:
    """More pods than desired (the negated counts make ``_first_short`` compare the other way)."""
    return -replicas, -desired, "", "ExtraPods"


def _deployment(obj: KubeObject, now: float | None) -> Health:
    spec = _section(obj, "spec")
    # Without a deadline the controller sets no Progressing condition (kstatus: MaxInt32).
    progressing = _int(spec.get("progressDeadlineSeconds"), _NO_DEADLINE) == _NO_DEADLINE
    progress = _condition(obj, "Progressing") or {}
    if progress.get("reason") == "ProgressDeadlineExceeded":
        return Health.failed("progress deadline exceeded", "ProgressDeadlineExceeded")
    if progress.get("status") == "True" and progress.get("reason") == "NewReplicaSetAvailable":
        progressing = True
    desired = _int(spec.get("replicas"), 1)
    n = _numbers(obj, "status", replicas=0, updatedReplicas=0, readyReplicas=0,
                 availableReplicas=0)
    short = _first_short(
        (desired, n["replicas"], "replicas", "LessReplicas"),
        (desired, n["updatedReplicas"], "updated", "LessUpdated"),
        _extra(n["replicas"], desired),
        (n["updatedReplicas"], n["availableReplicas"], "available", "LessAvailable"),
        (desired, n["readyReplicas"], "ready", "LessReady"))
    if short is not None:
        return short
    if not progressing:
        return Health.in_progress("ReplicaSet not available", "ReplicaSetNotAvailable")
    if not _is(obj, "Available"):
        return Health.in_progress("Deployment not Available", "DeploymentNotAvailable")
    return Health.ok(f"Deployment is available: {n['replicas']} replicas")


def _statefulset(obj: KubeObject, now: float | None) -> Health:
    spec = _section(obj, "spec")
    strategy = _section(spec, "updateStrategy")
    if strategy.get("type") == "OnDelete":
        return Health.ok("StatefulSet uses the OnDelete update strategy")
    desired = _int(spec.get("replicas"), 1)
    n = _numbers(obj, "status", replicas=0, readyReplicas=0, currentReplicas=0,
                 updatedReplicas=0)
    short = _first_short((desired, n["replicas"], "replicas", "LessReplicas"),
                         (desired, n["readyReplicas"], "ready", "LessReady"),
                         _extra(n["replicas"], desired))
    if short is not None:
        return short
    partition = _int(_section(strategy, "rollingUpdate").get("partition"), -1)
    if partition != -1:
        if n["updatedReplicas"] < desired - partition:
            return Health.in_progress(
                f"updated: {n['updatedReplicas']}/{desired - partition}", "PartitionRollout")
        return Health.ok(f"partition rollout complete: {n['updatedReplicas']} updated")
    if desired > n["currentReplicas"]:
        return Health.in_progress(f"current: {n['currentReplicas']}/{desired}", "LessCurrent")
    status = _section(obj, "status")
    if status.get("currentRevision", "") != status.get("updateRevision", ""):
        return Health.in_progress("waiting for the updated revision to match the current one",
                                  "RevisionMismatch")
    return Health.ok(f"all replicas scheduled as expected: {n['replicas']}")


def _daemonset(obj: KubeObject, now: float | None) -> Health:
    if not isinstance(_section(obj, "metadata").get("generation"), int):
        return Health.in_progress("DaemonSet metadata.generation not found", "NoGeneration")
    if not isinstance(_section(obj, "status").get("observedGeneration"), int):
        return Health.in_progress("DaemonSet status.observedGeneration not found",
                                  "NoObservedGeneration")
    n = _numbers(obj, "status", desiredNumberScheduled=-1, currentNumberScheduled=0,
                 updatedNumberScheduled=0, numberAvailable=0, numberReady=0)
    desired = n["desiredNumberScheduled"]
    if desired == -1:
        return Health.in_progress("missing status.desiredNumberScheduled", "NoDesiredNumber")
    short = _first_short(
        (desired, n["currentNumberScheduled"], "current", "LessCurrent"),
        (desired, n["updatedNumberScheduled"], "updated", "LessUpdated"),
        (desired, n["numberAvailable"], "available", "LessAvailable"),
        (desired, n["numberReady"], "ready", "LessReady"))
    if short is not None:
        return short
    return Health.ok(f"all pods scheduled as expected: {desired}")


def _replicaset(obj: KubeObject, now: float | None) -> Health:
    if _is(obj, "ReplicaFailure"):
        return Health.in_progress("replica failure: check the pods", "ReplicaFailure")
    desired = _int(_section(obj, "spec").get("replicas"), 1)
    n = _numbers(obj, "status", replicas=0, readyReplicas=0, availableReplicas=0,
                 fullyLabeledReplicas=0)
    short = _first_short((desired, n["fullyLabeledReplicas"], "labelled", "LessLabelled"),
                         (desired, n["availableReplicas"], "available", "LessAvailable"),
                         (desired, n["readyReplicas"], "ready", "LessReady"),
                         _extra(n["replicas"], desired))
    if short is not None:
        return short
    return Health.ok(f"ReplicaSet is available: {n['replicas']} replicas")


def _job(obj: KubeObject, now: float | None) -> Health:
    spec = _section(obj, "spec")
    parallelism = _int(spec.get("parallelism"), 1)
    completions = _int(spec.get("completions"), parallelism)
    n = _numbers(obj, "status", succeeded=0, active=0, failed=0)
    for cond in _conditions(obj):
        if cond.get("status") != "True":
            continue
        if cond.get("type") == "Complete":
            return Health.ok(f"Job completed: {n['succeeded']}/{completions} succeeded")
        if cond.get("type") == "Failed":
            return Health.failed(f"Job failed: {n['failed']}/{completions} failed"
                                 + (f" ({cond['reason']})" if cond.get("reason") else ""),
                                 "JobFailed")
        if cond.get("type") == "Suspended":
            return Health.ok("Job is suspended")
    if not _section(obj, "status").get("startTime"):
        return Health.in_progress("Job not started", "JobNotStarted")
    return Health.ok(f"Job in progress: {n['succeeded']} succeeded, {n['active']} active, "
                     f"{n['failed']} failed")


def _created(obj: KubeObject) -> float | None:
    stamp = _section(obj, "metadata").get("creationTimestamp")
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _pod(obj: KubeObject, now: float | None) -> Health:
    phase = _section(obj, "status").get("phase") or ""
    if phase == "Succeeded":
        return Health.ok("Pod has completed successfully")
    if phase == "Failed":
        return Health.ok("Pod has completed, but not successfully")
    if phase == "Running":
        if _is(obj, "Ready"):
            return Health.ok("Pod is Ready")
        looping = sorted(
            str(cs.get("name")) for cs in _section(obj, "status").get("containerStatuses") or ()
            if isinstance(cs, Mapping)
            and _section(_section(cs, "state"), "waiting").get("reason") == "CrashLoopBackOff")
        if looping:
            return Health.failed(f"containers in CrashLoopBackOff: {', '.join(looping)}",
                                 "ContainerCrashLooping")
        return Health.in_progress("Pod is running but is not Ready", "PodRunningNotReady")
    if phase == "Pending":
        scheduled = _condition(obj, "PodScheduled") or {}
        if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
            created = _created(obj)
            if now is None or created is None or now - created < SCHEDULE_WINDOW:
                return Health.in_progress("Pod has not been scheduled", "PodNotScheduled")
            return Health.failed("Pod could not be scheduled: "
                                 f"{scheduled.get('message') or 'Unschedulable'}",
                                 "PodUnschedulable")
        return Health.in_progress("Pod is in the Pending phase", "PodPending")
    if not phase:
        return Health.in_progress("Pod phase not available", "PodNotObserved")
    return Health.in_progress(f"Pod phase is {phase}", "PodUnknownPhase")


def _pvc(obj: KubeObject, now: float | None) -> Health:
    phase = _section(obj, "status").get("phase") or "unknown"
    if phase != "Bound":
        return Health.in_progress(f"PVC is not Bound: phase {phase}", "NotBound")
    return Health.ok("PVC is Bound")


def _service(obj: KubeObject, now: float | None) -> Health:
    spec = _section(obj, "spec")
    if spec.get("type") == "LoadBalancer" and not spec.get("clusterIP"):
        return Health.in_progress("ClusterIP not set: Service type LoadBalancer", "NoIPAssigned")
    return Health.ok("Service is ready")


def _crd(obj: KubeObject, now: float | None) -> Health:
    names = _condition(obj, "NamesAccepted")
    if names is not None and names.get("status") == "False":
        return Health.failed(str(names.get("message") or "names not accepted"),
                             str(names.get("reason") or "NamesNotAccepted"))
    established = _condition(obj, "Established")
    if established is not None:
        reason = str(established.get("reason") or "")
        if established.get("status") == "False" and reason != "Installing":
            return Health.failed(str(established.get("message") or "not established"),
                                 reason or "NotEstablished")
        if established.get("status") == "True":
            return Health.ok("CRD is established")
    return Health.in_progress("install in progress: not established", "Installing")


def _pdb(obj: KubeObject, now: float | None) -> Health:
    return Health.ok("AllowedDisruptions has been computed")


def _always(obj: KubeObject, now: float | None) -> Health:
    return Health.ok("always ready")


_KIND_RULES: Mapping[str, Callable[[KubeObject, float | None], Health]] = {
    "Service": _service,
    "Pod": _pod,
    "Secret": _always,
    "ConfigMap": _always,
    "PersistentVolumeClaim": _pvc,
    "apps/StatefulSet": _statefulset,
    "apps/DaemonSet": _daemonset,
    "extensions/DaemonSet": _daemonset,
    "apps/Deployment": _deployment,
    "extensions/Deployment": _deployment,
    "apps/ReplicaSet": _replicaset,
    "extensions/ReplicaSet": _replicaset,
    "policy/PodDisruptionBudget": _pdb,
    "batch/CronJob": _always,
    "batch/Job": _job,
    "apiextensions.k8s.io/CustomResourceDefinition": _crd,
}


def _group_kind(obj: KubeObject) -> str:
    api_version = str(obj.get("apiVersion") or "")
    group = api_version.rpartition("/")[0]
    kind = str(obj.get("kind") or "")
    return f"{group}/{kind}" if group else kind


def _ready_condition(obj: KubeObject) -> Health | None:
    ready = _condition(obj, "Ready")
    if ready is None:
        return None
    if ready.get("status") == "True":
        return Health.ok(str(ready.get("message") or "Ready"), str(ready.get("reason") or ""))
    return Health.in_progress(str(ready.get("message") or "not Ready"),
                              str(ready.get("reason") or "NotReady"))


def health_of(obj: KubeObject, *, now: float | None = None) -> Health:
    """The kstatus verdict on ``obj`` (a JSON-shaped dict as the API server returns it).

    ``now`` (seconds since the epoch) lets a Pod unschedulable for longer than
    :data:`SCHEDULE_WINDOW` be Failed; without it such a Pod stays InProgress. Never raises
    for a malformed status: missing or mistyped fields read as absent.
    """
    generic = _generic(obj)
    if generic is not None:
        return generic
    rule = _KIND_RULES.get(_group_kind(obj))
    if rule is not None:
        return rule(obj, now)
    return _ready_condition(obj) or Health.ok("resource is current")
