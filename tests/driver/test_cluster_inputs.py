"""The clusters as declared inputs, and the placed children's informers per (cluster, kind)
(issue 41), on two embedded servers with a running ``Operator``.

A builder selects clusters by label (``ClusterSelector``, ``inputs.clusters``: names and labels,
never a kubeconfig); adding, labelling, unlabelling or removing a cluster Secret reconciles the
parents that read the clusters and no other; the Secrets are served from an informer (a steady
state makes no request for them) and the placed children from an informer per (cluster, kind)
in their cluster: a remote drift is repaired within the watch's latency, a forced resync reads
and writes nothing in either cluster, and the informers stop when nothing places their kind
there or the cluster goes. Gates (``when_served`` asking the child's own cluster, the teardown
order), health, pause and per-object policies apply to placed children across clusters.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from builders import Component, ResourceBuilder, compose, placed
from builders.inputs import Cluster, ClusterSelector, Inputs
from reconciler import ClusterSecrets, KubernetesClient, NotFoundError, Readiness, Reporting
from reconciler.embedded import EmbeddedApiServer
from tests.driver.conftest import make_operator, running, thing, wait_until
from tests.driver.sample_operator import API_VERSION
from tests.reconciler.conftest import install_crd

MERGE = "application/merge-patch+json"
SELECTOR = ClusterSelector({"env": "prod"})
SECRET_LIST_VERBS = ("list", "get", "watch")


@pytest.fixture(scope="module")
def edge() -> Iterator[EmbeddedApiServer]:
    """The workload cluster."""
    with EmbeddedApiServer() as server:
        yield server


def secret(ns: str, name: str, server: EmbeddedApiServer, **labels: str) -> dict[str, Any]:
    text = server.kubeconfig_path.read_text()
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "data": {"kubeconfig": base64.b64encode(text.encode()).decode()}}


def _get(client: KubernetesClient, name: str) -> dict[str, Any] | None:
    try:
        return client.get("v1", "ConfigMap", name, namespace="default")
    except NotFoundError:
        return None


def _declare(parent: Any) -> list[ClusterSelector]:
    """Only the parents whose value is "fleet" read the clusters."""
    return [SELECTOR] if parent["spec"]["value"] == "fleet" else []


def _builder(ns: str, parent: Any, seen: list[list[Cluster]],
             inputs: Inputs) -> list[ResourceBuilder]:
    name = parent["metadata"]["name"]
    home = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"{name}-home", "namespace": ns}, "data": {}}
    out: list[ResourceBuilder] = [lambda: home]
    if SELECTOR in inputs.refs:
        clusters = inputs.clusters(SELECTOR)
        seen.append(clusters)
        for cluster in clusters:
            cm = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": f"{ns}-{name}", "namespace": "default"},
                  "data": {"cluster": cluster.name, "tier": cluster.labels.get("tier", "")}}
            out.append(placed(lambda cm=cm: cm, cluster=cluster.name))
    return out


@pytest.mark.timeout(120)
def test_clusters_are_inputs_selected_by_label_and_placed_children_are_watched_there(
        client: KubernetesClient, kube_namespace: str, kube_api: Any,
        edge: EmbeddedApiServer) -> None:
    ns = kube_namespace
    edge_client = KubernetesClient(edge.api_client())
    seen: list[list[Cluster]] = []
    operator = make_operator(
        ns, inputs=_declare, build=lambda p, inputs: _builder(ns, p, seen, inputs),
        clusters=ClusterSecrets(namespace=ns))
    remote_name = f"{ns}-a"
    with running(operator, client) as runtime:
        client.create(thing(ns, "a", value="fleet"))
        client.create(thing(ns, "b", value="home"))
        assert wait_until(lambda: runtime.stats.reconciles[(ns, "b")] >= 1
                          and runtime.stats.reconciles[(ns, "a")] >= 1)
        assert wait_until(lambda: seen and seen[-1] == [])  # no cluster yet
        time.sleep(0.3)
        b_before = runtime.stats.reconciles[(ns, "b")]

        # a cluster added by its Secret: the reader gets its child there, b is not reconciled
        client.create(secret(ns, "edge-1", edge, env="prod", tier="gold"))
        assert wait_until(lambda: _get(edge_client, remote_name) is not None, 20)
        assert seen[-1] == [Cluster(name="edge-1", labels={"env": "prod", "tier": "gold"})]
        assert all(not hasattr(c, "kubeconfig") for c in seen[-1])  # names and labels only
        assert (_get(edge_client, remote_name) or {})["data"] == {
            "cluster": "edge-1", "tier": "gold"}
        remote = runtime.remote
        assert remote is not None
        assert wait_until(lambda: remote.kinds("edge-1") == [("v1", "ConfigMap")])

        # relabelled: the child follows the labels
        client.patch("v1", "Secret", "edge-1",
                     {"metadata": {"labels": {"tier": "silver"}}}, namespace=ns, patch_type=MERGE)
        assert wait_until(lambda: ((_get(edge_client, remote_name) or {}).get("data") or {})
                          .get("tier") == "silver", 20)

        # a drift in the remote cluster: repaired from its watch (measured)
        time.sleep(0.5)
        edge_client.patch("v1", "ConfigMap", remote_name, {"data": {"tier": "hacked"}},
                          namespace="default", patch_type=MERGE)
        started = time.monotonic()
        assert wait_until(lambda: ((_get(edge_client, remote_name) or {}).get("data") or {})
                          .get("tier") == "silver", 5)
        repaired = time.monotonic() - started
        print(f"remote drift repaired in {repaired * 1000:.0f} ms")
        assert repaired < 5

        # a forced resync: no request for the clusters at home, none at all in the edge
        time.sleep(0.5)
        kube_api.enable_request_log()
        since = time.time()
        edge_before = edge.request_counts()
        a_before = runtime.stats.reconciles[(ns, "a")]
        assert runtime.resync_all() >= 2
        assert wait_until(lambda: runtime.stats.reconciles[(ns, "a")] > a_before)
        time.sleep(0.5)
        secrets = [r for r in kube_api.request_log() if r.at >= since
                   and r.resource == "secrets" and r.namespace == ns]
        assert secrets == []
        edge_after = edge.request_counts()
        assert {k: edge_after.get(k, 0) - edge_before.get(k, 0) for k in edge_after
                if edge_after.get(k, 0) != edge_before.get(k, 0)} == {}
        assert runtime.stats.reconciles[(ns, "b")] > b_before  # it was resynced too
        b_before = runtime.stats.reconciles[(ns, "b")]

        # unlabelled: the child is pruned there, the kind's informer stops
        client.patch("v1", "Secret", "edge-1", {"metadata": {"labels": {"env": None}}},
                     namespace=ns, patch_type=MERGE)
        assert wait_until(lambda: _get(edge_client, remote_name) is None, 20)
        assert wait_until(lambda: remote.kinds("edge-1") == [])

        # labelled again, then the Secret removed: the cluster's informers stop
        client.patch("v1", "Secret", "edge-1", {"metadata": {"labels": {"env": "prod"}}},
                     namespace=ns, patch_type=MERGE)
        assert wait_until(lambda: _get(edge_client, remote_name) is not None, 20)
        client.delete("v1", "Secret", "edge-1", namespace=ns)
        assert wait_until(lambda: remote.clusters() == [], 20)
        assert wait_until(lambda: seen[-1] == [])
        time.sleep(0.3)
        # b reads no cluster: none of the five Secret changes reconciled it
        assert runtime.stats.reconciles[(ns, "b")] == b_before

        # the child left in the removed cluster is kept recorded; the Secret back, deleting
        # the parent removes it there
        client.create(secret(ns, "edge-1", edge, env="prod"))
        assert wait_until(lambda: remote.clusters() == ["edge-1"], 20)
        client.delete(API_VERSION, "Thing", "a", namespace=ns)
        assert wait_until(lambda: _get(edge_client, remote_name) is None, 20)
        assert wait_until(lambda: not _exists(client, ns, "a"), 20)


def _exists(client: KubernetesClient, ns: str, name: str) -> bool:
    try:
        client.get(API_VERSION, "Thing", name, namespace=ns)
    except NotFoundError:
        return False
    return True


def _data(client: KubernetesClient, name: str) -> dict[str, str]:
    return dict((_get(client, name) or {}).get("data") or {})


def _conditions(client: KubernetesClient, ns: str, name: str) -> dict[str, dict[str, Any]]:
    parent = client.get(API_VERSION, "Thing", name, namespace=ns)
    return {c["type"]: c for c in (parent.get("status") or {}).get("conditions") or ()}


@pytest.mark.timeout(120)
def test_gates_pause_and_policies_apply_to_placed_children_across_clusters(
        client: KubernetesClient, kube_namespace: str, edge: EmbeddedApiServer) -> None:
    """A home child depends on a placed one (ready_when read from the remote cache); the
    parent's pause holds the placed child, and its ``optk.dev/policy: ignore`` leaves it."""
    ns = kube_namespace
    edge_client = KubernetesClient(edge.api_client())
    remote_name = f"{ns}-dep"

    def ready(obj: Any) -> str | None:
        return None if (obj.get("data") or {}).get("ready") == "yes" else "not marked ready"

    def build(parent: Any) -> list[Any]:
        remote = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": remote_name, "namespace": "default"},
                  "data": {"value": parent["spec"]["value"]}}
        home = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "after-remote", "namespace": ns}, "data": {}}
        return compose(Component(name="home", depends_on="remote", builders=[lambda: home]),
                       Component(name="remote", ready_when=ready,
                                 builders=[placed(lambda: remote, cluster="edge-1")]))

    client.create(secret(ns, "edge-1", edge))
    operator = make_operator(ns, build=build, clusters=ClusterSecrets(namespace=ns))
    with running(operator, client):
        client.create(thing(ns, "g", value="1"))
        assert wait_until(lambda: _get(edge_client, remote_name) is not None, 20)
        # the home child waits for the placed one, named with its cluster
        assert wait_until(lambda: "in cluster 'edge-1'" in _conditions(client, ns, "g").get(
            "Reconciled", {}).get("message", ""), 20)
        assert not _exists_cm(client, ns, "after-remote")
        # marked ready in its cluster: the remote watch wakes the parent, the home child comes
        edge_client.patch("v1", "ConfigMap", remote_name, {"data": {"ready": "yes"}},
                          namespace="default", patch_type=MERGE)
        assert wait_until(lambda: _exists_cm(client, ns, "after-remote"), 20)
        assert _data(edge_client, remote_name) == {"value": "1", "ready": "yes"}

        # the parent paused: a remote drift stays
        client.patch(API_VERSION, "Thing", "g",
                     {"metadata": {"annotations": {"optk.dev/paused": "true"}}},
                     namespace=ns, patch_type=MERGE)
        assert wait_until(lambda: _conditions(client, ns, "g").get("Reconciled", {}).get(
            "reason") == "ReconcilePaused", 20)
        edge_client.patch("v1", "ConfigMap", remote_name, {"data": {"value": "paused"}},
                          namespace="default", patch_type=MERGE)
        time.sleep(1.0)
        assert _data(edge_client, remote_name)["value"] == "paused"
        client.patch(API_VERSION, "Thing", "g",
                     {"metadata": {"annotations": {"optk.dev/paused": None}}},
                     namespace=ns, patch_type=MERGE)
        assert wait_until(lambda: _data(edge_client, remote_name)["value"] == "1", 20)

        # optk.dev/policy: ignore on the placed child: its drift is left alone
        edge_client.patch("v1", "ConfigMap", remote_name, {"metadata": {"annotations": {
            "optk.dev/policy": "ignore"}}, "data": {"value": "mine"}}, namespace="default",
            patch_type=MERGE)
        client.patch(API_VERSION, "Thing", "g", {"spec": {"value": "2"}}, namespace=ns,
                     patch_type=MERGE)
        time.sleep(1.0)
        assert _data(edge_client, remote_name)["value"] == "mine"
        edge_client.patch("v1", "ConfigMap", remote_name, {"metadata": {"annotations": {
            "optk.dev/policy": None}}}, namespace="default", patch_type=MERGE)
        assert wait_until(lambda: _data(edge_client, remote_name)["value"] == "2", 20)
        client.delete(API_VERSION, "Thing", "g", namespace=ns)
        assert wait_until(lambda: _get(edge_client, remote_name) is None, 20)


