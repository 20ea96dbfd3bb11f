"""The commands with children placed in other clusters (issue 41): ``optk plan`` and ``optk
trace`` say each child's cluster, ``optk manifests`` derives a role per target cluster.

Two embedded API servers over HTTP: the session's server is the operator's own cluster (its
parents, its cluster Secrets in ``fleet-commands``, the home children), a second one the
workload cluster ``edge-1``. The operator: ``tests.reconciler.placed_operator``.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler import KubernetesClient, NotFoundError, ParentReconciler
from reconciler._commands.cli import main
from reconciler._commands.manifests import manifests_command
from reconciler._commands.plans import plan_command
from reconciler._commands.traces import trace_command
from reconciler.embedded import EmbeddedApiServer
from tests.reconciler import placed_operator
from tests.reconciler.conftest import install_crd

API = "sites.optk.dev/v1"
TARGET = "tests.reconciler.placed_operator"


@pytest.fixture(scope="module")
def edge() -> Iterator[EmbeddedApiServer]:
    """The workload cluster ``edge-1``."""
    with EmbeddedApiServer() as server:
        yield server


@pytest.fixture(scope="module")
def fleet(client: KubernetesClient, edge: EmbeddedApiServer) -> None:
    """The Site kind and the Secret that declares ``edge-1`` (kept for the module)."""
    if not client.is_served(API, "Site"):
        install_crd(client, group="sites.optk.dev", kind="Site", plural="sites", status=True)
    ns = placed_operator.FLEET_NAMESPACE
    try:
        client.get("v1", "Namespace", ns)
    except NotFoundError:
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    text = edge.kubeconfig_path.read_text()
    client.create({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "edge-1", "namespace": ns, "labels": {"tier": "edge"}},
                   "data": {"kubeconfig": base64.b64encode(text.encode()).decode()}})


def site(ns: str, name: str = "s", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Site", "metadata": {"name": name, "namespace": ns},
            "spec": spec}


def file_of(tmp_path: Path, obj: dict[str, Any]) -> str:
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(obj))
    return str(path)


def reconcile(client: KubernetesClient, parent: dict[str, Any]) -> None:
    settings = placed_operator.operator.parent_settings()
    result = ParentReconciler(client, placed_operator.build, operator_name="site-operator",
                              settings=settings).reconcile(parent)
    assert not result.errors, result.errors
    assert not result.waiting, result.waiting


def test_plan_names_the_cluster_of_each_placed_child_and_writes_nothing_there(
        kube_api: Any, client: KubernetesClient, fleet: None, edge: EmbeddedApiServer, ns: str,
        tmp_path: Path) -> None:
    remote = KubernetesClient(edge.api_client())
    out = io.StringIO()
    code = plan_command(TARGET, files=[file_of(tmp_path, site(ns, size=2))],
                        kubeconfig=str(kube_api.kubeconfig_path), out=out)
    text = out.getvalue()
    assert code == 0, text
    lines = text.splitlines()
    assert f"  create    ConfigMap.v1 {ns}/s-home" in lines  # at home: no cluster named
    assert "  create    Namespace.v1 site-s  [cluster edge-1]" in lines
    # its namespace is one this plan creates first: planned, said, not an error
    assert ("  create    ConfigMap.v1 site-s/settings  (in namespace site-s, which this plan "
            "creates: not validated by the server)  [cluster edge-1]") in lines
    with pytest.raises(NotFoundError):
        remote.get("v1", "Namespace", "site-s")
    with pytest.raises(NotFoundError):
        client.get(API, "Site", "s", namespace=ns)


def test_plan_shows_a_remote_update_with_its_diff_and_cluster(
        kube_api: Any, client: KubernetesClient, fleet: None, edge: EmbeddedApiServer, ns: str,
        tmp_path: Path) -> None:
    reconcile(client, client.create(site(ns, "u", size=1)))
    out = io.StringIO()
    assert plan_command(TARGET, files=[file_of(tmp_path, site(ns, "u", size=3))],
                        kubeconfig=str(kube_api.kubeconfig_path), out=out) == 0
    text = out.getvalue()
    assert "  update    ConfigMap.v1 site-u/settings  [cluster edge-1]" in text.splitlines()
    assert '~ data.size: "1" -> "3"' in text
    assert "Namespace" not in text  # unchanged: not shown
    remote = KubernetesClient(edge.api_client())
    assert remote.get("v1", "ConfigMap", "settings", namespace="site-u")["data"] == {"size": "1"}


def test_plan_of_a_child_for_an_unknown_cluster_waits_naming_it(
        kube_api: Any, client: KubernetesClient, fleet: None, ns: str, tmp_path: Path) -> None:
    out = io.StringIO()
    assert plan_command(TARGET, files=[file_of(tmp_path, site(ns, "w", cluster="edge-9"))],
                        kubeconfig=str(kube_api.kubeconfig_path), out=out) == 0
    waits = [line for line in out.getvalue().splitlines() if line.startswith("  wait")]
    assert len(waits) == 3, waits
    assert all("cluster 'edge-9'" in line for line in waits), waits


def test_trace_says_where_each_child_is_and_reads_it_there(
        kube_api: Any, client: KubernetesClient, fleet: None, edge: EmbeddedApiServer,
        ns: str) -> None:
    reconcile(client, client.create(site(ns, "t", size=1)))
    remote = KubernetesClient(edge.api_client())
    remote.patch("v1", "ConfigMap", "settings", {"data": {"size": "7"}}, namespace="site-t",
                 patch_type="application/merge-patch+json")
    out = io.StringIO()
    assert trace_command(TARGET, "t", namespace=ns, kubeconfig=str(kube_api.kubeconfig_path),
                         out=out, output="json") == 0
    children = {(c["kind"], c["name"]): c for c in json.loads(out.getvalue())["children"]}
    assert children[("ConfigMap", "t-home")]["cluster"] is None
    settings = children[("ConfigMap", "settings")]
    assert settings["cluster"] == "edge-1"
    assert settings["exists"] is True
    assert settings["next"] == "update"  # the drift there, read there
    assert children[("Namespace", "site-t")]["next"] == "none"
    text = io.StringIO()
    assert trace_command(TARGET, "t", namespace=ns, kubeconfig=str(kube_api.kubeconfig_path),
                         out=text) == 0
    tree = text.getvalue().splitlines()
    at = next(i for i, line in enumerate(tree) if "ConfigMap/settings" in line)
    assert tree[at + 1].endswith("cluster: edge-1")
    assert remote.get("v1", "ConfigMap", "settings", namespace="site-t")["data"] == {"size": "7"}


SAMPLE = {"apiVersion": API, "kind": "Site", "metadata": {"name": "s", "namespace": "default"},
          "spec": {"cluster": "edge-1"}}


def documents(text: str) -> dict[tuple[str, str | None, str], dict[str, Any]]:
    out = {}
    for doc in yaml.safe_load_all(text):
        if doc:
            meta = doc["metadata"]
            out[(doc["kind"], meta.get("namespace"), meta["name"])] = doc
    return out


def rules_of(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    return {(group, resource): set(rule["verbs"]) for rule in role["rules"]
            for group in rule.get("apiGroups", ()) for resource in rule.get("resources", ())}


def test_manifests_derive_the_home_role_with_the_cluster_secrets_and_the_inventory(
        tmp_path: Path) -> None:
    samples = tmp_path / "samples.yaml"
    samples.write_text(yaml.safe_dump(SAMPLE))
    text = manifests_command(TARGET, samples=[str(samples)])
    assert "Children are placed in other clusters (edge-1)" in " ".join(
        line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))
    docs = documents(text)
    home = rules_of(docs[("ClusterRole", None, "site-operator")])
    assert home[("", "configmaps")] >= {"create", "patch", "delete"}  # the home child
    assert ("", "namespaces") not in home
    assert ("rbac.authorization.k8s.io", "roles") not in home
    assert "patch" in home[("sites.optk.dev", "sites")]  # the inventory and the finalizer
    fleet_role = rules_of(docs[("Role", placed_operator.FLEET_NAMESPACE, "site-operator")])
    assert fleet_role[("", "secrets")] == {"list", "watch"}
    assert ("RoleBinding", placed_operator.FLEET_NAMESPACE, "site-operator") in docs
    # the Secrets' namespace is in the stream: its Role cannot be applied before it exists
    assert ("Namespace", None, placed_operator.FLEET_NAMESPACE) in docs


def test_manifests_for_a_cluster_hold_what_is_placed_there_and_nothing_of_home(
        tmp_path: Path) -> None:
    samples = tmp_path / "samples.yaml"
    samples.write_text(yaml.safe_dump(SAMPLE))
    docs = documents(manifests_command(TARGET, samples=[str(samples)], cluster="edge-1"))
    assert set(docs) == {("Namespace", None, "site-operator-system"),
                         ("ServiceAccount", "site-operator-system", "site-operator"),
                         ("ClusterRole", None, "site-operator"),
                         ("ClusterRoleBinding", None, "site-operator")}
    rules = rules_of(docs[("ClusterRole", None, "site-operator")])
    assert rules[("", "configmaps")] == rules[("", "namespaces")] == {
        "create", "delete", "get", "list", "patch", "watch"}
    assert {"create", "patch", "delete"} <= rules[("rbac.authorization.k8s.io", "roles")]
    assert ("sites.optk.dev", "sites") not in rules
    assert ("", "secrets") not in rules
    assert ("coordination.k8s.io", "leases") not in rules
    assert ("", "events") not in rules
    binding = docs[("ClusterRoleBinding", None, "site-operator")]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "site-operator",
                                    "namespace": "site-operator-system"}]


def test_manifests_for_a_cluster_no_sample_names_get_every_placed_kind(tmp_path: Path) -> None:
    samples = tmp_path / "samples.yaml"
    samples.write_text(yaml.safe_dump(SAMPLE))
    text = manifests_command(TARGET, samples=[str(samples)], cluster="edge-7")
    assert "no sample places any in 'edge-7'" in " ".join(
        line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))
    rules = rules_of(documents(text)[("ClusterRole", None, "site-operator")])
    assert {("", "configmaps"), ("", "namespaces"), ("rbac.authorization.k8s.io", "roles")} <= (
        set(rules))


def test_manifests_for_a_cluster_of_an_operator_without_clusters_is_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manifests", "tests.reconciler.plan_operator", "--cluster", "edge-1",
                 "--samples", "/dev/null"]) == 2
    err = capsys.readouterr().err
    assert "--cluster edge-1" in err
    assert "places no children in other clusters" in err


def test_the_driver_watches_no_placed_kind_at_home(
        client: KubernetesClient, fleet: None, ns: str) -> None:
    """The kinds of placed children are watched in their clusters, never at home (where the
    derived role grants none of them): not for a child placed, nor for one waiting for its
    cluster (``edge-9``: no Secret declares it)."""
    from reconciler._driver.workers import types_of

    settings = placed_operator.operator.parent_settings()
    reconciler = ParentReconciler(client, placed_operator.build, operator_name="site-operator",
                                  settings=settings)
    placed = reconciler.reconcile(client.create(site(ns, "h", size=1)))
    assert {r.cluster for r in placed.children} == {None, "edge-1"}
    assert types_of(placed) == {("v1", "ConfigMap")}  # the home ConfigMap only
    waiting = reconciler.reconcile(client.create(site(ns, "g", cluster="edge-9")))
    assert len(waiting.waiting) == 3
    assert types_of(waiting) == {("v1", "ConfigMap")}
