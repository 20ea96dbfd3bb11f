"""What a parent's status and Events say when people or another writer stepped in: pure.

Why it exists: a paused parent, children whose drift is reported instead of repaired (a policy
``observe``, ``Policies(drift="warn")``) and contested children (``contention``) must show on
the parent where ``kubectl`` and kstatus read: conditions, and one aggregated Event when one of
them appears or changes. The usual ``Reconciled``/``Ready`` conditions stay
``reconciler._reconcile.conditions``'; this module adds its own condition types to whatever
status patch those produced (:func:`with_interventions`), and builds the pause's status patch
(:func:`paused_status_patch`). No I/O: ``reconciler._reconcile.parents`` sends the results.

The conditions: ``Reconciled=False`` reason ``ReconcilePaused`` while paused (as Crossplane's
``Synced=False/ReconcilePaused``; ``observedGeneration`` is left as it was, so kstatus reads a
spec changed while paused as not current); ``Drifted`` (``DriftDetected``, naming each child
and its field paths; ``False``/``NoDrift`` once a parent that had drift has none);
``Contested`` (``FieldContested``, naming the fields and the other manager; ``False``/
``NotContested`` once it ends). Messages name fields, never values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconciler._base.text import bounded
from reconciler._base.times import format_time
from reconciler._reconcile.conditions import ParentEvent, merge_conditions
from reconciler._reconcile.contention import Contest
from reconciler._reconcile.reconciling import ReconcileResult

__all__ = [
    "drift_message",
    "intervention_conditions",
    "intervention_events",
    "paused_status_patch",
    "with_interventions",
]

_TYPES = ("Drifted", "Contested")


def _status(parent: Mapping[str, Any]) -> Mapping[str, Any]:
    status = parent.get("status")
    return status if isinstance(status, Mapping) else {}


def _existing(parent: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(c.get("type")): c for c in _status(parent).get("conditions") or ()
            if isinstance(c, Mapping)}


def paused_status_patch(parent: Mapping[str, Any], *, reason: str,
                        now: float) -> dict[str, Any] | None:
    """The status patch that says ``parent`` is paused, or None when it says so already."""
    before = _existing(parent).get("Reconciled") or {}
    generation = before.get("observedGeneration")
    wanted = [{"type": "Reconciled", "status": "False", "reason": "ReconcilePaused",
               "message": bounded(f"paused: {reason}; no child is written until it is lifted"),
               "observedGeneration": generation}]
    conditions, changed = merge_conditions(_status(parent).get("conditions"), wanted,
                                           format_time(now))
    return {"status": {"conditions": conditions}} if changed else None


def drift_message(results: Sequence[ReconcileResult]) -> str:
    """``Kind ns/name: /spec/replicas, /data/x; ...`` for the results that report drift."""
    parts = [f"{r.ref}: {', '.join(p or '(missing)' for p in r.drift)}"
             for r in results if r.drift and not r.held.startswith("contested")]
    return "; ".join(parts)


def intervention_conditions(parent: Mapping[str, Any], results: Sequence[ReconcileResult],
                            contests: Sequence[Contest]) -> list[dict[str, Any]]:
    """The ``Drifted`` and ``Contested`` conditions one reconcile wants (without transition
    times): ``True`` when there is something to say, ``False`` only where one was set before."""
    generation = (parent.get("metadata") or {}).get("generation")
    existing = _existing(parent)
    wanted = []
    drift = drift_message(results)
    contest = "; ".join(c.describe() for c in contests)
    for type_, text, yes, no in (("Drifted", drift, "DriftDetected", "NoDrift"),
                                 ("Contested", contest, "FieldContested", "NotContested")):
        if text:
            wanted.append({"type": type_, "status": "True", "reason": yes,
                           "message": bounded(text), "observedGeneration": generation})
        elif existing.get(type_, {}).get("status") == "True":
            wanted.append({"type": type_, "status": "False", "reason": no, "message": "",
                           "observedGeneration": generation})
    return wanted


def with_interventions(parent: Mapping[str, Any], patch: dict[str, Any] | None,
                       wanted: Sequence[Mapping[str, Any]], *,
                       now: float) -> dict[str, Any] | None:
    """``patch`` (the usual status patch, or None) with the ``wanted`` conditions merged in;
    None when neither changes anything. A ``Contested`` backoff count alone is no change."""
    if not wanted:
        return patch
    status = dict(patch["status"]) if patch is not None else {}
    base = status.get("conditions", _status(parent).get("conditions"))
    existing = _existing(parent)
    if patch is None and all(_same(existing.get(str(c["type"])), c) for c in wanted):
        return None
    conditions, changed = merge_conditions(base, wanted, format_time(now))
    if patch is None and not changed:
        return None
    status["conditions"] = conditions
    return {**(patch or {}), "status": status}


def _same(before: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> bool:
    if before is None:
        return False
    keys = ("status", "reason") if wanted["type"] == "Contested" else (
        "status", "reason", "message")
    return all(before.get(k) == wanted.get(k) for k in keys)


def intervention_events(parent: Mapping[str, Any],
                        wanted: Sequence[Mapping[str, Any]]) -> list[ParentEvent]:
    """One Warning per condition that turns true or names other children or fields."""
    existing = _existing(parent)
    events = []
    for condition in wanted:
        before = existing.get(str(condition["type"])) or {}
        if condition["status"] != "True":
            continue
        if before.get("status") == "True" and (
                condition["type"] == "Contested" or before.get("message") == condition["message"]):
            continue
        events.append(ParentEvent(reason=str(condition["reason"]), type="Warning",
                                  message=str(condition["message"])))
    return events