def _exists_cm(client: KubernetesClient, ns: str, name: str) -> bool:
    try:
        client.get("v1", "ConfigMap", name, namespace=ns)
    except NotFoundError:
        return False
    return True


@pytest.mark.timeout(120)
def test_ready_follows_a_placed_deployments_health_woken_by_its_cluster(
        client: KubernetesClient, kube_namespace: str, edge: EmbeddedApiServer) -> None:
    """Health across clusters: Ready reads the placed Deployment as its cluster has it, and the
    remote status change wakes the parent (the re-check is a minute: not what wakes it)."""
    ns = kube_namespace
    edge_client = KubernetesClient(edge.api_client())
    name = f"{ns}-web"
    labels = {"app": name}
    web = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": name, "namespace": "default"},
           "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels},
                                 "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}
    client.create(secret(ns, "edge-1", edge))
    operator = make_operator(
        ns, build=lambda parent: [placed(lambda: web, cluster="edge-1")],
        clusters=ClusterSecrets(namespace=ns),
        reporting=Reporting(events=False, readiness=Readiness(recheck=60.0)))
    with running(operator, client):
        client.create(thing(ns, "h"))
        assert wait_until(lambda: _conditions(client, ns, "h").get("Ready", {}).get(
            "reason") == "ChildrenNotReady", 20)
        assert "replicas: 0/2" in _conditions(client, ns, "h")["Ready"]["message"]
        live = edge_client.get("apps/v1", "Deployment", name, namespace="default")
        edge_client.patch("apps/v1", "Deployment", name, {"status": {
            "observedGeneration": live["metadata"].get("generation", 1),
            "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2, "readyReplicas": 2,
            "conditions": [{"type": "Available", "status": "True"},
                           {"type": "Progressing", "status": "True",
                            "reason": "NewReplicaSetAvailable"}]}},
            patch_type=MERGE, namespace="default", subresource="status")
        assert wait_until(lambda: _conditions(client, ns, "h").get("Ready", {}).get(
            "status") == "True", 10)
        client.delete(API_VERSION, "Thing", "h", namespace=ns)
        assert wait_until(lambda: _get_deployment(edge_client, name) is None, 20)


