"""The Observer's builders: the Thanos operator (CRD, RBAC, ServiceAccount, Deployment) and a
``Thanos`` resource, all from one Observer. Pure: parent dict in, child dicts out.

The children form four components that depend on each other (``build``): CRD -> (Established)
-> RBAC and ServiceAccount -> operator Deployment (Available) -> the ``Thanos``. While
``spec.thanos`` is absent or ``enabled: false`` every child is ABSENT, and the reconciler deletes
them in reverse, each once its dependents are gone (the cluster-scoped ones included).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from builders import (
    Component,
    ResourceBuilder,
    child_meta,
    child_name,
    compose,
    helm,
    present_if,
    resource_builder,
    shared,
)
from builders import objects as o
from examples.observer.crds import DEFAULT_OPERATOR_IMAGE
from examples.thanos.builders import OPERATOR_NAME as THANOS_OPERATOR_NAME
from examples.thanos.crds import API_VERSION as THANOS_API_VERSION
from examples.thanos.crds import GROUP as THANOS_GROUP
from examples.thanos.crds import KIND as THANOS_KIND
from examples.thanos.crds import SERVICE_MONITOR_GROUP, THANOS_CRD

OPERATOR_NAME = "observer"
"""The Observer operator's name (the children's ``managed-by`` label)."""

THANOS_OPERATOR_TARGET = "examples.thanos.operator:operator"
"""What the Deployment runs with ``optk run``."""

PROMETHEUS_OPERATOR_CHART = Path(__file__).resolve().parent / "charts" / "prometheus-operator"
"""The Prometheus-operator-like chart kept beside the example (its CRDs in ``crds/``, helpers,
RBAC, Deployment and Service), installed from ``spec.prometheusOperatorChart``."""

PROMETHEUS_OPERATOR = "prometheus-operator"
"""The component of the chart's objects (its CRDs are ``<observer>-crds``)."""


