"""A small composite operator whose children are roles and bindings (issue 36, 1): a ``Team``
gets a ServiceAccount, a Role reading its own Secret (``resourceNames`` named after the Team)
and its Pods' logs, a ClusterRole listing Nodes and reading ``/healthz``, their bindings, and
a RoleBinding of the built-in ClusterRole ``view``. None of what these roles grant (secrets,
pods, pods/log, nodes, ``/healthz``) is a kind the operator builds, so only a derived role
that carries the children's rules (and ``bind`` on ``view``) lets it write them.
``optk manifests tests.manifests.teams_operator:operator``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from builders import Component, ResourceBuilder, child_name, compose, resource_builder
from builders import objects as o
from reconciler import Operator

GROUP = "teams.optk.dev"
API_VERSION = f"{GROUP}/v1alpha1"
KIND = "Team"

TEAM_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"teams.{GROUP}"},
    "spec": {
        "group": GROUP, "scope": "Namespaced",
        "names": {"plural": "teams", "singular": "team", "kind": KIND, "listKind": "TeamList"},
        "versions": [{"name": "v1alpha1", "served": True, "storage": True,
                      "subresources": {"status": {}},
                      "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                          "spec": {"type": "object", "properties": {
                              "owner": {"type": "string", "maxLength": 63}}},
                          "status": {"type": "object",
                                     "x-kubernetes-preserve-unknown-fields": True}}}}}],
    },
}

samples = [{"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "blue"},
            "spec": {"owner": "ops"}}]


def _names(parent: Mapping[str, Any]) -> tuple[str, str]:
    meta = parent["metadata"]
    return meta["name"], child_name(meta["namespace"], meta["name"], "nodes", max_length=253)


@resource_builder
def bot(parent: Mapping[str, Any]) -> dict[str, Any]:
    return o.service_account(metadata={"name": child_name(_names(parent)[0], "bot")})


@resource_builder
def reader(parent: Mapping[str, Any]) -> dict[str, Any]:
    name = _names(parent)[0]
    return o.role(metadata={"name": child_name(name, "reader")}, rules=[
        o.policy_rule(api_groups=[""], resources=["secrets"], verbs=["get"],
                      resource_names=[child_name(name, "creds")]),
        o.policy_rule(api_groups=[""], resources=["pods", "pods/log"], verbs=["get", "list"]),
    ])


@resource_builder
def reader_binding(parent: Mapping[str, Any]) -> dict[str, Any]:
    name = _names(parent)[0]
    return o.role_binding(
        metadata={"name": child_name(name, "reader")}, role_name=child_name(name, "reader"),
        subjects=[o.subject(name=child_name(name, "bot"),
                            namespace=parent["metadata"]["namespace"])])


@resource_builder
def nodes(parent: Mapping[str, Any]) -> dict[str, Any]:
    rules = [o.policy_rule(api_groups=[""], resources=["nodes"], verbs=["list"]),
             {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]
    return o.cluster_role(metadata={"name": _names(parent)[1]}, rules=rules)


@resource_builder
def nodes_binding(parent: Mapping[str, Any]) -> dict[str, Any]:
    name, cluster = _names(parent)
    return o.cluster_role_binding(
        metadata={"name": cluster}, role_name=cluster,
        subjects=[o.subject(name=child_name(name, "bot"),
                            namespace=parent["metadata"]["namespace"])])


@resource_builder
def viewer(parent: Mapping[str, Any]) -> dict[str, Any]:
    name = _names(parent)[0]
    return o.role_binding(
        metadata={"name": child_name(name, "view")}, role_name="view", cluster_role=True,
        subjects=[o.subject(name=child_name(name, "bot"),
                            namespace=parent["metadata"]["namespace"])])


def build(parent: Mapping[str, Any]) -> list[ResourceBuilder]:
    """The ServiceAccount, then the roles, then their bindings."""
    return compose(
        Component(name="identity", builders=[bot(parent)]),
        Component(name="roles", depends_on="identity", builders=[
            reader(parent), nodes(parent)]),
        Component(name="bindings", depends_on="roles", builders=[
            reader_binding(parent), nodes_binding(parent), viewer(parent)]),
    )


operator = Operator(api_version=API_VERSION, kind=KIND, build=build, name="teams",
                    install=[TEAM_CRD])


@resource_builder
def aggregate(parent: Mapping[str, Any]) -> dict[str, Any]:
    """A ClusterRole that gathers the rules of others by label: samples cannot tell them."""
    return {**o.cluster_role(metadata={"name": "teams-aggregate"}, rules=[]),
            "aggregationRule": {"clusterRoleSelectors": [
                {"matchLabels": {"teams.optk.dev/aggregate": "true"}}]}}


@resource_builder
def owner_role(parent: Mapping[str, Any]) -> dict[str, Any]:
    """A Role granting ``get`` on the resource the Team's ``spec.owner`` names."""
    owner = (parent.get("spec") or {}).get("owner") or "configmaps"
    return o.role(metadata={"name": child_name(parent["metadata"]["name"], "owner")}, rules=[
        o.policy_rule(api_groups=[""], resources=[owner], verbs=["get"])])


@resource_builder
def owner_binding(parent: Mapping[str, Any]) -> dict[str, Any]:
    name = child_name(parent["metadata"]["name"], "owner")
    return o.role_binding(metadata={"name": name}, role_name=name, subjects=[
        o.subject(name="default", namespace=parent["metadata"]["namespace"])])


def build_extras(parent: Mapping[str, Any]) -> list[ResourceBuilder]:
    """Roles whose rules samples cannot tell: the role needs ``escalate`` (and ``bind``)."""
    return compose(
        Component(name="roles", builders=[aggregate(parent), owner_role(parent)]),
        Component(name="bindings", depends_on="roles", builders=[owner_binding(parent)]),
    )


EXTRAS_NAMESPACE = "extras"

extras = Operator(api_version=API_VERSION, kind=KIND, build=build_extras, name="extras",
                  namespace=EXTRAS_NAMESPACE, install=[TEAM_CRD])
"""``optk manifests tests.manifests.teams_operator:extras``: one namespace, a namespaced role."""