def _get_deployment(client: KubernetesClient, name: str) -> dict[str, Any] | None:
    try:
        return client.get("apps/v1", "Deployment", name, namespace="default")
    except NotFoundError:
        return None


@pytest.mark.timeout(120)
def test_when_served_asks_the_placed_childs_own_cluster(
        client: KubernetesClient, kube_namespace: str, edge: EmbeddedApiServer) -> None:
    """A kind served only in the workload cluster: a ``when_served`` component placed there
    waits (its condition naming the cluster) until that cluster serves it, and the
    management cluster's discovery (which never does) is not what decides."""
    ns = kube_namespace
    edge_client = KubernetesClient(edge.api_client())
    group = f"w{uuid.uuid4().hex[:8]}.optk.dev"
    widget = {"apiVersion": f"{group}/v1", "kind": "Widget",
              "metadata": {"name": "w", "namespace": "default"}, "spec": {"size": 1}}

    def build(parent: Any) -> list[Any]:
        return compose(Component(name="widgets", when_served=True,
                                 builders=[placed(lambda: widget, cluster="edge-1")]))

    client.create(secret(ns, "edge-1", edge))
    operator = make_operator(ns, build=build, clusters=ClusterSecrets(
        namespace=ns, retry_after=0.2, retry_max=1.0))
    with running(operator, client):
        client.create(thing(ns, "k"))
        assert wait_until(lambda: "is served in cluster 'edge-1'" in _conditions(
            client, ns, "k").get("Reconciled", {}).get("message", ""), 20)
        install_crd(edge_client, group=group, kind="Widget", plural="widgets")
        assert wait_until(lambda: _widget(edge_client, group) is not None, 20)
        assert not client.is_served(f"{group}/v1", "Widget")  # never at home
        client.delete(API_VERSION, "Thing", "k", namespace=ns)
        assert wait_until(lambda: _widget(edge_client, group) is None, 20)


