"""The worker's settle policy (``reconciler._driver.settling``): properties of ``settle(outcome)``
over every outcome a turn can come to, without a server, a queue or a thread."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler._driver.settling import Outcome, Settlement, settle

_types = st.frozensets(st.tuples(st.sampled_from(["v1", "apps/v1"]),
                                 st.sampled_from(["ConfigMap", "Deployment", "Service"])))
_delays = st.floats(min_value=0.0, max_value=600.0, allow_nan=False)

def _reconciled(**fixed: bool) -> st.SearchStrategy[Outcome]:
    """Reconciled outcomes, the booleans named in ``fixed`` drawn as given (drawn directly
    rather than filtered: a filter keeping one outcome in sixteen fails Hypothesis' health
    check on a loaded machine)."""
    flags = {name: st.just(fixed[name]) if name in fixed else st.booleans()
             for name in ("ok", "went_away", "namespace_terminating", "permanent")}
    return st.builds(
        Outcome,
        reconciled=st.just(True),
        requeue_after=st.none() | _delays,
        retry_after=_delays,
        retry_failed_by_backoff=st.booleans(),
        reason=st.text(max_size=20),
        status_written=st.booleans(),
        types=st.none() | _types,
        writes=st.integers(min_value=0, max_value=50),
        changes=st.none() | st.text(min_size=1, max_size=20),
        seconds=_delays,
        **flags,
    )


reconciled = _reconciled()
settled = _reconciled(went_away=False, namespace_terminating=False)
"""A reconcile that settled its parent (neither went away nor a terminating namespace)."""
not_reconciled = st.one_of(
    st.builds(Outcome, drain_refused=st.just(True)),
    st.builds(Outcome, adopted=st.just(True)),
    st.builds(Outcome, cleanup_pending=st.text(max_size=20)),
    st.builds(Outcome, gone=st.just(True)),
    st.builds(Outcome, deleting=st.just(True)),
)
outcomes = reconciled | not_reconciled


def _on(plan: Settlement, *names: str) -> set[str]:
    """Which of the settlement's fields ``names`` are set (true, or not None)."""
    return {name for name in names if getattr(plan, name) not in (False, None)}


def _unset(plan: Settlement, *names: str) -> set[str]:
    """Which of the settlement's fields ``names`` are not set."""
    return set(names) - _on(plan, *names)


@given(_reconciled(went_away=False, namespace_terminating=False, ok=False, permanent=False))
def test_a_failure_is_never_forgotten_silently(outcome: Outcome) -> None:
    plan = settle(outcome)
    assert plan.count_failure
    assert plan.metric == "error"
    # retried by backoff (at least its Retry-After), or left to the resync: exactly one
    assert plan.backoff != plan.reschedule
    assert plan.backoff == outcome.retry_failed_by_backoff
    if plan.backoff:
        assert plan.suspend
        assert plan.backoff_at_least == outcome.retry_after
    else:
        assert plan.kick  # the timer sees its next time
    assert not _on(plan, "forget_backoff", "unschedule", "release")
    assert (plan.level, plan.report_delay) == (logging.WARNING, True)
    assert outcome.reason in (plan.message or "")


@given(st.builds(Outcome, reconciled=st.just(True), permanent=st.just(True),
                 status_written=st.booleans(), reason=st.text(max_size=20),
                 types=st.none() | _types, writes=st.integers(min_value=0, max_value=50),
                 requeue_after=st.none() | _delays, retry_after=_delays,
                 retry_failed_by_backoff=st.booleans()))
def test_a_permanent_failure_is_not_retried_and_warns_once(outcome: Outcome) -> None:
    """PermanentError/InvalidSpecError: no backoff; the resync and the parent's next change
    look again; WARNING when its Stalled status was written (the first time), DEBUG after.
    What the rest of the reconcile asked for (a held repair, a readiness recheck) is kept:
    the requested ``requeue_after``, never one of the failure's own (issue 38)."""
    plan = settle(outcome)
    assert plan.count_failure
    assert plan.metric == "error"
    assert not _unset(plan, "forget_backoff", "reschedule", "kick")
    assert not _on(plan, "backoff", "suspend", "requeue_now", "report_delay")
    assert plan.requeue_after == outcome.requeue_after
    assert plan.level == (logging.WARNING if outcome.status_written else logging.DEBUG)
    assert outcome.reason in (plan.message or "")


