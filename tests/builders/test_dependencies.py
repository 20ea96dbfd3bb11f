"""Dependencies between components, declared in builders: nodes travel with the builders, a cycle
is refused when the builders are composed, naming it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import builders as b
from builders import objects
from builders.composition import (
    DependencyCycleError,
    DependencyError,
    dependencies_of,
    dependency_graph,
)


def _cm(name: str) -> b.ResourceBuilder:
    return lambda: objects.config_map(metadata={"name": name})  # type: ignore[return-value]


def test_component_builders_carry_their_node_through_compose_and_wrappers() -> None:
    crd = b.Component(name="crd", builders=[_cm("a")])
    app = b.Component(name="app", depends_on="crd", builders=[_cm("b"), [_cm("c")]],
                      ready_when=lambda obj: True)
    flat = b.compose(crd, [app], None)
    assert [n.name for n in map(dependencies_of, flat) if n] == ["crd", "app", "app"]
    assert dependencies_of(flat[1]) == app.node
    assert app.node.depends_on == ("crd",)
    wrapped = b.with_overrides(flat[1], {"data": {"x": "1"}})
    assert dependencies_of(wrapped) == app.node
    assert dependencies_of(_cm("plain")) is None
    # Building is unchanged: the same objects, names as before.
    assert [obj["metadata"]["name"] for obj, _ in b.run_builders(flat)] == ["a", "b", "c"]
    assert "component app" in repr(flat[1])


def test_a_cycle_is_refused_when_composed_naming_it() -> None:
    one = b.Component(name="one", depends_on="three", builders=[_cm("1")])
    two = b.Component(name="two", depends_on="one", builders=[_cm("2")])
    three = b.Component(name="three", depends_on=["two"], builders=[_cm("3")])
    with pytest.raises(DependencyCycleError) as caught:
        b.compose([one, two], three)
    assert isinstance(caught.value, ValueError)
    assert caught.value.cycle in {("one", "three", "two", "one"), ("three", "two", "one", "three"),
                                  ("two", "one", "three", "two")}
    assert "dependency cycle between components: one -> three -> two -> one" in str(caught.value)
    with pytest.raises(DependencyCycleError, match="self -> self"):
        b.compose(b.Component(name="self", depends_on="self", builders=[_cm("s")]))


def test_wrong_declarations_are_refused_clearly() -> None:
    with pytest.raises(DependencyError, match="declared twice"):
        b.compose(b.Component(name="x", depends_on="a", builders=[_cm("1")]),
                  b.Component(name="x", depends_on="b", builders=[_cm("2")]))
    with pytest.raises(DependencyError, match="ready_when must be callable"):
        b.Component(name="x", ready_when="Available", builders=[_cm("1")])  # type: ignore[arg-type]
    with pytest.raises(DependencyError, match="depends_on names components"):
        b.Component(name="x", depends_on=[""], builders=[_cm("1")])
    partial = b.compose(b.Component(name="x", depends_on="later", builders=[_cm("1")]))
    assert dependency_graph(partial).missing() == (("x", "later"),)
    with pytest.raises(DependencyError, match="'x' depends on 'later'"):
        dependency_graph(partial, complete=True)


@st.composite
def _graphs(draw: Any) -> dict[str, tuple[str, ...]]:
    """A random dependency graph over a few names (cycles allowed)."""
    names = [f"c{i}" for i in range(draw(st.integers(1, 6)))]
    return {name: tuple(draw(st.lists(st.sampled_from(names), max_size=3, unique=True)))
            for name in names}


def _has_cycle(graph: dict[str, tuple[str, ...]]) -> bool:
    seen: dict[str, int] = {}

    def visit(name: str) -> bool:
        seen[name] = 1
        for dep in graph[name]:
            if seen.get(dep) == 1 or (dep not in seen and visit(dep)):
                return True
        seen[name] = 2
        return False

    return any(name not in seen and visit(name) for name in graph)


@given(_graphs())
def test_compose_refuses_exactly_the_cyclic_graphs_naming_a_real_cycle(
    graph: dict[str, tuple[str, ...]],
) -> None:
    def components() -> list[b.Component]:  # a self-cycle is refused by its Component already
        return [b.Component(name=name, depends_on=deps, builders=[_cm(name)])
                for name, deps in graph.items()]

    if not _has_cycle(graph):
        flat = b.compose(components())
        ranks = dependency_graph(flat).rank()
        assert all(ranks[dep] < ranks[name] for name, deps in graph.items() for dep in deps)
        return
    with pytest.raises(DependencyCycleError) as caught:
        b.compose(components())
    cycle = caught.value.cycle
    assert cycle[0] == cycle[-1]
    assert len(cycle) >= 2
    assert all(after in graph[before] for before, after in itertools.pairwise(cycle))