def _widget(client: KubernetesClient, group: str) -> dict[str, Any] | None:
    try:
        return client.get(f"{group}/v1", "Widget", "w", namespace="default")
    except NotFoundError:
        return None


@pytest.mark.timeout(120)
def test_teardown_keeps_the_dependency_order_across_clusters(
        client: KubernetesClient, kube_namespace: str, edge: EmbeddedApiServer) -> None:
    """A placed child depending on a home one: when the parent goes, the home dependency is
    deleted only once the placed dependent is gone from its cluster (held there by a
    finalizer for a while)."""
    ns = kube_namespace
    edge_client = KubernetesClient(edge.api_client())
    remote_name = f"{ns}-dependent"
    home = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "dependency", "namespace": ns}, "data": {}}
    remote = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": remote_name, "namespace": "default"}, "data": {}}

    base = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "base", "namespace": ns}, "data": {}}

    def build(parent: Any) -> list[Any]:  # base <- home <- remote (in edge-1)
        return compose(Component(name="base", builders=[lambda: base]),
                       Component(name="home", depends_on="base", builders=[lambda: home]),
                       Component(name="remote", depends_on="home",
                                 builders=[placed(lambda: remote, cluster="edge-1")]))

    client.create(secret(ns, "edge-1", edge))
    operator = make_operator(ns, build=build, clusters=ClusterSecrets(namespace=ns))
    with running(operator, client):
        client.create(thing(ns, "t"))
        assert wait_until(lambda: _get(edge_client, remote_name) is not None, 20)
        assert _exists_cm(client, ns, "dependency")
        edge_client.patch("v1", "ConfigMap", remote_name,
                          {"metadata": {"finalizers": ["test.optk.dev/hold"]}},
                          namespace="default", patch_type=MERGE)
        client.delete(API_VERSION, "Thing", "t", namespace=ns)
        assert wait_until(lambda: ((_get(edge_client, remote_name) or {}).get("metadata")
                                   or {}).get("deletionTimestamp"), 20)
        time.sleep(1.0)
        assert _exists_cm(client, ns, "dependency")  # its dependent is still there
        assert _exists_cm(client, ns, "base")
        assert "waits until ConfigMap default/" in _conditions(client, ns, "t").get(
            "Cleanup", {}).get("message", "")
        edge_client.patch("v1", "ConfigMap", remote_name, {"metadata": {"finalizers": None}},
                          namespace="default", patch_type=MERGE)
        assert wait_until(lambda: not _exists_cm(client, ns, "dependency"), 20)
        assert wait_until(lambda: not _exists(client, ns, "t"), 20)
        assert _get(edge_client, remote_name) is None
