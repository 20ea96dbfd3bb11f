"""Status beyond ``Reconciled``: readiness from the children's health, and a user status builder.

``Reconciled`` says the children match the spec; users read ``Ready`` as "it works". With
``Operator(readiness=Readiness())`` the ``Ready`` condition comes from the live children's health
(``DEFAULT_HEALTH_CHECKS``: a Deployment's available replicas reach the desired count for its
current generation, a StatefulSet's ready replicas, a DaemonSet's ready pods, a Job completes;
every other kind, such as Service and ConfigMap, is ready when present), with a check per kind
given by the operator. ``Operator(status=fn)`` merges ``fn(parent, observed_children)`` (a pure
function returning a dict) into the parent's status. ``readiness_status_patch`` decides, as
``reconciler._reconcile.conditions.status_patch`` does for the two base conditions, whether the
status needs writing and what to write. Pure: ``reconciler._reconcile.parents`` sends what it
returns, and asks for a re-check after ``Readiness.recheck`` seconds while a child is not ready (a
child's status change is not an event that reconciles its parent).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from reconciler._base.errors import ReconcilerUsageError, ReconcilerUsageTypeError
from reconciler._base.times import format_time, parse_time
from reconciler._reconcile.conditions import (
    ChildError,
    merge_conditions,
    parent_conditions,
    pending_children,
)
from reconciler._reconcile.reconciling import Action, ReconcileResult
from reconciler._reconcile.waits import Wait, Watch

__all__ = [
    "DEFAULT_HEALTH_CHECKS",
    "HealthCheck",
    "Readiness",
    "StatusBuilder",
    "child_health",
    "readiness_status_patch",
]

KubeObject = Mapping[str, Any]
HealthCheck = Callable[[KubeObject], "bool | str | None"]
"""A child's health: ``True``/``None`` when ready, ``False`` or a short reason when not."""
StatusBuilder = Callable[[KubeObject, Sequence[KubeObject]], Mapping[str, Any]]
"""``status(parent, observed_children) -> dict`` merged into the parent's status (pure)."""

_RESERVED = frozenset({"conditions", "observedGeneration", "lastReconcileTime"})
_MAX_MESSAGE = 4096


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _rolled_out(obj: KubeObject) -> str | None:
    generation = _int((obj.get("metadata") or {}).get("generation"))
    observed = _int((obj.get("status") or {}).get("observedGeneration"))
    return None if observed >= generation else f"generation {generation} not yet observed"


def deployment_health(obj: KubeObject) -> str | None:
    """Ready when ``status.availableReplicas`` reaches ``spec.replicas`` (default 1)."""
    desired = _int((obj.get("spec") or {}).get("replicas"), 1)
    available = _int((obj.get("status") or {}).get("availableReplicas"))
    if (not_rolled := _rolled_out(obj)) is not None:
        return not_rolled
    return None if available >= desired else f"{available}/{desired} replicas available"


def statefulset_health(obj: KubeObject) -> str | None:
    """Ready when ``status.readyReplicas`` reaches ``spec.replicas`` (default 1)."""
    desired = _int((obj.get("spec") or {}).get("replicas"), 1)
    ready = _int((obj.get("status") or {}).get("readyReplicas"))
    if (not_rolled := _rolled_out(obj)) is not None:
        return not_rolled
    return None if ready >= desired else f"{ready}/{desired} replicas ready"


def daemonset_health(obj: KubeObject) -> str | None:
    """Ready when every scheduled pod is ready."""
    status = obj.get("status") or {}
    desired, ready = _int(status.get("desiredNumberScheduled")), _int(status.get("numberReady"))
    if (not_rolled := _rolled_out(obj)) is not None:
        return not_rolled
    return None if ready >= desired else f"{ready}/{desired} pods ready"


def job_health(obj: KubeObject) -> str | None:
    """Ready when the Job's ``Complete`` condition is true; ``Failed`` says it failed."""
    conditions = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or ()
                  if isinstance(c, Mapping)}
    if (conditions.get("Complete") or {}).get("status") == "True":
        return None
    failed = conditions.get("Failed") or {}
    if failed.get("status") == "True":
        return f"failed: {failed.get('reason') or failed.get('message') or 'Failed'}"
    return "not complete"


DEFAULT_HEALTH_CHECKS: Mapping[str, HealthCheck] = {
    "Deployment": deployment_health,
    "StatefulSet": statefulset_health,
    "DaemonSet": daemonset_health,
    "Job": job_health,
}
"""The built-in checks by kind; any other kind (Service, ConfigMap, ...) is ready when present."""


def _checks(value: Mapping[Any, HealthCheck]) -> Mapping[Any, HealthCheck]:
    for key, check in value.items():
        if not callable(check):
            raise ReconcilerUsageTypeError(f"readiness check for {key!r} must be callable")
    return dict(value)


