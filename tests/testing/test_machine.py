"""The operator state machine (``reconciler.testing.operator_machine``) on the Thing sample
operator: it runs green on a correct operator and fails on seeded defects."""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky
from hypothesis.stateful import run_state_machine_as_test

from builders import DesiredState, ResourceBuilder, child_name, resource_builder
from builders.objects import config_map
from reconciler import Reporting
from reconciler._driver.operators import Operator
from reconciler.testing import operator_machine
from tests.driver.sample_operator import API_VERSION, THING_CRD, build

#: Hypothesis' explain phase traces every line run: minutes with an operator's threads
NO_EXPLAIN = tuple(p for p in Phase if p is not Phase.explain)

FAST = settings(max_examples=3, stateful_step_count=6, deadline=None, derandomize=True,
                phases=NO_EXPLAIN, report_multiple_bugs=False)

THINGS = st.builds(lambda value: {"apiVersion": API_VERSION, "kind": "Thing",
                                  "spec": {"value": value}},
                   st.sampled_from(["a", "b", "c"]))


def thing_operator(build_fn: Any = build) -> Operator:
    return Operator(api_version=API_VERSION, kind="Thing", build=build_fn,
                    name=f"m-{uuid.uuid4().hex[:6]}", install=[THING_CRD],
                    reporting=Reporting(events=False))


def test_machine_passes_on_the_sample_operator() -> None:
    machine = operator_machine(thing_operator(), parents=THINGS)
    run_state_machine_as_test(machine, settings=FAST)


@resource_builder
def _random_settings(parent: Any) -> dict[str, Any]:
    return config_map(metadata={"name": child_name(parent["metadata"]["name"], "cfg")},
                      data={"value": str(random.random())})


def _nondeterministic(parent: Any) -> Sequence[ResourceBuilder]:
    return [_random_settings(parent)]


def test_machine_catches_a_nondeterministic_builder() -> None:
    machine = operator_machine(thing_operator(_nondeterministic), parents=THINGS)
    with pytest.raises(AssertionError, match="differs from its build"):
        run_state_machine_as_test(machine, settings=FAST)


_FLIPS = iter(range(10**9))


@resource_builder
def _flipping_settings(parent: Any) -> Any:
    cm = config_map(metadata={"name": child_name(parent["metadata"]["name"], "cfg")},
                    data={"value": "x"})
    # the seeded defect: ABSENT on one build, PRESENT on the next
    return cm, (DesiredState.ABSENT if next(_FLIPS) % 2 else DesiredState.PRESENT)


def _flipping(parent: Any) -> Sequence[ResourceBuilder]:
    return [_flipping_settings(parent)]


def test_machine_catches_a_child_flipping_between_absent_and_present() -> None:
    machine = operator_machine(thing_operator(_flipping), parents=THINGS, idle_timeout=5.0)
    # the defect flips on every build, so a replay may fail a step earlier or later: Hypothesis
    # then says its run was flaky, with the machine's failure as the cause
    with pytest.raises((AssertionError, Flaky)) as failure:
        run_state_machine_as_test(machine, settings=FAST)
    said = f"{failure.value}\n{failure.value.__cause__}\n{failure.value.__context__}"
    # caught as a child not as built, or by the forced resync (its build flips it once more)
    assert re.search(r"ABSENT child .* exists|PRESENT child .* is missing|"
                     r"a forced resync wrote: (delete|create)", said), said
