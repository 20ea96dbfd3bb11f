"""The Tenant's builders: a Namespace, a ResourceQuota, a Role and a RoleBinding in every cluster
its selector matches.

Pure functions of ``(tenant, inputs)``: the clusters come from the declared input
:func:`clusters` (``builders.inputs.ClusterSelector`` over the tenant's ``spec.clusterSelector``),
as names and labels; each child is placed in its cluster by name (``builders.placed``). In each
cluster the namespace is a component of its own and the quota, Role and RoleBinding wait for it
(``depends_on``): a component per cluster, so a cluster that cannot be used holds back only its
own children. The tenant namespace's name is the tenant's namespace and name
(``builders.names.child_name``), the same in every cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import builders as b
from builders.inputs import Cluster, ClusterSelector, Inputs
from builders.names import child_name
from builders.objects import child_meta
from examples.tenant.crds import TenantSpec

OPERATOR_NAME = "tenant-operator"
"""The operator's name: its children's ``managed-by`` label and its field manager."""

ADMIN_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["", "apps", "batch"],
     "resources": ["pods", "services", "configmaps", "secrets", "deployments", "statefulsets",
                   "jobs", "cronjobs"],
     "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
]
"""What the tenant's admins may do in their namespace, in every cluster."""


def spec(tenant: Mapping[str, Any]) -> TenantSpec:
    """The tenant's spec, typed."""
    return b.spec_of(tenant, TenantSpec)


def clusters(tenant: Mapping[str, Any]) -> ClusterSelector:
    """The declared input: the clusters whose labels match ``spec.clusterSelector``."""
    return ClusterSelector(spec(tenant).match_labels)


def declare(tenant: Mapping[str, Any]) -> list[ClusterSelector]:
    """``Operator(inputs=declare)``: the clusters are the tenant's only input."""
    return [clusters(tenant)]


def namespace_name(tenant: Mapping[str, Any]) -> str:
    """The tenant namespace in every cluster: ``<namespace>-<name>`` (bounded)."""
    meta = tenant["metadata"]
    return child_name(str(meta.get("namespace") or "tenant"), str(meta["name"]))


def _meta(tenant: Mapping[str, Any], component: str, name: str, *,
          cluster_scoped: bool = False) -> dict[str, Any]:
    """A child's metadata with its identity (DESIGN.md section 5): the labels naming the Tenant
    and the component; never an owner reference (the child lives in another cluster)."""
    return child_meta(tenant, component=component, managed_by=OPERATOR_NAME, name=name,
                      namespace=None if cluster_scoped else namespace_name(tenant),
                      cluster_scoped=cluster_scoped)


def namespace(tenant: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": _meta(tenant, "namespace", namespace_name(tenant), cluster_scoped=True)}


def quota(tenant: Mapping[str, Any], typed: TenantSpec) -> dict[str, Any]:
    limits = typed.quota
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": _meta(tenant, "quota", "tenant-quota"),
            "spec": {"hard": {"requests.cpu": limits.cpu, "requests.memory": limits.memory,
                              "pods": str(limits.pods)}}}


def role(tenant: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": _meta(tenant, "rbac", "tenant-admin"),
            "rules": ADMIN_RULES}


def role_binding(tenant: Mapping[str, Any], typed: TenantSpec) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": _meta(tenant, "rbac", "tenant-admins"),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": "tenant-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}
                         for name in typed.admins]}


def in_cluster(tenant: Mapping[str, Any], typed: TenantSpec,
               cluster: Cluster) -> list[b.Component]:
    """The tenant's children in ``cluster``: its namespace, then what lives in it."""
    where = cluster.name
    made_namespace = namespace(tenant)
    made = [quota(tenant, typed), role(tenant), role_binding(tenant, typed)]
    return [
        b.Component(name=f"namespace-{where}",
                    builders=[b.placed(_present(made_namespace), cluster=where)]),
        b.Component(name=f"access-{where}", depends_on=f"namespace-{where}",
                    builders=[b.placed(_present(obj), cluster=where) for obj in made]),
    ]


def build(tenant: Mapping[str, Any], inputs: Inputs) -> list[b.ResourceBuilder]:
    """Every child of ``tenant``: its four children in each matching cluster."""
    typed = spec(tenant)
    return b.compose(*(in_cluster(tenant, typed, c) for c in inputs.clusters(clusters(tenant))))


def _present(obj: dict[str, Any]) -> b.ResourceBuilder:
    """A builder of ``obj``, PRESENT."""
    return lambda: (obj, b.DesiredState.PRESENT)
