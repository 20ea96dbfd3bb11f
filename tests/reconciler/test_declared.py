"""``declared_children``: a parent's builders evaluated once, as every caller sees them.

Pure code, no server: the children come back in the builders' order with the identity of
DESIGN.md section 5 stamped, official client models converted, a failing builder reported by
name (or index) without stopping the others, and the parent never mutated. A Hypothesis property
checks order, identity and the parent's immutability over arbitrary parents.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from kubernetes import client as k8s

from builders import (
    BuilderFailedError,
    Component,
    DesiredState,
    ObjectRef,
    ResourceBuilder,
    child_name,
    compose,
    resource_builder,
)
from builders.names import INSTANCE_LABEL, MANAGED_BY_LABEL, OWNER_UID_LABEL
from reconciler._reconcile.declared import declared_children, unknown_scope

OPERATOR = "declared-test"


def thing(name: str = "t", namespace: str | None = "apps", uid: str = "uid-1",
          **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": uid, "labels": {"team": "a"}}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": meta,
            "spec": {"value": "1", **spec}}


def namespaced(api_version: str, kind: str) -> bool | None:
    """A discovery answer: ClusterRoles are cluster-scoped, Widgets are not served."""
    if kind == "Widget":
        return None
    return kind != "ClusterRole"


@resource_builder
def config(parent: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": child_name(parent["metadata"]["name"], "cfg")},
            "data": {"value": str(parent["spec"]["value"])}}


def service_model(parent: Any) -> ResourceBuilder:
    """A plain closure (not ``@resource_builder``, which converts on its own) returning an
    official client model and its state, as it is."""
    name = child_name(parent["metadata"]["name"], "svc")

    def service() -> tuple[Any, DesiredState]:
        return k8s.V1Service(
            api_version="v1", kind="Service", metadata=k8s.V1ObjectMeta(name=name),
            spec=k8s.V1ServiceSpec(ports=[k8s.V1ServicePort(port=80, target_port=8080)]),
        ), DesiredState.PRESENT

    return service


def config_model(parent: Any) -> ResourceBuilder:
    """A plain closure returning a bare client model (PRESENT)."""
    name = child_name(parent["metadata"]["name"], "model")
    model = k8s.V1ConfigMap(api_version="v1", kind="ConfigMap",
                            metadata=k8s.V1ObjectMeta(name=name), data={"a": "b"})
    return lambda: model


@resource_builder
def role(parent: Any) -> tuple[dict[str, Any], DesiredState]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": child_name(parent["metadata"]["name"], "role")},
            "rules": []}, DesiredState.ABSENT


@resource_builder
def broken(parent: Any) -> dict[str, Any]:
    raise KeyError("spec.missing")


@resource_builder
def careless(parent: Any) -> dict[str, Any]:
    """Edits its parent in place (the slip builders must be protected from)."""
    parent["metadata"].setdefault("labels", {})["stamped-by"] = "careless"
    parent["spec"]["value"] = "changed"
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": child_name(parent["metadata"]["name"], "careless")}}


def builds(*factories: Callable[[Any], ResourceBuilder]) -> Callable[[Any], list[Any]]:
    def build(parent: Any) -> Sequence[ResourceBuilder]:
        return [factory(parent) for factory in factories]

    return build


def test_children_come_in_order_with_identity_stamped() -> None:
    parent = thing()
    declared = declared_children(builds(config, role), parent, operator_name=OPERATOR,
                                 namespaced=namespaced)
    assert not declared.failed
    assert declared.errors == ()
    assert [c.ref for c in declared.children] == [
        ObjectRef(api_version="v1", kind="ConfigMap", name="t-cfg", namespace="apps"),
        ObjectRef(api_version="rbac.authorization.k8s.io/v1", kind="ClusterRole",
                  name="t-role", namespace=None),
    ]
    cfg, cluster_role = declared.children
    assert cfg.state is DesiredState.PRESENT
    assert cluster_role.state is DesiredState.ABSENT
    labels = cfg.obj["metadata"]["labels"]
    assert labels[MANAGED_BY_LABEL] == OPERATOR
    assert labels[INSTANCE_LABEL] == "t"
    assert labels[OWNER_UID_LABEL] == "uid-1"
    (owner,) = cfg.obj["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Thing", "t", "uid-1", True)
    assert cfg.ref == ObjectRef.of(cfg.obj)
    assert "labels" not in cluster_role.obj["metadata"]  # ABSENT: only its name is needed
    assert declared.types == {("v1", "ConfigMap"),
                              ("rbac.authorization.k8s.io/v1", "ClusterRole")}


def test_labels_go_on_every_child_and_the_components_stay() -> None:
    """Issue 35: a caller's labels (the shard label) are stamped here, so the builders keep
    their components (sharding once wrapped them and every gate was lost); the identity's own
    labels win over them, and an ABSENT child gets none."""
    parent = thing()

    def build(parent: Any) -> list[ResourceBuilder]:
        return compose(Component(name="db", builders=[config(parent)]),
                       Component(name="app", depends_on="db", builders=[role(parent)]))

    declared = declared_children(build, parent, operator_name=OPERATOR, namespaced=namespaced,
                                 labels={"optk.dev/shard": "a", MANAGED_BY_LABEL: "other"})
    cfg, cluster_role = declared.children
    assert [(c.node.name, c.node.depends_on) if c.node else None for c in declared.children] == [
        ("db", ()), ("app", ("db",))]
    labels = cfg.obj["metadata"]["labels"]
    assert (labels["optk.dev/shard"], labels[MANAGED_BY_LABEL]) == ("a", OPERATOR)
    assert "labels" not in cluster_role.obj["metadata"]  # ABSENT: only its name is needed
    unlabelled = declared_children(build, parent, operator_name=OPERATOR, namespaced=namespaced)
    assert "optk.dev/shard" not in unlabelled.children[0].obj["metadata"]["labels"]


def test_official_client_models_become_plain_stamped_dicts() -> None:
    declared = declared_children(builds(service_model, config_model), thing(),
                                 operator_name=OPERATOR, namespaced=namespaced)
    assert not declared.failed
    svc, cfg = declared.children
    assert type(svc.obj) is dict
    assert type(cfg.obj) is dict
    assert svc.ref == ObjectRef(api_version="v1", kind="Service", name="t-svc", namespace="apps")
    assert svc.obj["spec"]["ports"] == [{"port": 80, "targetPort": 8080}]
    assert cfg.obj["data"] == {"a": "b"}  # a bare model: PRESENT
    assert cfg.state is DesiredState.PRESENT
    assert cfg.obj["metadata"]["labels"][OWNER_UID_LABEL] == "uid-1"


def test_a_parent_given_as_a_client_model_is_converted() -> None:
    parent = k8s.V1ConfigMap(api_version="v1", kind="ConfigMap", metadata=k8s.V1ObjectMeta(
        name="p", namespace="apps", uid="uid-9"), data={"value": "7"})

    def build(plain: Any) -> list[Any]:
        assert type(plain) is dict
        return [lambda: {"apiVersion": "v1", "kind": "Secret",
                         "metadata": {"name": "p-secret"},
                         "stringData": {"value": plain["data"]["value"]}}]

    (secret,) = declared_children(build, parent, operator_name=OPERATOR,
                                  namespaced=namespaced).children
    assert secret.obj["stringData"] == {"value": "7"}
    assert secret.ref.namespace == "apps"
    assert secret.obj["metadata"]["ownerReferences"][0]["uid"] == "uid-9"


def test_a_failing_builder_is_reported_and_the_others_still_declared() -> None:
    def unscoped(api_version: str, kind: str) -> bool | None:
        if kind == "Service":
            raise RuntimeError("discovery is down")
        return namespaced(api_version, kind)

    declared = declared_children(builds(config, broken, service_model, role), thing(),
                                 operator_name=OPERATOR, namespaced=unscoped)
    assert declared.failed
    assert declared.build_error is None
    assert [c.ref.name for c in declared.children] == ["t-cfg", "t-role"]
    first, second = declared.failures
    assert (first.name, first.index) == ("broken", 1)
    assert isinstance(first.error, BuilderFailedError)
    assert isinstance(first.error.__cause__, KeyError)
    assert (second.name, second.index) == ("#2", 2)  # ran, then stamping failed: by index
    assert str(second.error) == "discovery is down"
    assert declared.errors == (first.error, second.error)


def test_a_failing_build_declares_nothing() -> None:
    def build(parent: Any) -> list[Any]:
        raise ValueError("spec.value must be a number")

    declared = declared_children(build, thing(), operator_name=OPERATOR, namespaced=namespaced)
    assert declared.failed
    assert declared.children == ()
    assert declared.failures == ()
    assert isinstance(declared.build_error, ValueError)
    assert declared.errors == (declared.build_error,)


def test_a_lazy_build_failing_midway_is_a_build_failure() -> None:
    def build(parent: Any) -> Any:
        yield config(parent)
        raise RuntimeError("ran out")

    declared = declared_children(build, thing(), operator_name=OPERATOR, namespaced=namespaced)
    assert declared.children == ()
    assert isinstance(declared.build_error, RuntimeError)


def test_the_parent_is_never_mutated_and_stamping_uses_it_as_given() -> None:
    parent = thing()
    before = copy.deepcopy(parent)
    declared = declared_children(builds(careless, config), parent, operator_name=OPERATOR,
                                 namespaced=namespaced)
    assert parent == before
    careless_child, cfg = declared.children
    # The second builder saw the first one's edit (one private copy per evaluation) ...
    assert cfg.obj["data"] == {"value": "changed"}
    # ... and identity comes from the parent as given.
    assert careless_child.obj["metadata"]["labels"][INSTANCE_LABEL] == "t"
    again = declared_children(builds(config), parent, operator_name=OPERATOR,
                              namespaced=namespaced)
    assert again.children[0].obj["data"] == {"value": "1"}


def test_an_unknown_scope_follows_the_child_or_the_parent() -> None:
    def build(parent: Any) -> list[Any]:
        return [
            lambda: {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}},
            lambda: {"apiVersion": "example.com/v1", "kind": "Widget",
                     "metadata": {"name": "x", "namespace": "elsewhere"}},
        ]

    in_namespace = declared_children(build, thing(), operator_name=OPERATOR,
                                     namespaced=unknown_scope)
    assert [c.ref.namespace for c in in_namespace.children] == ["apps", "elsewhere"]
    cluster = declared_children(build, thing(namespace=None), operator_name=OPERATOR,
                                namespaced=unknown_scope)
    assert [c.ref.namespace for c in cluster.children] == [None, "elsewhere"]


_names = st.from_regex(r"[a-z]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)


@given(
    name=_names,
    namespace=st.one_of(st.none(), _names),
    value=st.text(max_size=20),
    labels=st.dictionaries(st.sampled_from(["a", "b", "team"]), _names, max_size=3),
    picks=st.lists(st.sampled_from([config, role, service_model, config_model, broken]),
                   max_size=6),
)
def test_order_identity_and_parent_hold_for_any_parent(
    name: str, namespace: str | None, value: str, labels: dict[str, str],
    picks: list[Callable[[Any], ResourceBuilder]],
) -> None:
    parent = thing(name, namespace, value=value)
    parent["metadata"]["labels"] = labels
    before = copy.deepcopy(parent)
    declared = declared_children(builds(*picks), parent, operator_name=OPERATOR,
                                 namespaced=namespaced)
    assert parent == before
    working = [i for i, pick in enumerate(picks) if pick is not broken]
    assert [f.index for f in declared.failures] == [
        i for i, pick in enumerate(picks) if pick is broken]
    assert len(declared.children) == len(working)
    for index, child in zip(working, declared.children, strict=True):
        built = picks[index](parent)()
        expected = built[0] if isinstance(built, tuple) else built
        expected_name = (expected.metadata.name if hasattr(expected, "metadata")
                         else expected["metadata"]["name"])
        assert child.ref.name == expected_name
        assert child.ref == ObjectRef.of(child.obj)
        if child.state.is_absent:
            continue
        meta = child.obj["metadata"]
        assert meta["labels"][OWNER_UID_LABEL] == "uid-1"
        assert meta["labels"][MANAGED_BY_LABEL] == OPERATOR
        assert meta.get("namespace") == (namespace if child.ref.kind != "ClusterRole" else None)


def test_a_kind_discovery_does_not_know_takes_the_scope_its_crd_among_the_children_declares(
) -> None:
    """A chart's ``crds/`` and a custom resource of a cluster-scoped kind are built in one
    reconcile, before discovery serves the kind: the custom resource is stamped cluster-scoped
    (no namespace, no owner reference to the namespaced parent) as its CRD says, not guessed
    namespaced from its parent (issue 40: the next reconcile had to patch it)."""

    def crd(kind: str, scope: str) -> dict[str, Any]:
        return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{kind.lower()}s.example.com"},
                "spec": {"group": "example.com", "scope": scope,
                         "names": {"kind": kind, "plural": f"{kind.lower()}s"}}}

    def custom(kind: str) -> dict[str, Any]:
        return {"apiVersion": "example.com/v1", "kind": kind, "metadata": {"name": "x"}}

    def build(parent: Any) -> list[Callable[[], Any]]:
        return [lambda: crd("Gadget", "Cluster"), lambda: crd("Gizmo", "Namespaced"),
                lambda: custom("Gadget"), lambda: custom("Gizmo"), lambda: custom("Widget")]

    found = declared_children(build, thing(), operator_name=OPERATOR, namespaced=unknown_scope)
    gadget, gizmo, widget = (child.obj for child in found.children[2:])
    assert "namespace" not in gadget["metadata"]
    assert "ownerReferences" not in gadget["metadata"]
    assert gizmo["metadata"]["namespace"] == "apps"
    assert gizmo["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert widget["metadata"]["namespace"] == "apps"  # no CRD says: the parent's namespace
    # discovery wins when it knows the kind
    found = declared_children(build, thing(), operator_name=OPERATOR,
                              namespaced=lambda api_version, kind: True)
    assert found.children[2].obj["metadata"]["namespace"] == "apps"
