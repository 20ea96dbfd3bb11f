"""Which watch events call for a reconcile: parent rules, child rules, restart rules."""

from __future__ import annotations

from typing import Any

from reconciler._base.times import format_time as rfc3339
from reconciler._driver.triggers import (
    REQUESTED_AT_ANNOTATION,
    child_event_triggers,
    parent_event_triggers,
    parent_needs_reconcile,
)


def _thing(*, generation: int = 1, observed: int | None = 1, last: float | None = 1000.0,
           annotations: dict[str, str] | None = None, deleting: bool = False,
           status_extra: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": "u1", "generation": generation,
                            "resourceVersion": "10", "annotations": dict(annotations or {})}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    status: dict[str, Any] = dict(status_extra or {})
    if observed is not None:
        status["observedGeneration"] = observed
    if last is not None:
        status["lastReconcileTime"] = rfc3339(last)
    return {"apiVersion": "example.dev/v1", "kind": "Thing", "metadata": meta, "status": status}


def test_parent_generation_change_deletion_and_manual_trigger_pass() -> None:
    base = _thing()
    assert parent_event_triggers("MODIFIED", _thing(generation=2), old=base)
    assert parent_event_triggers("MODIFIED", _thing(deleting=True), old=base)
    assert parent_event_triggers("DELETED", base, old=base)
    assert parent_event_triggers("ADDED", base, old=None)
    requested = _thing(annotations={REQUESTED_AT_ANNOTATION: "2024-05-01T00:00:00Z"})
    assert parent_event_triggers("MODIFIED", requested, old=base)


def test_parent_status_only_changes_do_not_pass_but_annotations_do() -> None:
    base = _thing()
    assert not parent_event_triggers("MODIFIED", _thing(status_extra={"ready": True}), old=base)
    assert parent_event_triggers("MODIFIED", _thing(annotations={"note": "x"}), old=base)


def test_a_labelled_child_edit_passes_even_without_a_generation() -> None:
    old = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "c", "resourceVersion": "1", "labels": {"a": "b"}},
           "data": {"k": "v"}}
    edited = {**old, "metadata": {**old["metadata"], "resourceVersion": "2"}, "data": {"k": "x"}}
    relabelled = {**old, "metadata": {**old["metadata"], "resourceVersion": "3", "labels": {}}}
    assert child_event_triggers("MODIFIED", edited, old=old)
    assert child_event_triggers("MODIFIED", relabelled, old=old)
    assert child_event_triggers("DELETED", old, old=old)


def test_a_child_status_only_change_does_not_pass() -> None:
    old = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "d", "resourceVersion": "1"}, "spec": {"replicas": 1},
           "status": {"readyReplicas": 0}}
    new = {**old, "metadata": {"name": "d", "resourceVersion": "2"},
           "status": {"readyReplicas": 1}}
    assert not child_event_triggers("MODIFIED", new, old=old)


def test_at_start_a_parent_is_reconciled_only_when_it_needs_it() -> None:
    assert not parent_needs_reconcile(_thing())
    assert parent_needs_reconcile(_thing(last=None))
    assert parent_needs_reconcile(_thing(generation=3, observed=2))
    assert parent_needs_reconcile(_thing(deleting=True))
    later = rfc3339(2000.0)
    earlier = rfc3339(500.0)
    assert parent_needs_reconcile(_thing(annotations={REQUESTED_AT_ANNOTATION: later}))
    assert not parent_needs_reconcile(_thing(annotations={REQUESTED_AT_ANNOTATION: earlier}))


def test_at_start_a_parent_left_contested_is_looked_at_again() -> None:
    """The held repair and the quiet-window check of a contested child are timers of the
    runtime that set ``Contested``; a restart loses them, so a parent whose status still says
    ``Contested=True`` is reconciled at first sight, not left claiming contention until the
    periodic resync (found by tests/reliability/test_state_machine.py: a forced resync wrote
    ``Contested=False``)."""
    def contested(status: str) -> dict[str, Any]:
        return _thing(status_extra={"conditions": [
            {"type": "Reconciled", "status": "True", "reason": "ReconcileSucceeded"},
            {"type": "Contested", "status": status, "reason": "FieldContested"}]})
    assert parent_needs_reconcile(contested("True"))
    assert not parent_needs_reconcile(contested("False"))


def test_a_spec_change_passes_even_for_a_parent_kind_without_generation() -> None:
    old = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p"}, "data": {"a": "1"}}
    new = {**old, "data": {"a": "2"}}
    assert parent_event_triggers("MODIFIED", new, old=old)