def thanos_block(parent: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Observer's ``spec.thanos`` when it is switched on, else None."""
    block = (parent.get("spec") or {}).get("thanos")
    if not isinstance(block, Mapping) or block.get("enabled") is False:
        return None
    return block


def chart_values(parent: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Observer's ``spec.prometheusOperatorChart`` (the chart's values; ``{}``: its
    defaults), or None when the block is absent (the chart is not installed)."""
    block = (parent.get("spec") or {}).get("prometheusOperatorChart")
    return block if isinstance(block, Mapping) else None


def prometheus_operator(parent: Mapping[str, Any], *, shared_crd: bool = False) -> list[Component]:
    """The chart's components (``builders.helm``), released as the Observer in its namespace
    with its ``spec.prometheusOperatorChart`` as values: the CRDs of ``crds/`` first, then the
    ServiceAccount, RBAC, Service and Deployment (:data:`PROMETHEUS_OPERATOR`). None without
    the block. ``shared_crd`` shares the chart's CRDs between Observers as the Thanos CRD is."""
    values = chart_values(parent)
    if values is None:
        return []
    meta = parent["metadata"]
    chart = helm.chart(PROMETHEUS_OPERATOR_CHART, values=values, release=meta["name"],
                       namespace=meta["namespace"], parent=parent, managed_by=OPERATOR_NAME)
    components = chart.components(PROMETHEUS_OPERATOR)
    if shared_crd and chart.crds:
        components[0] = Component(name=chart.crds_component,
                                  builders=[shared(crd) for crd in chart.crds])
    return components


def _names(parent: Mapping[str, Any]) -> tuple[str, str]:
    """(namespaced name, cluster-wide name) of the operator's objects."""
    meta = parent["metadata"]
    local = child_name(meta["name"], "thanos-operator")
    return local, child_name(meta["namespace"], meta["name"], "thanos-operator", max_length=253)


def _meta(parent: Mapping[str, Any], component: str, name: str, *,
          cluster_scoped: bool = False) -> dict[str, Any]:
    """A child's metadata with its identity (DESIGN.md section 5): the labels naming the Observer
    and the component, and a controller owner reference where Kubernetes allows one (not on a
    cluster-scoped child of this namespaced parent)."""
    return child_meta(parent, component=component, managed_by=OPERATOR_NAME, name=name,
                      cluster_scoped=cluster_scoped)


@resource_builder
def thanos_crd(parent: Mapping[str, Any]) -> dict[str, Any]:
    """The Thanos CRD, as ``examples.thanos.crds`` defines it (cluster-scoped)."""
    crd = copy.deepcopy(THANOS_CRD)
    crd["metadata"] = _meta(parent, "crd", crd["metadata"]["name"], cluster_scoped=True)
    return crd


_RULES = (
    o.policy_rule(api_groups=[THANOS_GROUP], resources=["thanoses", "thanoses/status"],
                  verbs=["get", "list", "watch", "patch", "update"]),
    o.policy_rule(api_groups=["apps"], resources=["deployments", "statefulsets"],
                  verbs=["get", "list", "watch", "create", "patch", "update", "delete"]),
    o.policy_rule(api_groups=[""], resources=["services", "configmaps"],
                  verbs=["get", "list", "watch", "create", "patch", "update", "delete"]),
    o.policy_rule(api_groups=["networking.k8s.io"], resources=["ingresses"],
                  verbs=["get", "list", "watch", "create", "patch", "update", "delete"]),
    o.policy_rule(api_groups=[SERVICE_MONITOR_GROUP], resources=["servicemonitors"],
                  verbs=["get", "list", "watch", "create", "patch", "update", "delete"]),
    o.policy_rule(api_groups=["apiextensions.k8s.io"], resources=["customresourcedefinitions"],
                  verbs=["get", "list", "watch", "create"]),
    o.policy_rule(api_groups=["", "events.k8s.io"], resources=["events"],
                  verbs=["create", "patch"]),
    o.policy_rule(api_groups=["coordination.k8s.io"], resources=["leases"],
                  verbs=["get", "create", "update", "patch"]),
)


@resource_builder
def cluster_role(parent: Mapping[str, Any]) -> dict[str, Any]:
    """What the Thanos operator may do, cluster-wide."""
    return o.cluster_role(metadata=_meta(parent, "rbac", _names(parent)[1], cluster_scoped=True),
                          rules=_RULES)


@resource_builder
def cluster_role_binding(parent: Mapping[str, Any]) -> dict[str, Any]:
    """Grants the ClusterRole to the operator's ServiceAccount."""
    local, cluster = _names(parent)
    return o.cluster_role_binding(
        metadata=_meta(parent, "rbac", cluster, cluster_scoped=True), role_name=cluster,
        subjects=[o.subject(name=local, namespace=parent["metadata"]["namespace"])],
    )


@resource_builder
def service_account(parent: Mapping[str, Any]) -> dict[str, Any]:
    """The identity the Thanos operator runs as."""
    return o.service_account(metadata=_meta(parent, "rbac", _names(parent)[0]))


@resource_builder
def operator_deployment(parent: Mapping[str, Any]) -> dict[str, Any]:
    """One replica of ``optk run examples.thanos.operator:operator``."""
    local = _names(parent)[0]
    block = thanos_block(parent) or {}
    selector = {"app.kubernetes.io/name": THANOS_OPERATOR_NAME,
                "app.kubernetes.io/instance": parent["metadata"]["name"]}
    return o.deployment(
        metadata=_meta(parent, "operator", local), selector_labels=selector, replicas=1,
        service_account_name=local,
        containers=[o.container(
            name="operator", image=str(block.get("operatorImage") or DEFAULT_OPERATOR_IMAGE),
            command=["optk", "run", THANOS_OPERATOR_TARGET],
        )],
    )


@resource_builder
def thanos(parent: Mapping[str, Any]) -> dict[str, Any]:
    """The ``Thanos`` resource the installed operator reconciles, from ``spec.thanos.spec``."""
    block = thanos_block(parent) or {}
    return {"apiVersion": THANOS_API_VERSION, "kind": THANOS_KIND,
            "metadata": _meta(parent, "thanos", parent["metadata"]["name"]),
            "spec": copy.deepcopy(dict(block.get("spec") or {}))}


def build(parent: Mapping[str, Any], *, shared_crd: bool = False) -> list[ResourceBuilder]:
    """The Observer's children as four components that install in order: the CRD, then (once it
    is Established) the RBAC and ServiceAccount, then the operator's Deployment, then (once the
    Deployment is Available) the ``Thanos`` resource. With the ``thanos`` block off every child
    is ABSENT, so they are deleted in reverse: the ``Thanos`` first, the CRD last, each once the
    ones that depend on it are gone.

    The CRD is cluster-wide: by default it belongs to the first Observer that creates it, and a
    second one skips it, naming that Observer; ``shared_crd`` declares it shared
    (``builders.shared``): kept while any Observer builds it, deleted with the last one.

    With ``spec.prometheusOperatorChart`` the chart's components come first
    (:func:`prometheus_operator`) and the ``Thanos`` waits for its Deployment too, as for the
    Thanos operator's."""
    on = thanos_block(parent) is not None
    chart = prometheus_operator(parent, shared_crd=shared_crd)
    waits_for = ("crd", "operator", PROMETHEUS_OPERATOR) if chart else ("crd", "operator")

    def part(builder: ResourceBuilder) -> ResourceBuilder:
        return present_if(on, builder)

    return compose(
        chart,
        Component(name="crd", builders=[
            shared(part(thanos_crd(parent))) if shared_crd else part(thanos_crd(parent))]),
        Component(name="rbac", depends_on="crd", builders=[
            part(cluster_role(parent)), part(cluster_role_binding(parent)),
            part(service_account(parent))]),
        Component(name="operator", depends_on="rbac",
                  builders=[part(operator_deployment(parent))]),
        Component(name="thanos", depends_on=waits_for,
                  builders=[part(thanos(parent))]),
    )
