"""``benchmarks.gates``' ungated operator: the Thanos example's children, none of them gated
(the "gates off" side of the benchmark and of ``benchmarks.compare --gates off``)."""

from __future__ import annotations

from benchmarks import _fleet as fleet
from benchmarks import gates
from builders import Inputs, ObjectRef
from builders.composition import dependencies_of
from examples.thanos.operator import operator


def test_the_ungated_operator_builds_the_same_children_without_a_gate() -> None:
    parent = fleet.parent(0)
    parent["metadata"]["uid"] = "0000-uid"
    secret = fleet.object_storage_secret()
    inputs = Inputs({ObjectRef.of(secret): secret})
    ungated = gates.ungated_operator
    gated = list(operator.build(parent, inputs))
    built = list(ungated.build(parent, inputs))
    assert any((node := dependencies_of(b)) is not None and node.gated for b in gated)
    assert all(dependencies_of(b) is None for b in built)
    assert [b() for b in built] == [b() for b in gated]
    assert ungated.name == operator.name
