"""The periodic resync policy and schedule: intervals, bounds, offsets, restarts, resets."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler._events import rfc3339
from reconciler._resyncs import (
    DEFAULT_RESYNC_INTERVAL,
    RESYNC_ANNOTATION,
    ResyncPolicy,
    ResyncSchedule,
    last_reconcile_time,
    parse_duration,
)

HOUR = 3600.0


def _parent(
    uid: str, *, last: float | None = None, annotation: str | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"p-{uid}", "namespace": "ns", "uid": uid}
    if annotation is not None:
        meta["annotations"] = {RESYNC_ANNOTATION: annotation}
    parent: dict[str, Any] = {"apiVersion": "example.dev/v1", "kind": "Thing", "metadata": meta}
    if last is not None:
        parent["status"] = {"lastReconcileTime": rfc3339(last)}
    return parent


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10h", 36000), ("1h30m", 5400), ("90s", 90), ("250ms", 0.25), ("3600", 3600), ("1d", 86400)],
)
def test_durations_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "ten hours", "10x", "-5", "0", "h", "10h junk"])
def test_bad_durations_are_refused_naming_the_text(text: str) -> None:
    with pytest.raises(ValueError, match=r"duration|positive"):
        parse_duration(text)


def test_the_default_interval_is_ten_hours() -> None:
    assert ResyncPolicy().interval == DEFAULT_RESYNC_INTERVAL == 10 * HOUR


def test_environment_then_configmap_override_the_code_default() -> None:
    policy = ResyncPolicy(interval=2 * HOUR)
    from_env = policy.with_environment({"OPTK_RESYNC_INTERVAL": "30m"})
    assert from_env.interval == 1800
    assert from_env.with_environment({}).interval == 1800
    configmap = {"metadata": {"name": "cfg", "namespace": "ops"}, "data": {"resyncInterval": "5h"}}
    assert from_env.with_configmap(configmap).interval == 5 * HOUR
    assert from_env.with_configmap({"data": {}}).interval == 1800


def test_a_bad_configmap_value_names_the_configmap() -> None:
    configmap = {"metadata": {"name": "cfg", "namespace": "ops"}, "data": {"resyncInterval": "x"}}
    with pytest.raises(ValueError, match="ConfigMap ops/cfg"):
        ResyncPolicy().with_configmap(configmap)


def test_per_parent_annotation_is_clamped_into_the_bounds() -> None:
    policy = ResyncPolicy(min_interval=600, max_interval=24 * HOUR)
    assert policy.interval_for(_parent("a", annotation="1h")) == HOUR
    assert policy.interval_for(_parent("a", annotation="1s")) == 600
    assert policy.interval_for(_parent("a", annotation="30d")) == 24 * HOUR
    assert policy.interval_for(_parent("a", annotation="garbage")) == policy.interval


def test_policy_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="outside its bounds"):
        ResyncPolicy(interval=10, min_interval=60)


@given(uid=st.text(min_size=1, max_size=40), last=st.floats(0, 2e9))
def test_a_parent_is_due_within_its_interval_never_later(uid: str, last: float) -> None:
    policy = ResyncPolicy()
    due = policy.due_time(_parent(uid), last)
    assert last + 0.9 * policy.interval - 1e-3 <= due <= last + policy.interval
    assert policy.due_time(_parent(uid), last) == due  # stable


def test_offsets_spread_parents_reconciled_together() -> None:
    policy = ResyncPolicy()
    dues = {policy.due_time(_parent(str(i)), 0.0) for i in range(200)}
    assert len(dues) == 200
    assert max(dues) - min(dues) > 0.8 * policy.spread * policy.interval


def test_last_reconcile_time_is_read_from_status() -> None:
    assert last_reconcile_time(_parent("a", last=1_700_000_000)) == 1_700_000_000
    assert last_reconcile_time(_parent("a")) is None
    assert last_reconcile_time({"status": {"lastReconcileTime": "yesterday"}}) is None


def test_after_a_restart_due_parents_are_due_at_once_and_others_keep_their_schedule() -> None:
    now = 1_700_000_000.0
    schedule = ResyncSchedule(ResyncPolicy())
    never = _parent("never")
    overdue = _parent("overdue", last=now - 11 * HOUR)
    recent = _parent("recent", last=now - 1 * HOUR)
    assert schedule.observe("never", never, now=now) == now
    assert schedule.observe("overdue", overdue, now=now) <= now
    recent_due = schedule.observe("recent", recent, now=now)
    assert now + 8 * HOUR <= recent_due <= now + 9 * HOUR
    assert sorted(map(str, schedule.pop_due(now))) == ["overdue"]
    assert schedule.pop_due(now + 8 * HOUR) == []
    assert schedule.pop_due(recent_due) == ["recent"]


def test_a_reconcile_resets_the_timer() -> None:
    schedule = ResyncSchedule(ResyncPolicy())
    parent = _parent("a")
    first = schedule.reconciled("a", parent, at=0.0)
    second = schedule.reconciled("a", parent, at=5 * HOUR)
    assert second == first + 5 * HOUR
    assert schedule.pop_due(first) == []
    assert schedule.next_due() == second
    assert schedule.pop_due(second) == ["a"]
    assert len(schedule) == 0


def test_a_suspended_parent_leaves_the_timer_until_its_next_reconcile() -> None:
    schedule = ResyncSchedule(ResyncPolicy())
    schedule.reconciled("a", _parent("a"), at=0.0)
    schedule.suspend("a")
    assert schedule.due_at("a") is None
    assert schedule.pop_due(100 * HOUR) == []


def test_a_new_policy_reschedules_every_parent() -> None:
    schedule = ResyncSchedule(ResyncPolicy())
    schedule.reconciled("a", _parent("a"), at=0.0)
    schedule.set_policy(ResyncPolicy(interval=HOUR))
    due = schedule.due_at("a")
    assert due is not None
    assert 0.9 * HOUR <= due <= HOUR
    assert schedule.pop_due(HOUR) == ["a"]


def test_many_resets_keep_one_live_entry_per_parent() -> None:
    schedule = ResyncSchedule(ResyncPolicy())
    for i in range(1000):
        schedule.reconciled(i % 3, _parent(str(i % 3)), at=float(i))
    assert len(schedule) == 3
    assert sorted(map(int, schedule.pop_due(1e9))) == [0, 1, 2]
