"""The derived role of an operator whose children are roles and bindings (issue 36, 1), pure:
the union of the rules its child roles grant, ``resourceNames`` kept only when they do not
follow the parent, ``bind`` on a bound role it does not build, ``escalate`` only for rules that
samples cannot tell (they follow the parent's spec, or an aggregationRule gathers them).
``test_rbac_children_real.py`` shows the role at work on the real control plane."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from builders import child_name, resource_builder
from builders import objects as o
from reconciler import Operator, Reporting
from reconciler._commands.manifests import ManifestOptions, generated_parents, manifests, render
from reconciler._commands.rbac import PolicyRule, derive_rules, operator_facts
from tests.manifests import teams_operator

_RBAC = "rbac.authorization.k8s.io"
_PARENT = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "a", "namespace": "apps"}, "data": {"extra": "widgets"}}


def _grants(rules: tuple[PolicyRule, ...]) -> dict[tuple[str | None, str, str, tuple[str, ...]],
                                                    tuple[str, ...]]:
    """(namespace, group, resource or URL, names) -> verbs."""
    out: dict[tuple[str | None, str, str, tuple[str, ...]], tuple[str, ...]] = {}
    for rule in rules:
        for url in rule.non_resource_urls:
            out[(rule.namespace, "", url, ())] = rule.verbs
        for group in rule.api_groups:
            for resource in rule.resources:
                out[(rule.namespace, group, resource, rule.resource_names)] = rule.verbs
    return out


def _operator(*builders: Any, namespace: str | None = None) -> Operator:
    def build(parent: Mapping[str, Any]) -> list[Any]:
        return [b(parent) for b in builders]

    return Operator(
        api_version="v1", kind="ConfigMap", name="maker", build=build, namespace=namespace,
        reporting=Reporting(events=False),
    )


def test_the_observer_role_carries_what_its_child_cluster_role_grants() -> None:
    from examples.observer.operator import operator

    facts = operator_facts(operator)
    rules = derive_rules(facts, parents=[], generated=generated_parents(facts.parent_crd,
                                                                        count=25),
                         lease_namespace="observer-system")
    grants = _grants(rules)
    for group, resource in (("apps", "statefulsets"), ("", "services"),
                            ("networking.k8s.io", "ingresses"),
                            ("monitoring.coreos.com", "servicemonitors"),
                            ("monitoring.optk.dev", "thanoses/status")):
        assert "update" in grants[(None, group, resource, ())], (group, resource)
    assert not any({"bind", "escalate"} & set(r.verbs) for r in rules), rules


def test_child_roles_are_unioned_and_names_that_follow_the_parent_dropped() -> None:
    rules = derive_rules(operator_facts(teams_operator.operator),
                         parents=teams_operator.samples, lease_namespace="teams-system")
    grants = _grants(rules)
    assert grants[(None, "", "secrets", ())] == ("get",)  # resourceNames: <team>-creds
    secrets = next(r for r in rules if r.resources == ("secrets",))
    assert "resourceNames follow the parent" in secrets.reason
    assert grants[(None, "", "pods", ())] == ("get", "list")
    assert grants[(None, "", "pods/log", ())] == ("get", "list")
    assert grants[(None, "", "nodes", ())] == ("list",)
    assert grants[(None, "", "/healthz", ())] == ("get",)
    # the built-in `view` is bound by name; the parent's own roles need no bind
    assert grants[(None, _RBAC, "clusterroles", ("view",))] == ("bind",)
    assert [r for r in rules if {"bind", "escalate"} & set(r.verbs)] == [
        r for r in rules if r.resource_names == ("view",)]


def test_fixed_names_are_kept_and_a_namespaced_role_holds_a_roles_rules() -> None:
    @resource_builder
    def reader(parent: Mapping[str, Any]) -> dict[str, Any]:
        return o.role(metadata={"name": child_name(parent["metadata"]["name"], "reader")},
                      rules=[o.policy_rule(api_groups=[""], resources=["configmaps"],
                                           verbs=["get"], resource_names=["kube-root-ca.crt"])])

    @resource_builder
    def lister(parent: Mapping[str, Any]) -> dict[str, Any]:
        return o.cluster_role(metadata={"name": "maker-lister"}, rules=[
            o.policy_rule(api_groups=["apps"], resources=["replicasets"], verbs=["list"])])

    facts = operator_facts(_operator(reader, lister, namespace="apps"))
    grants = _grants(derive_rules(facts, parents=[_PARENT], lease_namespace="ops",
                                  namespaced=True))
    assert grants[("apps", "", "configmaps", ("kube-root-ca.crt",))] == ("get",)
    assert grants[(None, "apps", "replicasets", ())] == ("list",)  # a ClusterRole's: cluster


def test_escalate_and_bind_only_where_samples_cannot_tell_the_rules() -> None:
    @resource_builder
    def aggregate(parent: Mapping[str, Any]) -> dict[str, Any]:
        return {**o.cluster_role(metadata={"name": "maker-aggregate"}, rules=[]),
                "aggregationRule": {"clusterRoleSelectors": [
                    {"matchLabels": {"example.com/aggregate-to-maker": "true"}}]}}

    @resource_builder
    def extra(parent: Mapping[str, Any]) -> dict[str, Any]:  # resources from the spec
        return o.role(metadata={"name": child_name(parent["metadata"]["name"], "extra")},
                      rules=[o.policy_rule(api_groups=["example.com"],
                                           resources=[parent["data"]["extra"]], verbs=["get"])])

    @resource_builder
    def extra_binding(parent: Mapping[str, Any]) -> dict[str, Any]:
        name = child_name(parent["metadata"]["name"], "extra")
        return o.role_binding(metadata={"name": name}, role_name=name, subjects=[
            o.subject(name="default", namespace=parent["metadata"]["namespace"])])

    facts = operator_facts(_operator(aggregate, extra, extra_binding))
    rules = derive_rules(facts, parents=[_PARENT], lease_namespace="ops")
    grants = _grants(rules)
    # escalate is checked without the name on a create: never limited by name
    assert "escalate" in grants[(None, _RBAC, "clusterroles", ())]
    assert "aggregationRule" in next(
        r.reason for r in rules if "escalate" in r.verbs and "clusterroles" in r.resources)
    assert not any("escalate" in r.verbs and r.resource_names for r in rules)
    # the Role's rules follow the parent's spec: escalate on roles (its name follows the
    # parent: any name), bind to bind it, and none of its rules copied
    assert "escalate" in grants[(None, _RBAC, "roles", ())]
    assert "bind" in grants[(None, _RBAC, "roles", ())]
    assert not any(r.api_groups == ("example.com",) for r in rules)
    escalate = next(r for r in rules if "escalate" in r.verbs and "roles" in r.resources)
    assert "cannot be known from samples" in escalate.reason


def test_the_stream_comments_each_rule_and_writes_non_resource_urls() -> None:
    facts = operator_facts(teams_operator.operator)
    options = ManifestOptions(target="tests.manifests.teams_operator:operator",
                              namespace="teams-system", image="i")
    text = render(manifests(facts, options, parents=teams_operator.samples), header="h")
    assert "- nonResourceURLs:\n  - /healthz\n  verbs:\n  - get\n" in text
    assert "# granted by a child ClusterRole it writes" in text
    assert "# bind: a child RoleBinding binds the ClusterRole view" in text