@attrs.frozen(kw_only=True)
class Readiness:
    """How ``Ready`` is decided from the children's health.

    ``checks`` maps a kind (``"Deployment"``) or an ``(apiVersion, kind)`` pair to a
    ``HealthCheck``; they override ``DEFAULT_HEALTH_CHECKS`` (``defaults=False`` drops those).
    While a child is not ready the parent is reconciled again every ``recheck`` seconds (from the
    caches: no request unless something changed).
    """

    checks: Mapping[Any, HealthCheck] = attrs.field(factory=dict, converter=_checks)
    defaults: bool = True
    recheck: float = 5.0

    def check_for(self, api_version: str, kind: str) -> HealthCheck | None:
        """The check for one child type, or None (ready when present)."""
        found = self.checks.get((api_version, kind)) or self.checks.get(kind)
        if found is None and self.defaults:
            found = DEFAULT_HEALTH_CHECKS.get(kind)
        return found


def child_health(obj: KubeObject, readiness: Readiness) -> str | None:
    """Why ``obj`` is not ready, or None when it is."""
    check = readiness.check_for(str(obj.get("apiVersion")), str(obj.get("kind")))
    if check is None:
        return None
    verdict = check(obj)
    if verdict is None or verdict is True:
        return None
    return "not ready" if verdict is False else str(verdict)


def observed_children(results: Sequence[ReconcileResult]) -> list[KubeObject]:
    """The live children after a reconcile (deleted and absent ones left out)."""
    return [r.live for r in results
            if r.live is not None and r.action is not Action.DELETED]


def _health_ready(
    base: dict[str, Any], observed: Sequence[KubeObject], readiness: Readiness
) -> dict[str, Any]:
    unhealthy = [(o, why) for o in observed if (why := child_health(o, readiness)) is not None]
    if not unhealthy:
        return {**base, "reason": "ChildrenReady",
                "message": f"all {len(observed)} children ready"}
    listed = "; ".join(f"{o.get('kind')} {(o.get('metadata') or {}).get('name')}: {why}"
                       for o, why in unhealthy)
    return {**base, "status": "False", "reason": "ChildrenNotReady",
            "message": f"{len(unhealthy)} of {len(observed)} children not ready: "
                       f"{listed}"[:_MAX_MESSAGE]}


def custom_status(
    builder: StatusBuilder, parent: KubeObject, observed: Sequence[KubeObject]
) -> dict[str, Any]:
    """The status builder's fields, checked: a mapping without the toolkit's own fields."""
    value = builder(parent, observed)
    if not isinstance(value, Mapping):
        raise ReconcilerUsageTypeError(
            f"status builder returned {type(value).__name__}, not a dict"
        )
    clash = sorted(_RESERVED & set(value))
    if clash:
        raise ReconcilerUsageError(
            f"status builder must not set {', '.join(clash)} (the toolkit's own)"
        )
    return dict(value)


def health_waits(results: Sequence[ReconcileResult], readiness: Readiness) -> list[Wait]:
    """A :class:`Wait` on every live child whose kind has a health check: ``Ready`` reads its
    verdict, so the driver wakes the parent when that verdict changes, either way
    (``reconciler._reconcile.waits``); a status change that keeps the verdict wakes no one."""
    waits = []
    for result in results:
        obj = result.live
        if obj is None or result.action is Action.DELETED:
            continue
        check = readiness.check_for(str(obj.get("apiVersion")), str(obj.get("kind")))
        if check is not None:
            waits.append(Wait(ref=result.ref, reason="ChildHealth",
                              message=child_health(obj, readiness) or "ready",
                              watches=(Watch(ref=result.ref, rule=check),)))
    return waits


def not_ready(status: Mapping[str, Any] | None) -> bool:
    """Whether a status patch says some child is not ready (the parent is re-checked)."""
    for cond in (status or {}).get("conditions") or ():
        if cond.get("type") == "Ready" and cond.get("reason") == "ChildrenNotReady":
            return True
    return False


def readiness_status_patch(
    *,
    parent: KubeObject,
    results: Sequence[ReconcileResult],
    errors: Sequence[ChildError],
    children: int,
    now: float,
    readiness: Readiness | None,
    status: StatusBuilder | None,
    refresh: float | None = None,
    waiting: Sequence[Wait] = (),
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """``(patch or None, the status as wanted)``: ``status_patch`` with ``Ready`` from the
    children's health (when ``readiness`` is given) and the status builder's fields merged in."""
    meta = parent.get("metadata")
    generation = meta.get("generation") if isinstance(meta, Mapping) else None
    wanted = parent_conditions(generation=generation, errors=errors,
                               pending=pending_children(results), children=children,
                               waiting=waiting)
    observed = observed_children(results)
    if readiness is not None:
        wanted = [_health_ready(c, observed, readiness)
                  if c["type"] == "Ready" and c["status"] == "True" else c for c in wanted]
    extra = custom_status(status, parent, observed) if status is not None else {}
    current = parent.get("status")
    current = current if isinstance(current, Mapping) else {}
    conditions, changed = merge_conditions(current.get("conditions"), wanted, format_time(now))
    changed = changed or any(current.get(k) != v for k, v in extra.items())
    last = parse_time(current.get("lastReconcileTime"))
    stale = last is None or (refresh is not None and now - last >= refresh)
    full = {**extra, "observedGeneration": generation, "lastReconcileTime": format_time(now),
            "conditions": conditions}
    if not changed and current.get("observedGeneration") == generation and not stale:
        return None, full
    return {"status": full}, full
