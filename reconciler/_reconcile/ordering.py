"""Dependencies between children, decided: what a reconcile applies now, what waits and on what.

A parent's builders may group children in components that depend on each other
(``builders.Component(depends_on=..., ready_when=..., precondition=..., when_served=...)``). This
module is the one decision over that graph, for one reconcile: :class:`ChildGates` orders the
declared children (dependencies first; ABSENT ones after, dependents first), and for each one says
whether it may be written now or waits, with a :class:`Wait` naming the child, the rule and what
would wake it (:class:`Watch`: a child whose readiness, or whose being gone, the parent waits for).
It learns what the reconcile wrote as it goes (:meth:`ChildGates.observe`), so a dependency that
is ready the moment it is created (a ConfigMap) unblocks its dependents in the same pass.

Rules: a child of a component is created or updated only when every child of every component it
depends on exists and passes that component's ``ready_when`` (default :func:`default_ready`: a
CRD is Established with its names accepted, workloads as ``reconciler._reconcile.readiness``
checks them, anything else is ready when present), its precondition holds, and, with
``when_served``, its kind is served. An ABSENT child is deleted only once no child of a component
depending on it (transitively) that is being torn down too still exists: "gone" is not in the
caches or answered 404. Children of no component, and every child of a parent whose components
declare nothing, are never held back and keep their order.

A child placed in another cluster (``builders.placed``) takes part like any other under its
:class:`PlacedKey` (its cluster and its ref): a home child may depend on a placed one, a placed
one on a home one or on one in a third cluster; a placed child's live object comes from the
caller's ``placed_live`` (its cluster's cache) and whether its kind is served from
``placed_served`` (its cluster's discovery). No watch is kept for it: any change of a placed
child queues its parent already (``reconciler._cache.remote``); a kind not yet served there is
looked at again by the caller (``placed_kind_waits``).

Boundary: pure. It reads what it is given (the declared children, the live ones, a ``served``
lookup); ``reconciler._reconcile.parents`` executes its answers and
``reconciler._reconcile.waits`` keeps the watches for the driver's event routing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from builders import DesiredState, ObjectRef
from builders.composition import Dependencies, DependencyGraph, ReadyRule, rule_verdict
from builders.health import health_of
from reconciler._base.text import bounded
from reconciler._reconcile.policies import kept_by_policy
from reconciler._reconcile.readiness import Readiness, child_health
from reconciler._reconcile.waits import Wait, Watch

__all__ = [
    "ChildGates",
    "PlacedKey",
    "Served",
    "crd_established",
    "default_ready",
]

Served = Callable[[str, str], bool]
"""``served(api_version, kind)``: whether the cluster serves that kind now."""

_DEFAULT_READINESS = Readiness()
CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")


def crd_established(obj: Mapping[str, Any]) -> str | None:
    """Why a CRD is not ready, by ``builders.health``'s CRD rule (``Established`` true, its
    names not refused, not being deleted); ``None`` when it is. The one CRD readiness rule:
    ordering and activation ask it."""
    health = health_of(obj)
    return None if health.current else (health.message or "not established")


def default_ready(obj: Mapping[str, Any]) -> str | None:
    """The readiness rule of a component without ``ready_when``: CRDs by
    :func:`crd_established`, other kinds by ``readiness.DEFAULT_HEALTH_CHECKS`` (ready when
    present for the kinds it does not list). The health library of issue 24 part A replaces it."""
    if (obj.get("apiVersion"), obj.get("kind")) == CRD:
        return crd_established(obj)
    return child_health(obj, _DEFAULT_READINESS)


@attrs.frozen
class PlacedKey:
    """A placed child's key among the gates: its ``cluster`` and its ``ref`` there."""

    cluster: str
    ref: ObjectRef


Key = ObjectRef | PlacedKey
"""A child's key among the gates: its ref at home, its :class:`PlacedKey` elsewhere."""


def _describe(key: Key) -> str:
    ref = key.ref if isinstance(key, PlacedKey) else key
    where = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
    there = f" in cluster {key.cluster!r}" if isinstance(key, PlacedKey) else ""
    return f"{ref.kind} {where}{there}"


def _version(obj: Mapping[str, Any] | None) -> str | None:
    """The ``resourceVersion`` a gate saw (None: the object is missing, or has none)."""
    version = ((obj or {}).get("metadata") or {}).get("resourceVersion")
    return str(version) if version else None


