"""The dependency decisions (reconciler._reconcile.ordering), pure: examples, and a Hypothesis state
machine over random dependency graphs and readiness events.

The machine plays a cluster in a dict: a reconcile visits the children in ``ChildGates.ordered()``
order and writes those ``gate`` lets through; readiness flips and deletions finish as events. It
checks that a dependent is never written before every child of its dependencies exists and is
ready, that teardown never deletes a child while a dependent child being torn down exists, and that
when every rule eventually holds the parent converges (everything created; everything gone).
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from builders import DesiredState, ObjectRef
from builders.composition import Dependencies
from builders.health import health_of
from reconciler._reconcile.ordering import (
    ChildGates,
    PlacedKey,
    crd_established,
    default_ready,
)
from reconciler._reconcile.waits import WaitRegistry


def _ready(obj: Any) -> str | None:
    return None if (obj.get("status") or {}).get("ready") else "not ready yet"


def _ref(name: str) -> ObjectRef:
    return ObjectRef(api_version="v1", kind="ConfigMap", name=name, namespace="ns")


def test_default_rule_waits_for_an_established_crd_and_an_available_deployment() -> None:
    crd: dict[str, Any] = {"apiVersion": "apiextensions.k8s.io/v1",
                           "kind": "CustomResourceDefinition", "metadata": {"name": "x"}}
    assert default_ready(crd) == "install in progress: not established"
    crd["status"] = {"conditions": [{"type": "Established", "status": "True"},
                                    {"type": "NamesAccepted", "status": "True"}]}
    assert crd_established(crd) is None
    assert default_ready(crd) is None
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"generation": 1},
                  "spec": {"replicas": 2}, "status": {"observedGeneration": 1,
                                                      "availableReplicas": 1}}
    assert default_ready(deployment) == "replicas: 0/2"  # kstatus: no pods counted yet
    assert default_ready({"apiVersion": "v1", "kind": "ConfigMap"}) is None


def test_a_waiting_child_names_itself_its_component_the_dependency_and_the_rule() -> None:
    crd = Dependencies(name="crd")
    app = Dependencies(name="app", depends_on=("crd",))
    refs = [_ref("crd"), _ref("app")]
    gates = ChildGates([(refs[1], DesiredState.PRESENT, app), (refs[0], DesiredState.PRESENT, crd)],
                       parent={}, live={}, served=lambda *_: True,
                       default_rule=_ready)
    assert gates.ordered() == [1, 0]  # the dependency first
    assert gates.gate(1) is None
    wait = gates.gate(0)
    assert wait is not None
    assert wait.reason == "DependencyNotReady"
    assert wait.message == ("ConfigMap ns/app (component 'app') waits for component 'crd': "
                            "ConfigMap ns/crd: not created yet")
    gates.observe(refs[0], {"status": {"ready": False}})
    wait = gates.gate(0)
    assert wait is not None
    assert "ConfigMap ns/crd: not ready yet" in wait.message
    registry = WaitRegistry()
    registry.replace(("ns", "parent"), [wait])
    old = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "crd", "namespace": "ns"}, "status": {"ready": False}}
    # A change that does not change the verdict wakes no one; one that does wakes the parent.
    assert registry.wakes("MODIFIED", old, {**old, "data": {"x": "1"}}) == []
    assert registry.wakes("MODIFIED", old, {**old, "status": {"ready": True}}) == [("ns", "parent")]
    gates.observe(refs[0], {"status": {"ready": True}})
    assert gates.gate(0) is None


def test_a_dependent_its_policy_keeps_does_not_hold_its_dependencies_teardown() -> None:
    # issue 38's soak: an Observer whose ServiceAccount the user marked optk.dev/policy: ignore
    # was deleted; the teardown waited for that dependent to go, which never happens by the
    # toolkit's hand: the cleanup finalizer stayed for good
    crd = Dependencies(name="crd")
    app = Dependencies(name="app", depends_on=("crd",))
    refs = [_ref("crd"), _ref("app")]
    for policy, waits in (("ignore", False), ("no-prune", False), ("observe", False),
                          ("create-only", True), (None, True), ("bogus", True)):
        annotations = {} if policy is None else {"optk.dev/policy": policy}
        kept = {"metadata": {"name": "app", "annotations": annotations}}
        gates = ChildGates([(refs[0], DesiredState.ABSENT, crd),
                            (refs[1], DesiredState.ABSENT, app)],
                           parent={}, live={refs[1]: kept, refs[0]: {"metadata": {}}},
                           served=lambda *_: True)
        wait = gates.gate(0)
        assert (wait is not None) == waits, (policy, wait)
        if waits:
            assert wait is not None
            assert wait.reason == "DependentsNotGone"


def test_preconditions_and_kinds_not_served_hold_a_child_back() -> None:
    served: set[tuple[str, str]] = set()
    monitor = Dependencies(name="monitor", when_served=True)
    gated = Dependencies(name="gated", precondition=lambda parent, observed: (
        parent.get("go") or "parent says no"))
    ref = ObjectRef(api_version="monitoring.coreos.com/v1", kind="ServiceMonitor", name="m",
                    namespace="ns")
    gates = ChildGates([(ref, DesiredState.PRESENT, monitor),
                        (_ref("g"), DesiredState.PRESENT, gated)],
                       parent={}, live={}, served=lambda v, k: (v, k) in served)
    wait = gates.gate(0)
    assert wait is not None
    assert wait.reason == "KindNotServed"
    assert wait.kinds == (("monitoring.coreos.com/v1", "ServiceMonitor"),)
    wait = gates.gate(1)
    assert wait is not None
    assert wait.reason == "PreconditionNotMet"
    assert "precondition not met: parent says no" in wait.message
    served.add(ref.type_key)
    assert gates.gate(0) is None


def test_without_dependencies_nothing_waits_and_the_order_is_the_builders() -> None:
    plain = Dependencies(name="plain")
    children = [(_ref(str(i)), DesiredState.ABSENT if i % 2 else DesiredState.PRESENT,
                 plain if i % 3 else None) for i in range(6)]
    gates = ChildGates(children, parent={}, live={}, served=lambda *_: False)
    assert gates.ordered() == list(range(6))
    assert all(gates.gate(i) is None for i in range(6))


class DependencyMachine(RuleBasedStateMachine):
    """A parent's components over a random acyclic graph, reconciled against a dict cluster."""

    @initialize(data=st.data())
    def setup(self, data: st.DataObject) -> None:
        count = data.draw(st.integers(1, 5), label="components")
        self.names = [f"c{i}" for i in range(count)]
        self.nodes = {}
        for i, name in enumerate(self.names):
            deps = data.draw(st.lists(st.sampled_from(self.names[:i]), unique=True, max_size=2)
                             if i else st.just([]), label=f"deps of {name}")
            self.nodes[name] = Dependencies(name=name, depends_on=tuple(deps))
        sizes = {name: data.draw(st.integers(1, 2), label=f"children of {name}")
                 for name in self.names}
        self.children = [(_ref(f"{name}-{j}"), name) for name in self.names
                         for j in range(sizes[name])]
        self.cluster: dict[ObjectRef, dict[str, Any]] = {}
        self.deleting: set[ObjectRef] = set()
        self.tearing_down = False

    def _gates(self) -> ChildGates:
        state = DesiredState.ABSENT if self.tearing_down else DesiredState.PRESENT
        return ChildGates([(ref, state, self.nodes[name]) for ref, name in self.children],
                          parent={}, live=dict(self.cluster), served=lambda *_: True,
                          default_rule=_ready)

    def _members(self, name: str) -> list[ObjectRef]:
        return [ref for ref, owner in self.children if owner == name]

    def _dependents(self, name: str) -> set[str]:
        found: set[str] = set()
        todo = [n for n, node in self.nodes.items() if name in node.depends_on]
        while todo:
            item = todo.pop()
            if item not in found:
                found.add(item)
                todo += [n for n, node in self.nodes.items() if item in node.depends_on]
        return found

    @rule()
    def reconcile(self) -> None:
        gates = self._gates()
        for index in gates.ordered():
            ref, name = self.children[index]
            if gates.gate(index) is not None:
                continue
            if self.tearing_down:
                if ref in self.cluster and ref not in self.deleting:
                    for dependent in self._dependents(name):
                        for other in self._members(dependent):
                            assert other not in self.cluster, (
                                f"{ref.name} deleted while its dependent {other.name} exists")
                    self.deleting.add(ref)  # gone only once its deletion finishes
                gates.observe(ref, self.cluster.get(ref))
                continue
            for dep in self.nodes[name].depends_on:
                for other in self._members(dep):
                    live = self.cluster.get(other)
                    assert live is not None, f"{ref.name} written before {other.name} existed"
                    assert _ready(live) is None, (
                        f"{ref.name} written before its dependency {other.name} was ready")
            if ref not in self.cluster:
                self.cluster[ref] = {"metadata": {"name": ref.name}, "status": {"ready": False}}
            gates.observe(ref, self.cluster[ref])

    @precondition(lambda self: any(not o["status"]["ready"] for o in self.cluster.values()))
    @rule(data=st.data())
    def becomes_ready(self, data: st.DataObject) -> None:
        pending = sorted((r for r, o in self.cluster.items() if not o["status"]["ready"]),
                         key=str)
        ref = data.draw(st.sampled_from(pending))
        self.cluster[ref] = {**self.cluster[ref], "status": {"ready": True}}

    @precondition(lambda self: bool(self.deleting))
    @rule(data=st.data())
    def deletion_finishes(self, data: st.DataObject) -> None:
        ref = data.draw(st.sampled_from(sorted(self.deleting, key=str)))
        self.deleting.discard(ref)
        self.cluster.pop(ref, None)

    @precondition(lambda self: not self.tearing_down)
    @rule()
    def tear_down(self) -> None:
        self.tearing_down = True

    @rule()
    def every_rule_eventually_holds(self) -> None:
        """Readiness and deletions all come through: a bounded number of reconciles converge."""
        for _ in range(2 * len(self.children) + 2):
            self.reconcile()
            for ref in list(self.cluster):
                self.cluster[ref] = {**self.cluster[ref], "status": {"ready": True}}
            for ref in list(self.deleting):
                self.deleting.discard(ref)
                self.cluster.pop(ref, None)
        if self.tearing_down:
            assert not self.cluster, f"not torn down: {sorted(r.name for r in self.cluster)}"
        else:
            assert set(self.cluster) == {ref for ref, _ in self.children}
            gates = self._gates()
            assert all(gates.gate(i) is None for i in range(len(self.children)))

    @invariant()
    def deleting_children_exist(self) -> None:
        assert self.deleting <= set(self.cluster) | self.deleting


DependencyMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=25,
                                               deadline=None)
TestDependencyMachine = DependencyMachine.TestCase


def test_crd_readiness_is_the_health_librarys_rule_whatever_the_order_of_conditions() -> None:
    def crd(*conditions: tuple[str, str], deleting: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": "x"}
        if deleting:
            meta["deletionTimestamp"] = "2026-12-06T00:00:00Z"
        return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": meta,
                "status": {"conditions": [{"type": t, "status": s} for t, s in conditions]}}

    refused = crd(("Established", "True"), ("NamesAccepted", "False"))
    assert crd_established(refused) == "names not accepted"
    assert crd_established(crd(*reversed([("Established", "True"),
                                          ("NamesAccepted", "False")]))) == "names not accepted"
    assert crd_established(crd(("NamesAccepted", "True"), ("Established", "True"))) is None
    assert crd_established(crd(("Established", "True"), deleting=True)) == "being deleted"
    for obj in (refused, crd(("Established", "True")), crd()):
        assert (crd_established(obj) is None) == health_of(obj).current


def test_a_home_child_waits_for_a_placed_dependency_read_from_its_cluster() -> None:
    """Gates across clusters: a placed child is keyed by (cluster, ref), its live object comes
    from ``placed_live``; the same name at home is another child."""
    remote = PlacedKey("edge-1", _ref("db"))
    seen: dict[PlacedKey, dict[str, Any]] = {}
    gates = ChildGates(
        [(_ref("app"), DesiredState.PRESENT, Dependencies(name="app", depends_on=("db",))),
         (_ref("db"), DesiredState.PRESENT, None),  # the same name at home: no component
         (remote, DesiredState.PRESENT, Dependencies(name="db", ready_when=_ready))],
        parent={}, live={_ref("db"): {"status": {"ready": True}}}, served=lambda a, k: True,
        placed_live=seen.get)
    assert gates.ordered() == [1, 2, 0]  # the dependency first
    wait = gates.gate(0)
    assert wait is not None
    assert wait.reason == "DependencyNotReady"
    assert "ConfigMap ns/db in cluster 'edge-1': not created yet" in wait.message
    assert wait.watches == ()  # its cluster's informer wakes the parent, not a home watch
    assert gates.waited_on_placed
    assert gates.gate(2) is None  # nothing gates the placed one itself
    seen[remote] = {"status": {"ready": False}}
    wait = gates.gate(0)
    assert wait is not None
    assert "not ready yet" in wait.message
    gates.observe(remote, {"status": {"ready": True}})  # what this pass's write left
    assert gates.gate(0) is None
    assert gates.index_of(remote) == 2
    assert gates.index_of(PlacedKey("edge-2", _ref("db"))) is None
