"""The periodic resync policy and schedule: intervals, bounds, the grid of due times, resets,
and restarts from the heartbeat (simulated runs of a thousand parents in plain numbers)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler._base.times import format_time as rfc3339
from reconciler._driver.resyncs import (
    DEFAULT_RESYNC_INTERVAL,
    RESYNC_ANNOTATION,
    Heartbeat,
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


@given(uid=st.text(min_size=1, max_size=40), last=st.floats(0, 2e9), ticks=st.integers(1, 4))
def test_a_parent_is_due_on_its_grid_within_its_interval_never_later(
    uid: str, last: float, ticks: int
) -> None:
    policy = ResyncPolicy(ticks=ticks)
    spacing = policy.interval / ticks
    due = policy.due_time(_parent(uid), last)
    assert last + policy.interval - spacing - 1e-3 <= due <= last + policy.interval + 1e-3
    assert policy.due_time(_parent(uid), last) == due  # stable
    phase = (due - policy.offset_for(uid, policy.interval)) / spacing
    assert abs(phase - round(phase)) < 1e-6  # a grid point: k * spacing + offset(uid)


def test_offsets_spread_parents_reconciled_together() -> None:
    policy = ResyncPolicy()
    dues = {policy.due_time(_parent(str(i)), 0.0) for i in range(200)}
    assert len(dues) == 200
    assert max(dues) - min(dues) > 0.8 * policy.interval / policy.ticks


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
    assert now + 4 * HOUR < recent_due <= now + 9 * HOUR
    assert recent_due == ResyncPolicy().due_time(recent, now - HOUR)
    assert sorted(map(str, schedule.pop_due(now))) == ["overdue"]
    assert schedule.pop_due(now + 4 * HOUR) == []
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
    assert HOUR / 2 < due <= HOUR
    assert schedule.pop_due(HOUR) == ["a"]


def test_many_resets_keep_one_live_entry_per_parent() -> None:
    schedule = ResyncSchedule(ResyncPolicy())
    for i in range(1000):
        schedule.reconciled(i % 3, _parent(str(i % 3)), at=float(i))
    assert len(schedule) == 3
    assert sorted(map(int, schedule.pop_due(1e9))) == [0, 1, 2]


# --- restarts from the heartbeat: simulated runs ----------------------------------------------

PARENTS = [_parent(f"uid-{i}", last=0.0) for i in range(1000)]


def _run(
    schedule: ResyncSchedule, *, start: float, end: float, reconciles: dict[str, list[float]],
    events: dict[float, str] | None = None,
) -> None:
    """Drive ``schedule`` as the runtime would from ``start`` to ``end``: every due parent is
    reconciled when due, ``events`` reconcile one parent at a given time (a reset)."""
    pending = sorted((events or {}).items())
    now = start
    while True:
        due = schedule.next_due()
        event_at = pending[0][0] if pending else None
        step = min(x for x in (due, event_at, end) if x is not None)
        now = max(now, step)
        if now >= end and step == end:
            return
        if event_at is not None and event_at <= now:
            key = pending.pop(0)[1]
            schedule.take(key)
            schedule.reconciled(key, PARENTS[int(key.split("-")[1])], at=now)
            reconciles[key].append(now)
            continue
        for key in schedule.pop_due(now):
            schedule.reconciled(key, PARENTS[int(str(key).split("-")[1])], at=now)
            reconciles[str(key)].append(now)


def _first_run(policy: ResyncPolicy, *, until: float, events: dict[float, str] | None = None
               ) -> tuple[dict[str, list[float]], Heartbeat]:
    """All parents reconciled at 0 (their status says so), then run until ``until``."""
    schedule = ResyncSchedule(policy)
    reconciles: dict[str, list[float]] = {}
    for parent in PARENTS:
        key = parent["metadata"]["uid"]
        schedule.reconciled(key, parent, at=0.0)
        reconciles[key] = [0.0]
    _run(schedule, start=0.0, end=until, reconciles=reconciles, events=events)
    return reconciles, schedule.heartbeat(until)


def _restart(policy: ResyncPolicy, heartbeat: Heartbeat, *, now: float
             ) -> tuple[ResyncSchedule, set[str]]:
    schedule = ResyncSchedule(policy)
    schedule.resume_from(heartbeat)
    at_once = set()
    for parent in PARENTS:
        key = parent["metadata"]["uid"]
        if schedule.observe(key, parent, now=now) <= now:
            schedule.take(key)
            at_once.add(key)
    return schedule, at_once


def test_a_restart_reconciles_at_once_exactly_the_parents_whose_grid_time_was_missed() -> None:
    policy = ResyncPolicy(ticks=1)  # a fixed grid: the schedule is known exactly after a restart
    crash, restart = 25 * HOUR, 25 * HOUR + 1800
    reconciles, heartbeat = _first_run(policy, until=crash)
    assert heartbeat.covered >= crash
    before = {key: policy.due_time(PARENTS[0] | {"metadata": {"uid": key}}, times[-1])
              for key, times in reconciles.items()}
    missed = {key for key, due in before.items() if due <= restart}
    assert 0 < len(missed) < 0.1 * len(PARENTS)  # half an hour of a 10 h grid: a few, spread
    schedule, at_once = _restart(policy, heartbeat, now=restart)
    assert at_once == missed
    for key, due in before.items():  # and the others keep their schedule to the second
        if key not in missed:
            assert schedule.due_at(key) == due


def test_a_restart_with_no_missed_grid_time_reconciles_none_at_start() -> None:
    policy = ResyncPolicy(ticks=1)
    reconciles, heartbeat = _first_run(policy, until=25 * HOUR)
    restart = 25 * HOUR + 1
    soonest = min(policy.due_time(PARENTS[0] | {"metadata": {"uid": k}}, t[-1])
                  for k, t in reconciles.items())
    assert soonest > restart
    schedule, at_once = _restart(policy, heartbeat, now=restart)
    assert at_once == set()
    assert schedule.next_due() == soonest


@given(
    seed=st.integers(0, 2**32), ticks=st.integers(1, 3),
    crash=st.floats(HOUR, 40 * HOUR), downtime=st.floats(1, 12 * HOUR),
    beat_lag=st.floats(0, 120),
)
def test_no_parent_waits_longer_than_its_interval_across_a_restart(
    seed: int, ticks: int, crash: float, downtime: float, beat_lag: float
) -> None:
    """With resets by random events, a crash ``beat_lag`` seconds after the last heartbeat and
    a restart after ``downtime``: every parent is reconciled within its interval of its last
    reconcile, or at the restart when that deadline fell in the downtime."""
    policy = ResyncPolicy(ticks=ticks)
    rng = random.Random(seed)
    events = {rng.uniform(0, crash): f"uid-{rng.randrange(len(PARENTS))}" for _ in range(300)}
    reconciles, _ = _first_run(policy, until=crash, events=events)
    heartbeat = _first_run(policy, until=crash - beat_lag, events={
        t: k for t, k in events.items() if t < crash - beat_lag})[1]
    restart = crash + downtime
    schedule, at_once = _restart(policy, heartbeat, now=restart)
    for key, times in reconciles.items():
        deadline = times[-1] + policy.interval
        if key in at_once:
            continue  # reconciled at the restart
        assert deadline > restart - 1e-6, key  # a missed deadline is never left for later
        due = schedule.due_at(key)
        assert due is not None
        assert restart < due <= deadline + 1e-6


def test_a_restart_under_a_longer_interval_translates_the_previous_grid() -> None:
    """2 h before the crash, 10 h after: each parent's previous grid proves a last reconcile,
    from which it is due within the new interval, on the new grid; none is due at once."""
    old, new = ResyncPolicy(interval=2 * HOUR), ResyncPolicy()
    reconciles, heartbeat = _first_run(old, until=25 * HOUR)
    assert heartbeat.interval == 2 * HOUR
    restart = 25 * HOUR + 60
    schedule, at_once = _restart(new, heartbeat, now=restart)
    assert at_once == set()
    for key, times in reconciles.items():
        due = schedule.due_at(key)
        assert due is not None
        assert restart < due <= times[-1] + new.interval + 1e-6  # never later than 10 h


def test_a_restart_under_a_shorter_interval_reconciles_what_it_cannot_prove_recent() -> None:
    """10 h before, 1 h after: the old grid proves only that each parent was reconciled in the
    last 10 h, so those not proven within the last hour are due at once (as a live ConfigMap
    change would make them); the rest wait at most an hour from their proven time."""
    old, new = ResyncPolicy(), ResyncPolicy(interval=HOUR)
    reconciles, heartbeat = _first_run(old, until=25 * HOUR)
    restart = 25 * HOUR + 60
    schedule, at_once = _restart(new, heartbeat, now=restart)
    for key, times in reconciles.items():
        if key not in at_once:
            due = schedule.due_at(key)
            assert due is not None
            assert restart < due <= times[-1] + new.interval + 1e-6
    assert len(at_once) > 0.8 * len(PARENTS)


def test_covered_is_held_back_by_parents_due_but_not_yet_reconciled() -> None:
    schedule = ResyncSchedule(ResyncPolicy())
    parent = _parent("a")
    assert schedule.covered(5.0) == 5.0  # nothing scheduled: nothing beyond now is promised
    due = schedule.reconciled("a", parent, at=0.0)
    assert schedule.covered(due - 1) == due  # nothing was due before the next due time
    assert schedule.pop_due(due + 5) == ["a"]
    assert schedule.covered(due + 100) == due  # popped, in the queue, not yet reconciled
    next_due = schedule.reconciled("a", parent, at=due + 100)
    assert schedule.covered(due + 100) == next_due
    assert schedule.heartbeat(due + 100) == Heartbeat(
        covered=next_due, interval=DEFAULT_RESYNC_INTERVAL, ticks=2)
    schedule.suspend("a")  # a failing parent leaves it to backoff: it holds nothing back
    assert schedule.covered(due + 200) == due + 200


def test_a_heartbeat_without_a_status_time_still_bounds_the_last_reconcile() -> None:
    policy = ResyncPolicy()
    beat = Heartbeat(covered=100 * HOUR, interval=policy.interval, ticks=2)
    parent = _parent("x")  # no status time: only the heartbeat speaks for it
    bound = policy.last_reconcile_bound(parent, beat)
    assert bound is not None
    assert 100 * HOUR - policy.interval <= bound < 100 * HOUR - policy.interval / 2 + 1e-6
    assert policy.last_reconcile_bound(parent, None) is None
    recent = _parent("x", last=100 * HOUR - 60)  # a status written recently is the later bound
    assert policy.last_reconcile_bound(recent, beat) == 100 * HOUR - 60
