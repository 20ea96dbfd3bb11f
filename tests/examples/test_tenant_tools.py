"""The commands on the Tenant example (issue 41): ``optk plan`` plans its children in each
cluster its selector matches and names the cluster; ``optk manifests`` grants the cluster
Secrets at home and derives the role for a workload cluster, where the clusters are chosen by
label at run time. Two embedded API servers: the session's (home) and a workload cluster."""

from __future__ import annotations

import base64
import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from examples.tenant.builders import namespace_name
from examples.tenant.crds import API_VERSION, KIND, TENANT_CRD
from examples.tenant.operator import CLUSTERS_NAMESPACE
from reconciler import AlreadyExistsError, KubernetesClient, NotFoundError
from reconciler._commands.manifests import manifests_command
from reconciler._commands.plans import plan_command
from reconciler.embedded import EmbeddedApiServer

TARGET = "examples.tenant.operator:operator"
RBAC = "rbac.authorization.k8s.io"


@pytest.fixture
def client(kube_api: Any) -> KubernetesClient:
    """The management cluster."""
    return KubernetesClient(kube_api.api_client())


@pytest.fixture(scope="module")
def edge(kube_api: Any) -> Iterator[EmbeddedApiServer]:
    """A workload cluster declared in the example's clusters namespace (labelled tier=tools),
    the Secret removed afterwards."""
    client = KubernetesClient(kube_api.api_client())
    with contextlib.suppress(AlreadyExistsError):
        client.create(TENANT_CRD)
    with contextlib.suppress(AlreadyExistsError):
        client.create({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": CLUSTERS_NAMESPACE}})
    with EmbeddedApiServer() as server:
        text = server.kubeconfig_path.read_text()
        client.create({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "tools-edge", "namespace": CLUSTERS_NAMESPACE,
                                    "labels": {"tier": "tools"}},
                       "data": {"kubeconfig": base64.b64encode(text.encode()).decode()}})
        try:
            yield server
        finally:
            with contextlib.suppress(NotFoundError):
                client.delete("v1", "Secret", "tools-edge", namespace=CLUSTERS_NAMESPACE)


def tenant(ns: str, name: str, **selector: str) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterSelector": [{"key": k, "value": v} for k, v in selector.items()],
                     "quota": {"pods": 5}, "admins": ["alice"]}}


def test_plan_places_each_child_in_the_selected_cluster(
        kube_api: Any, edge: EmbeddedApiServer, kube_namespace: str,
        tmp_path: Path) -> None:
    path = tmp_path / "tenant.yaml"
    path.write_text(yaml.safe_dump(tenant(kube_namespace, "acme", tier="tools")))
    out = io.StringIO()
    assert plan_command(TARGET, files=[str(path)], kubeconfig=str(kube_api.kubeconfig_path),
                        out=out) == 0, out.getvalue()
    placed = [line for line in out.getvalue().splitlines() if "[cluster tools-edge]" in line]
    kinds = {line.split()[1].split(".")[0] for line in placed}
    assert kinds == {"Namespace", "ResourceQuota", "Role", "RoleBinding"}, out.getvalue()
    assert all(line.split()[0] == "create" for line in placed)
    remote = KubernetesClient(edge.api_client())
    with pytest.raises(NotFoundError):  # nothing written there
        remote.get("v1", "Namespace", namespace_name(tenant(kube_namespace, "acme")))
    out = io.StringIO()  # a selector no cluster matches: nothing placed
    path.write_text(yaml.safe_dump(tenant(kube_namespace, "acme", tier="nowhere")))
    assert plan_command(TARGET, files=[str(path)], kubeconfig=str(kube_api.kubeconfig_path),
                        out=out) == 0
    assert "[cluster" not in out.getvalue()


def _rules(text: str, kind: str, namespace: str | None = None) -> dict[tuple[str, str], set[str]]:
    for doc in yaml.safe_load_all(text):
        if doc and doc["kind"] == kind and doc["metadata"].get("namespace") == namespace \
                and doc["metadata"]["name"] == "tenant-operator":
            return {(group, resource): set(rule["verbs"]) for rule in doc["rules"]
                    for group in rule.get("apiGroups", ())
                    for resource in rule.get("resources", ())}
    raise AssertionError(f"no {kind} tenant-operator in {namespace}")


def test_manifests_grant_the_cluster_secrets_at_home_and_the_children_in_a_cluster() -> None:
    home = manifests_command(TARGET)
    assert "placed in other clusters (chosen at run time, by label)" in " ".join(
        line.lstrip("# ") for line in home.splitlines() if line.startswith("#"))
    assert _rules(home, "Role", CLUSTERS_NAMESPACE) == {("", "secrets"): {"list", "watch"}}
    cluster_wide = _rules(home, "ClusterRole")
    assert ("", "resourcequotas") not in cluster_wide  # placed kinds: not at home
    assert (RBAC, "rolebindings") not in cluster_wide
    edge = manifests_command(TARGET, cluster="edge-1")
    rules = _rules(edge, "ClusterRole")
    for kind in (("", "namespaces"), ("", "resourcequotas"), (RBAC, "roles"),
                 (RBAC, "rolebindings")):
        assert {"create", "patch", "delete", "list", "watch"} <= rules[kind], kind
    # nothing of home: the parents, the Leases, the Events
    assert ("tenancy.optk.dev", "tenants") not in rules
    assert ("coordination.k8s.io", "leases") not in rules