@given(_reconciled(went_away=False, namespace_terminating=False, ok=True))
def test_success_always_reschedules(outcome: Outcome) -> None:
    plan = settle(outcome)
    assert not _unset(plan, "forget_backoff", "reschedule", "kick")
    assert not _on(plan, "backoff", "unschedule", "release", "count_failure")
    assert plan.requeue_after == outcome.requeue_after
    assert plan.metric == ("success" if outcome.requeue_after is None else "requeue_after")
    assert (plan.message is None) == (outcome.changes is None)


@given(settled)
def test_a_settled_reconcile_declares_its_types_and_counts_its_writes(outcome: Outcome) -> None:
    plan = settle(outcome)
    assert (plan.use_types, plan.writes) == (outcome.types, outcome.writes)


@given(st.builds(Outcome, gone=st.just(True)) | st.builds(Outcome, deleting=st.just(True)))
def test_a_gone_parent_is_dropped_from_schedule_queue_and_informers(outcome: Outcome) -> None:
    plan = settle(outcome)
    assert not _unset(plan, "unschedule", "forget_backoff", "release")
    assert not _on(plan, "reschedule", "requeue_now", "backoff", "kick")
    assert not _on(plan, "requeue_after", "metric")


@given(_reconciled(went_away=True))
def test_a_parent_gone_during_its_reconcile_is_forgotten_and_looked_at_once_more(
        outcome: Outcome) -> None:
    plan = settle(outcome)
    assert not _unset(plan, "forget_cached", "requeue_now")
    assert plan.trigger == "parent-went-away"
    # the next turn finds it gone (dropped) or being deleted (its cleanup): nothing scheduled
    assert not _on(plan, "reschedule", "backoff", "count_failure")
    assert not _on(plan, "use_types", "writes")


@given(_reconciled(namespace_terminating=True, went_away=False))
def test_a_terminating_namespace_is_neither_retried_nor_resynced(outcome: Outcome) -> None:
    plan = settle(outcome)
    assert not _unset(plan, "forget_backoff", "unschedule")
    assert not _on(plan, "reschedule", "backoff", "requeue_now", "count_failure")
    assert plan.requeue_after is None


@given(st.builds(Outcome, cleanup_pending=st.text(max_size=20),
                 cleanup_alarming=st.booleans()))
def test_a_pending_cleanup_is_retried_with_backoff_and_kept(outcome: Outcome) -> None:
    """Retried with backoff; a WARNING only when it failed or is stuck (issue 36: waiting
    for dependents to be gone is no failure)."""
    plan = settle(outcome)
    assert not _unset(plan, "backoff", "report_delay")
    assert plan.level == (logging.WARNING if outcome.cleanup_alarming else logging.DEBUG)
    assert not _on(plan, "unschedule", "release", "forget_backoff")


@given(outcomes)
def test_no_settlement_contradicts_itself(outcome: Outcome) -> None:
    plan = settle(outcome)
    assert not (plan.reschedule and plan.unschedule)
    assert not (plan.forget_backoff and plan.backoff)
    assert not (plan.suspend and not plan.backoff)
    assert not (plan.release and not plan.unschedule)
    assert (plan.metric is not None) == outcome.reconciled  # one observation per reconcile
    assert plan.count_failure == (plan.metric == "error")


@given(outcomes)
def test_every_key_is_kept_or_dropped_on_purpose(outcome: Outcome) -> None:
    """Each settlement puts the key back somewhere (queue, backoff, schedule; an adopted
    parent was scheduled when adopted) or drops it from the schedule: none is lost."""
    plan = settle(outcome)
    kept = (plan.requeue_now or plan.requeue_after is not None or plan.backoff
            or plan.reschedule or outcome.adopted)
    assert kept != plan.unschedule


@given(outcomes)
def test_settle_is_a_function_of_the_outcome(outcome: Outcome) -> None:
    assert settle(outcome) == settle(outcome)
    assert isinstance(settle(outcome), Settlement)


@pytest.mark.parametrize("facts", [
    {},
    {"gone": True, "deleting": True},
    {"reconciled": True, "gone": True},
    {"reconciled": True, "cleanup_pending": "waiting"},
])
def test_an_outcome_either_reconciled_or_has_exactly_one_reason(facts: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="exactly one reason"):
        Outcome(**facts)  # type: ignore[arg-type]
