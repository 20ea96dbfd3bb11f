"""Status beyond ``Reconciled``: readiness from the children's health, and a user status builder.

``Reconciled`` says the children match the spec; users read ``Ready`` as "it works". With
``Reporting(readiness=Readiness())`` the ``Ready`` condition comes from the live children's health
(``builders.health.health_of``, kstatus' rules: per built-in kind, and for any other kind its
``Ready``/``Reconciling``/``Stalled`` conditions and ``observedGeneration``; a ConfigMap is ready
when present), with a check per kind given by the operator (a ``builders.health.HealthRule``).
``Reporting(status=fn)`` merges ``fn(parent, observed_children)`` (a pure
function returning a dict) into the parent's status. ``readiness_status_patch`` decides, as
``reconciler._reconcile.conditions.status_patch`` does for the two base conditions, whether the
status needs writing and what to write. Pure: ``reconciler._reconcile.parents`` sends what it
returns, and asks for a re-check after ``Readiness.recheck`` seconds while a child is not ready (a
child's status change is not an event that reconciles its parent).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import attrs

from builders.health import Health, HealthRule, HealthStatus, as_health, health_of
from reconciler._base.errors import (
    PermanentError,
    ReconcilerUsageError,
    ReconcilerUsageTypeError,
)
from reconciler._base.text import bounded
from reconciler._base.times import format_time, parse_time
from reconciler._reconcile.conditions import (
    ChildError,
    merge_conditions,
    parent_conditions,
    pending_children,
    with_progress,
)
from reconciler._reconcile.custom_conditions import checked_conditions
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
HealthCheck = HealthRule
"""A child's health (``builders.health.HealthRule``): a ``Health``, ``True``/``None`` when ready,
``False`` or a short reason when not."""
StatusBuilder = Callable[[KubeObject, Sequence[KubeObject]], Mapping[str, Any]]
"""``status(parent, observed_children) -> dict`` merged into the parent's status (pure)."""

_RESERVED = frozenset({"observedGeneration", "lastReconcileTime"})


DEFAULT_HEALTH_CHECKS: Mapping[str, HealthCheck] = {
    kind: health_of for kind in (
        "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "Pod",
        "PersistentVolumeClaim", "Service", "CustomResourceDefinition", "PodDisruptionBudget",
    )
}
"""The built-in checks by kind: ``builders.health.health_of`` (kstatus' rules for the kind); any
other kind gets kstatus' generic rule (``observedGeneration``, ``Reconciling``, ``Stalled``,
``Ready`` conditions), so a ConfigMap or a custom resource without conditions is ready when
present."""


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
            found = DEFAULT_HEALTH_CHECKS.get(kind, health_of)
        return found


def child_verdict(obj: KubeObject, readiness: Readiness, *, now: float | None = None) -> Health:
    """The health of one live child under ``readiness`` (Current when no check applies)."""
    check = readiness.check_for(str(obj.get("apiVersion")), str(obj.get("kind")))
    if check is None:
        return Health.ok()
    if check is health_of:
        return health_of(obj, now=now)
    return as_health(check(obj))


def child_health(obj: KubeObject, readiness: Readiness, *, now: float | None = None) -> str | None:
    """Why ``obj`` is not ready, or None when it is."""
    verdict = child_verdict(obj, readiness, now=now)
    return None if verdict.current else verdict.message or str(verdict.status)


def observed_children(results: Sequence[ReconcileResult]) -> list[KubeObject]:
    """The live children after a reconcile (deleted and absent ones left out)."""
    return [r.live for r in results
            if r.live is not None and r.action is not Action.DELETED]


def _health_ready(
    base: dict[str, Any], observed: Sequence[KubeObject], readiness: Readiness, now: float
) -> dict[str, Any]:
    verdicts = [(o, child_verdict(o, readiness, now=now)) for o in observed]
    unhealthy = [(o, v) for o, v in verdicts if not v.current]
    if not unhealthy:
        return {**base, "reason": "ChildrenReady",
                "message": f"all {len(observed)} children ready"}
    listed = "; ".join(f"{o.get('kind')} {(o.get('metadata') or {}).get('name')}: "
                       f"{v.message or v.status}" for o, v in unhealthy)
    failed = any(v.status is HealthStatus.FAILED for _, v in unhealthy)
    return {**base, "status": "False",
            "reason": "ChildrenUnhealthy" if failed else "ChildrenNotReady",
            "message": bounded(f"{len(unhealthy)} of {len(observed)} children not ready: "
                                       f"{listed}")}


