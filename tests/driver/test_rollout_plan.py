"""The pure rollout rules (reconciler._driver.rollout_plan): batches, the gate, judging a batch,
pause, resume, abort and the record's round trip, as properties and a Hypothesis state machine."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from reconciler import ReconcilerUsageError, ReconcilerUsageTypeError, Rollout
from reconciler._commands.rbac import derive_rules, operator_facts
from reconciler._driver.rollout_plan import (
    MAX_REASON,
    Observation,
    Phase,
    RolloutState,
    abort,
    admits,
    batch_members,
    consents,
    from_annotations,
    judge,
    next_batch,
    observe,
    order_key,
    resume,
    start,
    to_annotations,
)
from tests.driver.conftest import make_operator

_names = st.from_regex(r"[a-z][a-z0-9-]{0,6}", fullmatch=True)
_keys = st.tuples(st.sampled_from(["", "a", "b", "team-x"]), _names)


def _parent(*, generation: int = 1, observed: int | None = 1, last: str | None = "2026-01-01T"
            "00:00:00Z", requested: str | None = None, conditions: list[dict[str, str]] | None
            = None) -> dict[str, object]:
    annotations = {} if requested is None else {"optk.dev/reconcile-requested-at": requested}
    status: dict[str, object] = {"conditions": conditions or []}
    if last is not None:
        status["lastReconcileTime"] = last
    if observed is not None:
        status["observedGeneration"] = observed
    return {"metadata": {"name": "p", "namespace": "n", "generation": generation,
                         "annotations": annotations}, "status": status}


def test_rollout_settings_are_checked() -> None:
    with pytest.raises(ReconcilerUsageError, match="max_in_flight must be >= 1"):
        Rollout(max_in_flight=0)
    with pytest.raises(ReconcilerUsageTypeError, match="max_in_flight must be an int"):
        Rollout(max_in_flight=2.5)  # type: ignore[arg-type]
    with pytest.raises(ReconcilerUsageError, match="batch_timeout must be a number > 0"):
        Rollout(batch_timeout=0)


def test_consent_is_a_new_parent_a_spec_change_or_a_requested_reconcile() -> None:
    assert not consents(_parent())
    assert consents(_parent(last=None))  # never reconciled
    assert consents(_parent(generation=2, observed=1))  # spec changed since
    assert consents(_parent(requested="2026-01-02T00:00:00Z"))
    assert not consents(_parent(requested="2025-12-31T00:00:00Z"))  # older than the reconcile
    failed = [{"type": "Reconciled", "status": "False", "reason": "Failed"}]
    assert not consents(_parent(conditions=failed))  # a failure is not consent


def test_observe_reads_the_failure_only_after_the_new_code_ran() -> None:
    failed = _parent(conditions=[{"type": "Reconciled", "status": "False",
                                  "reason": "BuildFailed", "message": "bad value"},
                                 {"type": "Ready", "status": "False"}])
    assert observe(failed, reconciled=False) == Observation(reconciled=False, ready=False)
    assert observe(failed, reconciled=True).failure == "BuildFailed: bad value"
    ready = _parent(conditions=[{"type": "Reconciled", "status": "True"},
                                {"type": "Ready", "status": "True"}])
    assert observe(ready, reconciled=True) == Observation(reconciled=True, ready=True)
    assert observe(None, reconciled=False) == Observation(reconciled=True, ready=True)


def test_a_batch_not_ready_by_its_timeout_pauses_naming_the_first_waiting_parent() -> None:
    rollout = Rollout(max_in_flight=3, batch_timeout=60)
    keys = [("n", f"p{i}") for i in range(5)]
    state = next_batch(start(target="new", source="old"), keys, now=100.0, max_in_flight=3)
    seen = {keys[0]: Observation(reconciled=True, ready=True),
            keys[1]: Observation(reconciled=True, ready=False),
            keys[2]: Observation(reconciled=False)}
    assert not judge(state, seen, now=159.0, rollout=rollout).changed
    verdict = judge(state, seen, now=160.0, rollout=rollout)
    assert verdict.paused == "n/p1"
    assert verdict.state.phase is Phase.PAUSED
    assert "not Ready 60s after batch 1 started (2 of 3 parents waiting)" in verdict.state.reason
    carry_on = judge(state, seen, now=160.0, rollout=attrs.evolve(rollout,
                                                                    pause_on_failure=False))
    assert (carry_on.paused, carry_on.state.cursor) == (None, "n/p2")
    not_waiting = judge(state, seen, now=100.0, rollout=attrs.evolve(rollout, wait_ready=False))
    assert not not_waiting.changed  # p2 was not reconciled yet


def test_abort_is_final_for_its_version_and_keeps_the_unrolled_parents_held() -> None:
    keys = [("n", f"p{i}") for i in range(4)]
    state = next_batch(start(target="new", source="old"), keys, now=0.0, max_in_flight=2)
    state = judge(state, dict.fromkeys(keys[:2], Observation(reconciled=True, ready=True)),
                  now=1.0, rollout=Rollout(max_in_flight=2)).state
    aborted = abort(state)
    assert aborted.phase is Phase.ABORTED
    assert [admits(aborted, key) for key in keys] == [True, True, False, False]
    assert next_batch(aborted, keys, now=2.0, max_in_flight=2) == aborted
    assert resume(aborted, now=2.0) == aborted
    done = next_batch(attrs.evolve(state, cursor="n/p3"), keys, now=2.0, max_in_flight=2)
    assert done.phase is Phase.DONE
    assert abort(done) == done


@given(st.builds(
    RolloutState, target=st.text(min_size=1, max_size=16), source=st.text(max_size=16),
    phase=st.sampled_from(Phase), cursor=st.text(max_size=20), batch_end=st.text(max_size=20),
    batch=st.integers(0, 10_000), batch_started=st.floats(0, 2e9, allow_nan=False),
    failed=st.text(max_size=30), reason=st.text(max_size=MAX_REASON)))
def test_the_record_round_trips_through_annotations(state: RolloutState) -> None:
    annotations = to_annotations(state)
    assert from_annotations(annotations) == state
    assert sum(len(v) for v in annotations.values()) <= 16 + 16 + 8 + 20 + 20 + 30 + 30 + (
        MAX_REASON * 4)  # bounded whatever the number of parents


class RolloutMachine(RuleBasedStateMachine):
    """Parents come and go, batches open and are judged with arbitrary observations, clocks
    move, people resume and abort; the rules' promises hold at every step."""

    @initialize(keys=st.sets(_keys, min_size=0, max_size=25), size=st.integers(1, 6))
    def begin(self, keys: set[tuple[str, str]], size: int) -> None:
        self.keys = set(keys)
        self.rollout = Rollout(max_in_flight=size, batch_timeout=10)
        self.state = start(target="new", source="old")
        self.now = 0.0
        self.rolled: set[tuple[str, str]] = set()

    @rule(key=_keys)
    def add_parent(self, key: tuple[str, str]) -> None:
        self.keys.add(key)

    @precondition(lambda self: bool(self.keys))
    @rule(data=st.data())
    def delete_parent(self, data: st.DataObject) -> None:
        self.keys.discard(data.draw(st.sampled_from(sorted(self.keys))))

    @rule(seconds=st.floats(0, 15))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @rule()
    def open_batch(self) -> None:
        before = self.state
        self.state = next_batch(before, self.keys, now=self.now,
                                max_in_flight=self.rollout.max_in_flight)
        if self.state != before and self.state.phase is Phase.ROLLING:
            members = batch_members(self.state, self.keys)
            assert 1 <= len(members) <= self.rollout.max_in_flight
            assert all(order_key(k) > before.cursor for k in members)
            # the batch is the first parents after the cursor, in order
            after = sorted((k for k in self.keys if order_key(k) > before.cursor), key=order_key)
            assert members == after[:len(members)]
        if self.state.phase is Phase.DONE and before.phase is Phase.ROLLING:
            assert all(order_key(k) <= before.cursor for k in self.keys)

    @rule(data=st.data())
    def judge_batch(self, data: st.DataObject) -> None:
        members = batch_members(self.state, self.keys)
        seen = {key: data.draw(st.builds(
            Observation, reconciled=st.booleans(),
            failure=st.one_of(st.none(), st.just("boom")), ready=st.booleans()))
            for key in members}
        seen = {k: o if o.reconciled or o.failure is None else attrs.evolve(o, failure=None)
                for k, o in seen.items()}
        before = self.state
        verdict = judge(before, seen, now=self.now, rollout=self.rollout)
        self.state = verdict.state
        if verdict.paused is not None:
            assert verdict.paused in {order_key(k) for k in members}
            assert self.state.phase is Phase.PAUSED
            assert self.state.cursor == before.cursor  # a paused batch is not rolled
            failing = [order_key(k) for k, o in seen.items() if o.failure is not None]
            if failing:
                assert verdict.paused == min(failing)  # the first failure, in order
            else:
                assert self.now - before.batch_started >= self.rollout.batch_timeout
        elif verdict.changed:
            assert all(o.failure is None and o.reconciled and o.ready for o in seen.values())
            self.rolled |= set(members)

    @rule()
    def resume_rollout(self) -> None:
        before = self.state
        self.state = resume(before, now=self.now)
        if before.phase is Phase.PAUSED:
            assert self.state.phase is Phase.ROLLING
            assert (self.state.cursor, self.state.batch_end) == (before.cursor, before.batch_end)

    @precondition(lambda self: self.state.phase is not Phase.ABORTED)
    @rule()
    def abort_sometimes(self) -> None:
        if self.now > 40:  # now and then: aborted machines stop moving
            self.state = abort(self.state)

    @invariant()
    def rolled_parents_stay_admitted_and_later_ones_held(self) -> None:
        state = self.state
        assert all(admits(state, key) for key in self.rolled)
        if state.phase is not Phase.DONE:
            beyond = [k for k in self.keys if order_key(k) > (state.batch_end or state.cursor)]
            assert not any(admits(state, key) for key in beyond)
        assert from_annotations(to_annotations(state)) == state


TestRolloutMachine = RolloutMachine.TestCase
TestRolloutMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


def test_the_derived_role_may_read_and_update_the_rollout_record() -> None:
    operator = make_operator("ns", rollout=Rollout())
    rules = derive_rules(operator_facts(operator), parents=[], lease_namespace="ops")
    names = {name for rule in rules if rule.resources == ("leases",) and "update" in rule.verbs
             for name in rule.resource_names}
    assert {f"{operator.name}-resync", f"{operator.name}-rollout"} <= names
    plain = derive_rules(operator_facts(make_operator("ns")), parents=[], lease_namespace="ops")
    assert not any(name.endswith("-rollout") for rule in plain for name in rule.resource_names)
