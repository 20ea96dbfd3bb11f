"""Dependencies between children: which component waits for which, declared where builders are
composed.

A :class:`~builders.Component` names a group of builders; with ``depends_on`` it waits until every
component it names is ready, with ``ready_when`` it says when it is ready itself, with
``precondition`` it is built only while a pure function of the parent and its observed
dependencies says so, and with ``when_served`` only while the kinds it builds are served (the
generalised switch of a CRD that may be missing, such as ServiceMonitor). This module holds the
value of one node (:class:`Dependencies`), the builder that carries it through composition
(:class:`GatedBuilder`), and the graph over a parent's builders (:func:`dependency_graph`), which
refuses a cycle naming it.

Boundary: declaring only, pure. Deciding what a reconcile applies, what waits and in which order a
teardown deletes is the reconciler's (``reconciler._reconcile.ordering``); what "ready" means for a
kind when no ``ready_when`` is given is the reconciler's default health rule too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias

import attrs

from builders._errors import DependencyCycleError, DependencyError
from builders._health import Health
from builders._state import DesiredState, KubeObject

__all__ = [
    "Dependencies",
    "DependencyGraph",
    "GatedBuilder",
    "Observed",
    "Precondition",
    "ReadyRule",
    "dependencies_of",
    "dependency_graph",
    "rule_verdict",
]

ReadyRule: TypeAlias = Callable[[KubeObject], "Health | bool | str | None"]
"""A readiness rule over one live child: a :class:`~builders.health.Health` (ready when
Current), ``True``/``None`` when ready, ``False`` or a short reason when not (the shape of
``builders.health.HealthRule`` and the reconciler's health checks)."""

Observed: TypeAlias = Mapping[str, Sequence[KubeObject]]
"""The live children of each dependency a precondition may read, by component name."""

Precondition: TypeAlias = Callable[[KubeObject, Observed], "bool | str | None"]
"""``precondition(parent, observed)``: ``True``/``None`` to build, ``False`` or a reason to wait."""


def rule_verdict(verdict: Health | bool | str | None) -> str | None:
    """A rule's answer as "why not" (``None`` when it holds)."""
    if isinstance(verdict, Health):
        return None if verdict.current else (verdict.message or str(verdict.status))
    if verdict is None or verdict is True:
        return None
    return "not ready" if verdict is False else str(verdict)


def _names(value: str | Iterable[str]) -> tuple[str, ...]:
    names = (value,) if isinstance(value, str) else tuple(value)
    for name in names:
        if not isinstance(name, str) or not name:
            raise DependencyError(f"depends_on names components by their name, got {name!r}")
    return names


def _callable_or_none(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not callable(value):
        raise DependencyError(
            f"component {instance.name!r}: {attribute.name} must be callable, got {value!r}")


@attrs.frozen(kw_only=True)
class Dependencies:
    """One node of a parent's dependency graph: a component's name and what it declares."""

    name: str
    """The component's name (what other components' ``depends_on`` say)."""
    depends_on: tuple[str, ...] = attrs.field(default=(), converter=_names)
    """The components that must be ready before this one's children are created or updated
    (and that are deleted only after this one's children are gone)."""
    ready_when: ReadyRule | None = attrs.field(default=None, validator=_callable_or_none)
    """When one of this component's live children is ready; None: the default health rule of
    its kind (the reconciler's)."""
    precondition: Precondition | None = attrs.field(default=None, validator=_callable_or_none)
    """Built only while this holds of the parent and the observed dependencies; None: always."""
    when_served: bool = False
    """Built only while every kind of its children is served (its CRD established)."""

    @property
    def gated(self) -> bool:
        """Whether anything here can hold a child back (else the node is only a name)."""
        return bool(self.depends_on) or self.precondition is not None or self.when_served


@attrs.frozen(kw_only=True, repr=False)
class GatedBuilder:
    """A builder of a component: builds what ``builder`` builds, carrying the component's
    :class:`Dependencies` to the reconciler (``node``). Its name and parent are the inner
    builder's, so errors read as before."""

    builder: Callable[[], Any]
    node: Dependencies

    @property
    def name(self) -> str:
        """The inner builder's readable name."""
        name = getattr(self.builder, "name", None)
        if isinstance(name, str):
            return name
        return str(getattr(self.builder, "__qualname__", None) or repr(self.builder))

    @property
    def parent(self) -> KubeObject | None:
        """The parent the inner builder was bound to, if any."""
        return getattr(self.builder, "parent", None)

    def __call__(self) -> tuple[KubeObject, DesiredState] | Any:
        """Build: what the inner builder returns."""
        return self.builder()

    def __repr__(self) -> str:
        return f"<builder {self.name} of component {self.node.name}>"


def dependencies_of(builder: object) -> Dependencies | None:
    """The component node a builder belongs to, looking through wrappers (overrides,
    ``present_if``); None for a builder of no component."""
    seen = 0
    while builder is not None and seen < 32:
        if isinstance(builder, GatedBuilder):
            return builder.node
        builder = getattr(builder, "builder", None)
        seen += 1
    return None


@attrs.frozen(kw_only=True)
class DependencyGraph:
    """The components of one list of builders, by name, with their order."""

    nodes: Mapping[str, Dependencies] = attrs.field(factory=dict)

    def dependents_of(self, name: str) -> tuple[str, ...]:
        """The components that name ``name`` in their ``depends_on``."""
        return tuple(n.name for n in self.nodes.values() if name in n.depends_on)

    def missing(self) -> tuple[tuple[str, str], ...]:
        """``(component, dependency)`` pairs whose dependency is not in the graph."""
        return tuple((n.name, d) for n in self.nodes.values() for d in n.depends_on
                     if d not in self.nodes)

    def rank(self) -> Mapping[str, int]:
        """Each component's depth: 0 with no (known) dependency, else one more than the
        deepest of them. Creation goes by rising rank, teardown by falling rank."""
        ranks: dict[str, int] = {}

        def depth(name: str) -> int:
            if name not in ranks:
                ranks[name] = 0  # acyclic (checked): no re-entry loops
                deps = [d for d in self.nodes[name].depends_on if d in self.nodes]
                ranks[name] = 1 + max(map(depth, deps)) if deps else 0
            return ranks[name]

        for name in self.nodes:
            depth(name)
        return ranks


def _find_cycle(nodes: Mapping[str, Dependencies]) -> tuple[str, ...] | None:
    """One cycle as ``(a, b, ..., a)``, or None; names outside ``nodes`` are ignored."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(name: str) -> tuple[str, ...] | None:
        state[name] = 1
        path.append(name)
        for dep in nodes[name].depends_on:
            if dep not in nodes:
                continue
            if state.get(dep) == 1:
                return (*path[path.index(dep):], dep)
            if dep not in state and (found := visit(dep)) is not None:
                return found
        path.pop()
        state[name] = 2
        return None

    for name in sorted(nodes):
        if name not in state and (found := visit(name)) is not None:
            return found
    return None


def dependency_graph(builders: Iterable[object], *, complete: bool = False) -> DependencyGraph:
    """The graph of the components among ``builders`` (flattened builders, as ``compose``
    returns them).

    Refuses, with :class:`DependencyError`, one name declared twice with different
    dependencies, and, with :class:`DependencyCycleError`, a cycle (naming it: ``a -> b -> a``).
    With ``complete`` a ``depends_on`` naming a component that is not there is refused too
    (``compose`` leaves that to the caller, who may compose the rest later).
    """
    nodes: dict[str, Dependencies] = {}
    for builder in builders:
        node = dependencies_of(builder)
        if node is None:
            continue
        known = nodes.setdefault(node.name, node)
        if known.depends_on != node.depends_on:
            raise DependencyError(
                f"component {node.name!r} is declared twice with different dependencies "
                f"({known.depends_on!r} and {node.depends_on!r})")
    cycle = _find_cycle(nodes)
    if cycle is not None:
        raise DependencyCycleError(cycle=cycle)
    graph = DependencyGraph(nodes=nodes)
    if complete and (missing := graph.missing()):
        listed = ", ".join(f"{name!r} depends on {dep!r}" for name, dep in missing)
        raise DependencyError(f"unknown component in depends_on: {listed}")
    return graph