def custom_status(
    builder: StatusBuilder, parent: KubeObject, observed: Sequence[KubeObject], *,
    condition_types: Collection[str] = (),
) -> dict[str, Any]:
    """The status builder's fields, checked: a mapping without the toolkit's own fields; its
    ``conditions``, if any, of types of its own (``custom_conditions.checked_conditions``)."""
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
    found = dict(value)
    if "conditions" in found:
        meta = parent.get("metadata")
        found["conditions"] = checked_conditions(
            found["conditions"], declared=condition_types,
            generation=meta.get("generation") if isinstance(meta, Mapping) else None)
    return found


def _stalled_by(wanted: list[dict[str, Any]], error: Exception) -> list[dict[str, Any]]:
    """``Ready`` False for a status function's permanent error (the reason is its own)."""
    reason = error.reason if isinstance(error, PermanentError) else "InvalidStatus"
    message = bounded(f"status function: {error}")
    return [{**c, "status": "False", "reason": reason, "message": message}
            if c["type"] == "Ready" else c for c in wanted]


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
                              watches=(Watch(ref=result.ref, rule=check,
                                             seen_version=_version(obj)),)))
    return waits


def _version(obj: Mapping[str, Any]) -> str | None:
    version = (obj.get("metadata") or {}).get("resourceVersion")
    return str(version) if version else None


def not_ready(status: Mapping[str, Any] | None) -> bool:
    """Whether a status patch says some child is not ready (the parent is re-checked)."""
    for cond in (status or {}).get("conditions") or ():
        if cond.get("type") == "Ready" and cond.get("reason") in (
                "ChildrenNotReady", "ChildrenUnhealthy"):
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
    condition_types: Collection[str] = (),
    waiting: Sequence[Wait] = (),
    waiting_live: Sequence[KubeObject] = (),
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """``(patch or None, the status as wanted)``: ``status_patch`` with ``Ready`` from the
    children's health (when ``readiness`` is given) and the status builder's fields merged in,
    its conditions beside ours. The status builder observes the waiting children that exist
    (``waiting_live``) as well as those reconciled. A status builder that raises
    ``PermanentError``, or returns what the toolkit refuses (``ReconcilerUsageError``), stalls
    the parent: ``Ready`` False, ``Stalled`` True, with the message; its fields are left as
    they were."""
    meta = parent.get("metadata")
    generation = meta.get("generation") if isinstance(meta, Mapping) else None
    wanted = parent_conditions(generation=generation, errors=errors,
                               pending=pending_children(results), children=children,
                               waiting=waiting)
    observed = observed_children(results)
    if readiness is not None:
        wanted = [_health_ready(c, observed, readiness, now)
                  if c["type"] == "Ready" and c["status"] == "True" else c for c in wanted]
    extra: dict[str, Any] = {}
    permanent = bool(errors) and all(e.permanent for e in errors)
    if status is not None:
        try:
            extra = custom_status(status, parent, [*observed, *waiting_live],
                                  condition_types=condition_types)
        except (PermanentError, ReconcilerUsageError) as exc:
            wanted, permanent = _stalled_by(wanted, exc), True
    wanted = with_progress(wanted, generation=generation, permanent=permanent)
    theirs = extra.pop("conditions", [])
    current = parent.get("status")
    current = current if isinstance(current, Mapping) else {}
    conditions, changed = merge_conditions(current.get("conditions"), [*wanted, *theirs],
                                           format_time(now))
    changed = changed or any(current.get(k) != v for k, v in extra.items())
    last = parse_time(current.get("lastReconcileTime"))
    stale = last is None or (refresh is not None and now - last >= refresh)
    full = {**extra, "observedGeneration": generation, "lastReconcileTime": format_time(now),
            "conditions": conditions}
    if not changed and current.get("observedGeneration") == generation and not stale:
        return None, full
    return {"status": full}, full
