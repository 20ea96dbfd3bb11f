"""``check_builders(inputs=InputStates(...))``: builders of ``(parent, inputs)`` checked over every
state of their inputs (missing, forbidden, present, changed)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import strategies as st

import builders as b
from builders import objects
from builders.inputs import InputMissingError, inputs_digest, with_inputs_digest
from builders.testing import InputStates, check_builders, with_inputs
from builders.testing._strategies import dns_labels

OPERATOR = "inputs-test"


def _ref(parent: dict[str, Any]) -> b.ObjectRef:
    return b.ObjectRef(api_version="v1", kind="Secret", name=f"{parent['metadata']['name']}-s",
                       namespace=parent["metadata"]["namespace"])


def declare(parent: dict[str, Any]) -> list[b.ObjectRef]:
    return [_ref(parent)]


PARENTS = st.builds(lambda name: {
    "apiVersion": "example.com/v1", "kind": "App",
    "metadata": {"name": name, "namespace": "ns", "uid": "00000000-0000-4000-8000-000000000001"},
}, dns_labels(max_size=20, rfc1035=True))


def build(parent: dict[str, Any], inputs: b.Inputs) -> list[b.ResourceBuilder]:
    ref = _ref(parent)

    @b.resource_builder
    def app(parent: dict[str, Any]) -> dict[str, Any]:
        inputs.require(ref)
        dep = objects.deployment(
            metadata=b.child_meta(parent, component="app", managed_by=OPERATOR),
            selector_labels=b.selector_labels(parent, component="app"),
            containers=[objects.container(name="app", image="example.com/app:1")])
        return with_inputs_digest(dep, inputs_digest(inputs, [ref]))

    @b.resource_builder
    def settings(parent: dict[str, Any]) -> dict[str, Any]:
        return objects.config_map(
            metadata=b.child_meta(parent, component="settings", managed_by=OPERATOR),
            data={"k": "v"})

    return [app(parent), settings(parent)]


def test_builders_of_parent_and_inputs_keep_every_invariant() -> None:
    check_builders(build, PARENTS, inputs=InputStates(declare=declare), managed_by=OPERATOR,
                   max_examples=25)


def test_a_name_taken_from_an_input_breaks_input_changes() -> None:
    def renaming(parent: dict[str, Any], inputs: b.Inputs) -> list[b.ResourceBuilder]:
        @b.resource_builder
        def cfg(parent: dict[str, Any]) -> dict[str, Any]:
            data = inputs.require(_ref(parent)).get("data") or {}
            suffix = "a" if len(data) % 2 else "b"
            return objects.config_map(
                metadata=b.child_meta(parent, component=f"cfg-{suffix}", managed_by=OPERATOR),
                data={"k": "v"})
        return [cfg(parent)]

    with pytest.raises(AssertionError, match="input changes"):
        check_builders(renaming, PARENTS, managed_by=OPERATOR, max_examples=20,
                       inputs=InputStates(declare=declare, states=("present",)))


def test_a_missing_input_leaves_out_only_the_builder_that_requires_it() -> None:
    parent = {"apiVersion": "example.com/v1", "kind": "App",
              "metadata": {"name": "a", "namespace": "ns",
                           "uid": "00000000-0000-4000-8000-000000000001"}}
    missing = b.Inputs(missing=[_ref(parent)])
    kept = with_inputs(build, missing)(parent)
    assert [b.run_builders([k], parent=parent)[0][0]["kind"] for k in kept] == ["ConfigMap"]
    with pytest.raises(InputMissingError, match=r"Secret\.v1 ns/a-s does not exist"):
        missing.require(_ref(parent))
    present = b.Inputs({_ref(parent): {"metadata": {"name": "a-s"}, "data": {"p": "c2VjcmV0"}}})
    assert len(with_inputs(build, present)(parent)) == 2
    assert "c2VjcmV0" not in repr(present)


def test_input_states_refuse_an_unknown_state() -> None:
    with pytest.raises(ValueError, match="states must be among"):
        InputStates(declare=declare, states=("rotten",))


def _fronted(component: str) -> Any:
    """``build`` and a Service selecting the pods of ``component``."""
    def fronted(parent: dict[str, Any], inputs: b.Inputs) -> list[b.ResourceBuilder]:
        @b.resource_builder
        def front(parent: dict[str, Any]) -> dict[str, Any]:
            return objects.service(
                metadata=b.child_meta(parent, component="front", managed_by=OPERATOR),
                selector=b.selector_labels(parent, component=component), ports={"http": 80})
        return [*build(parent, inputs), front(parent)]
    return fronted


def test_a_service_may_select_a_workload_left_out_for_a_missing_input() -> None:
    """Issue 36 (the Thanos example under the kit): a Service built whatever the inputs, for a
    workload that waits for one, selects nothing while the input is missing; that is the
    reconcile's state too (the workload waits), not a broken selector."""
    check_builders(_fronted("app"), PARENTS, managed_by=OPERATOR, max_examples=10,
                   inputs=InputStates(declare=declare, states=("missing",)))
    # with the input there, the Service must still select a workload of the set
    with pytest.raises(AssertionError, match="invariant 'selectors'"):
        check_builders(_fronted("nothing"), PARENTS, managed_by=OPERATOR, max_examples=10,
                       inputs=InputStates(declare=declare, states=("present",)))