def _watches(key: Key, **rule: Any) -> tuple[Watch, ...]:
    """What wakes the parent when ``key`` changes: a watch at home; nothing for a placed
    child (its cluster's informer queues the parent on any change)."""
    return () if isinstance(key, PlacedKey) else (Watch(ref=key, **rule),)


@attrs.frozen(kw_only=True)
class _Child:
    index: int
    key: Key
    state: DesiredState
    node: Dependencies | None

    @property
    def ref(self) -> ObjectRef:
        return self.key.ref if isinstance(self.key, PlacedKey) else self.key


class ChildGates:
    """The dependency decisions of one reconcile of one parent.

    ``children`` are ``(key, state, node)`` in the builders' order (a ref, or a
    :class:`PlacedKey`); ``live`` the home children found (by ref), ``placed_live`` a placed
    one's live object (None: none known); ``served`` the kind lookup; ``parent`` what
    preconditions read. Call
    :meth:`ordered` for the order to visit them, :meth:`gate` before writing one and
    :meth:`observe` after.
    """

    def __init__(
        self, children: Sequence[tuple[Key, DesiredState, Dependencies | None]], *,
        parent: Mapping[str, Any], live: Mapping[ObjectRef, Mapping[str, Any]], served: Served,
        default_rule: ReadyRule = default_ready,
        placed_live: Callable[[PlacedKey], Mapping[str, Any] | None] | None = None,
        placed_served: Callable[[PlacedKey], bool] | None = None,
    ) -> None:
        self._children = [_Child(index=i, key=key, state=state, node=node)
                          for i, (key, state, node) in enumerate(children)]
        self._placed_live = placed_live
        self._placed_served = placed_served
        self.placed_kind_waits = False
        """Whether a placed child waited for its kind to be served in its cluster (no watch
        says when it is: the caller looks again later)."""
        self._indices = {c.key: c.index for c in self._children}
        self.waited_on_placed = False
        """Whether a home child waited for a placed one in this pass (its write wakes no
        one: the caller looks again soon)."""
        nodes = {c.node.name: c.node for c in self._children if c.node is not None}
        self.graph = DependencyGraph(nodes=nodes)
        self.active = any(node.gated for node in nodes.values())
        self._ranks = self.graph.rank() if self.active else {}
        self._members: dict[str, list[_Child]] = {}
        for child in self._children:
            if child.node is not None:
                self._members.setdefault(child.node.name, []).append(child)
        self._seen = live  # read on demand: a caller may list a kind only when asked
        self._written: dict[Key, Mapping[str, Any] | None] = {}
        self._parent = parent
        self._served = served
        self._default_rule = default_rule

    # -- order ------------------------------------------------------------------------------

    def _rank(self, child: _Child) -> int:
        return self._ranks.get(child.node.name, 0) if child.node is not None else 0

    def ordered(self) -> list[int]:
        """Indices of the children in the order to visit them: the builders' order when nothing
        is gated; else those to be present by rising rank (dependencies first), then the ABSENT
        ones by falling rank (dependents first), each stable."""
        if not self.active:
            return [c.index for c in self._children]
        present = sorted((c for c in self._children if not c.state.is_absent),
                         key=lambda c: (self._rank(c), c.index))
        absent = sorted((c for c in self._children if c.state.is_absent),
                        key=lambda c: (-self._rank(c), c.index))
        return [c.index for c in (*present, *absent)]

    # -- what is known ----------------------------------------------------------------------

    def observe(self, key: Key, live: Mapping[str, Any] | None) -> None:
        """What a write left: the child's live object, or None when it is gone."""
        self._written[key] = live

    def index_of(self, key: Key) -> int | None:
        """The index of the child ``key``, if declared."""
        return self._indices.get(key)

    def _live(self, key: Key) -> Mapping[str, Any] | None:
        if key in self._written:
            return self._written[key]
        if isinstance(key, PlacedKey):
            return None if self._placed_live is None else self._placed_live(key)
        return self._seen.get(key)

    def _rule(self, node: Dependencies) -> ReadyRule:
        return node.ready_when if node.ready_when is not None else self._default_rule

    # -- decisions --------------------------------------------------------------------------

    def gate(self, index: int) -> Wait | None:
        """None when child ``index`` may be written now, else why it waits."""
        child = self._children[index]
        if not self.active or child.node is None:
            return None
        if child.state.is_absent:
            return self._teardown_gate(child)
        return self._build_gate(child, child.node)

    def _build_gate(self, child: _Child, node: Dependencies) -> Wait | None:
        what = f"{_describe(child.key)} (component {node.name!r})"
        if node.when_served and not self._kind_served(child):
            placed = isinstance(child.key, PlacedKey)
            self.placed_kind_waits = self.placed_kind_waits or placed
            where = f" in cluster {child.key.cluster!r}" if isinstance(child.key, PlacedKey) \
                else ""
            return Wait(ref=child.ref, reason="KindNotServed",
                        message=f"{what} waits until {child.ref.kind} "
                                f"{child.ref.api_version} is served{where}",
                        kinds=() if placed else (child.ref.type_key,))
        observed: dict[str, tuple[Mapping[str, Any], ...]] = {}
        for dep in node.depends_on:
            members = [m for m in self._members.get(dep, ()) if not m.state.is_absent]
            if not members:
                return Wait(ref=child.ref, reason="DependencyNotBuilt",
                            message=f"{what} waits for component {dep!r}, which builds nothing")
            rule = self._rule(self.graph.nodes[dep])
            found: list[Mapping[str, Any]] = []
            for member in members:
                live = self._live(member.key)
                why = "not created yet" if live is None else rule_verdict(rule(live))
                if why is not None:
                    if isinstance(member.key, PlacedKey) and not isinstance(child.key,
                                                                            PlacedKey):
                        self.waited_on_placed = True
                    return Wait(ref=child.ref, reason="DependencyNotReady",
                                message=bounded(f"{what} waits for component {dep!r}: "
                                                f"{_describe(member.key)}: {why}"),
                                watches=_watches(member.key, rule=rule,
                                                 seen_version=_version(live)))
                assert live is not None
                found.append(live)
            observed[dep] = tuple(found)
        if node.precondition is not None:
            why = rule_verdict(node.precondition(self._parent, observed))
            if why is not None:
                keys = [m.key for dep in node.depends_on for m in self._members.get(dep, ())]
                return Wait(ref=child.ref, reason="PreconditionNotMet",
                            message=bounded(f"{what}: precondition not met: {why}"),
                            watches=tuple(w for k in keys for w in _watches(k, rule=_any_change)))
        return None

    def _kind_served(self, child: _Child) -> bool:
        """Whether ``child``'s kind is served where it goes: its own cluster's discovery for
        a placed child (when the caller can ask it), the home cluster's otherwise."""
        if isinstance(child.key, PlacedKey) and self._placed_served is not None:
            return self._placed_served(child.key)
        return self._served(child.ref.api_version, child.ref.kind)

    def _teardown_gate(self, child: _Child) -> Wait | None:
        assert child.node is not None
        for dependent in self._dependents(child.node.name):
            for member in self._members.get(dependent, ()):
                if member.key == child.key or not member.state.is_absent:
                    continue
                live = self._live(member.key)
                if live is not None and not kept_by_policy(live):
                    # a dependent its policy keeps (ignore, no-prune, observe) never goes by
                    # our hand: waiting for it would hold this child, and a deleted parent's
                    # cleanup, for good (issue 38's soak); it stays, the rest goes
                    return Wait(ref=child.ref, reason="DependentsNotGone",
                                message=f"{_describe(child.key)} (component "
                                        f"{child.node.name!r}) waits until "
                                        f"{_describe(member.key)} (component {dependent!r}, "
                                        f"which depends on it) is gone",
                                watches=_watches(member.key))
        return None

    def _dependents(self, name: str) -> list[str]:
        """Every component depending on ``name``, directly or not (the graph is acyclic)."""
        found: list[str] = []
        todo = list(self.graph.dependents_of(name))
        while todo:
            item = todo.pop()
            if item not in found and item != name:
                found.append(item)
                todo.extend(self.graph.dependents_of(item))
        return found


def _any_change(obj: Mapping[str, Any]) -> str | None:
    """A "rule" whose verdict changes with any change of the object's status (what a
    precondition may read)."""
    return repr(obj.get("status"))
