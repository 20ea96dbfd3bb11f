"""The operator state machine on the Thanos example (its CRD installed by the operator at
start): random Thanos specs created, changed, paused, drifted and deleted, the invariants of
``reconciler.testing.operator_machine`` checked at each quiet point."""

from __future__ import annotations

from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from builders.specs import to_spec_dict
from builders.testing import spec_instances
from examples.thanos.crds import API_VERSION, KIND, ThanosSpec
from examples.thanos.operator import make_operator
from reconciler.testing import operator_machine

#: Hypothesis' explain phase traces every line run: minutes with an operator's threads
NO_EXPLAIN = tuple(p for p in Phase if p is not Phase.explain)

THANOS = spec_instances(ThanosSpec).map(
    lambda spec: {"apiVersion": API_VERSION, "kind": KIND, "spec": to_spec_dict(spec)})


def test_machine_passes_on_the_thanos_operator() -> None:
    machine = operator_machine(make_operator(), parents=THANOS)
    run_state_machine_as_test(machine, settings=settings(
        max_examples=2, stateful_step_count=5, deadline=None, derandomize=True, phases=NO_EXPLAIN))
