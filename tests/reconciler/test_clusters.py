"""Children placed in other clusters (issue 41), on two embedded API servers in one test.

The session's server is the operator's own cluster (the parent, its cluster Secrets, its home
children); a second embedded server started here is the workload cluster named by a Secret.
Promises checked: a Secret with a ``kubeconfig`` key is a cluster named after it, its labels the
cluster's, and its kubeconfig never appears in a repr, an error or a log line; one client per
cluster, rebuilt when the Secret changes and dropped when it goes; a placed child is created,
left alone when unchanged (0 writes), repaired when it drifts, pruned when no longer built and
deleted under the cleanup finalizer, never with an owner reference and always recorded in the
parent's inventory; an unusable cluster holds back only its own children, with a condition
naming it and a bounded backoff, and they converge with no duplicate when it is back.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import yaml

from builders import DesiredState, ResourceBuilder, placed
from builders.composition import placement_of
from reconciler import (
    Action,
    ClusterSecrets,
    KubernetesClient,
    NotFoundError,
    ParentReconciler,
    ParentSettings,
    ResourceReconciler,
    ResourceSettings,
    ServerSideApply,
)
from reconciler._client.caches import PassThroughCache
from reconciler._client.cluster_secrets import ClusterSecretError, parse_cluster_secret
from reconciler._client.clusters import ClusterConnections
from reconciler._reconcile.declared import declared_children
from reconciler._reconcile.placement import (
    ORPHANED_REASON,
    PLACED_ANNOTATION,
    UNAVAILABLE_REASON,
    inventory_of,
)
from reconciler.embedded import EmbeddedApiServer
from tests.reconciler.conftest import Requests, install_crd, wait_for

GROUP = "placements.optk.dev"
API = f"{GROUP}/v1"
PRESENT, ABSENT = DesiredState.PRESENT, DesiredState.ABSENT


@pytest.fixture(scope="module")
def remote() -> Iterator[EmbeddedApiServer]:
    """The second cluster: a workload cluster the operator places children in."""
    with EmbeddedApiServer() as server:
        yield server


@pytest.fixture
def remote_client(remote: EmbeddedApiServer) -> KubernetesClient:
    return KubernetesClient(remote.api_client())


@pytest.fixture(scope="module")
def parent_kind(client: KubernetesClient) -> str:
    if not client.is_served(API, "Tenant"):
        install_crd(client, group=GROUP, kind="Tenant", plural="tenants", status=True)
    return "Tenant"


@pytest.fixture
def parent(client: KubernetesClient, parent_kind: str, ns: str) -> dict[str, Any]:
    return client.create({"apiVersion": API, "kind": parent_kind,
                          "metadata": {"name": "acme", "namespace": ns}, "spec": {}})


def kubeconfig_text(server: EmbeddedApiServer) -> str:
    return server.kubeconfig_path.read_text()


def cluster_secret(name: str, ns: str, text: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "data": {"kubeconfig": base64.b64encode(text.encode()).decode()}}


def fresh(client: KubernetesClient, parent: dict[str, Any]) -> dict[str, Any]:
    meta = parent["metadata"]
    return client.get(API, "Tenant", meta["name"], namespace=meta["namespace"])


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def quota_cm(ns: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "quota", "namespace": ns}, "data": data}


def builders_of(*pairs: tuple[dict[str, Any], DesiredState],
                cluster: str | None = None) -> list[ResourceBuilder]:
    made: list[ResourceBuilder] = [(lambda p=p: p) for p in pairs]
    return made if cluster is None else [placed(b, cluster=cluster) for b in made]


def remote_writes(server: EmbeddedApiServer) -> Requests:
    return Requests(server)


# -- the pure parts ---------------------------------------------------------------------------


def test_a_secret_with_a_kubeconfig_is_a_cluster_and_its_content_is_never_shown(
        remote: EmbeddedApiServer) -> None:
    text = kubeconfig_text(remote)
    secret = cluster_secret("edge-1", "fleet", text, region="eu")
    secret["metadata"]["resourceVersion"] = "7"
    record = parse_cluster_secret(secret)
    assert record is not None
    assert (record.name, dict(record.labels), record.resource_version) == (
        "edge-1", {"region": "eu"}, "7")
    assert record.kubeconfig["clusters"]
    assert remote.token not in repr(record)
    assert parse_cluster_secret({"metadata": {"name": "other"}, "data": {"x": "eQ=="}}) is None
    # unusable: named after the Secret, never quoting it
    leaky = "clusters: [ {token: " + remote.token  # unterminated YAML
    for bad in ({"kubeconfig": "%%%"},
                {"kubeconfig": base64.b64encode(leaky.encode()).decode()},
                {"kubeconfig": base64.b64encode(b"just-a-string").decode()}):
        with pytest.raises(ClusterSecretError) as caught:
            parse_cluster_secret({"metadata": {"name": "bad", "namespace": "fleet"},
                                  "data": bad})
        assert "Secret fleet/bad" in str(caught.value)
        assert remote.token not in str(caught.value)
        assert caught.value.__cause__ is None  # the chain dropped: no parser message kept
        assert caught.value.__suppress_context__ or caught.value.__context__ is None


def test_placed_carries_the_cluster_on_the_builder_not_on_the_object() -> None:
    build = placed(lambda: namespace("team"), cluster="edge-1")
    assert placement_of(build) == "edge-1"
    obj, state = build()  # type: ignore[misc]
    assert obj == namespace("team")
    assert state is PRESENT
    assert placement_of(placed(build, cluster="edge-2")) == "edge-2"  # placed again: moved
    assert placement_of(lambda: namespace("team")) is None
    # declared apart from the home children, identity stamped without an owner reference
    parent = {"apiVersion": API, "kind": "Tenant",
              "metadata": {"name": "acme", "namespace": "fleet", "uid": "u-1"}}
    home_cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "home"}}
    away_cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "away"}}
    declared = declared_children(
        lambda p: [lambda: home_cm, placed(lambda: away_cm, cluster="edge-1")], parent,
        operator_name="op", namespaced=lambda api_version, kind: True)
    assert [c.ref.name for c in declared.children] == ["home"]
    assert [(c.ref.name, c.cluster) for c in declared.placed] == [("away", "edge-1")]
    assert declared.children[0].obj["metadata"]["ownerReferences"]
    away = declared.placed[0].obj["metadata"]
    assert "ownerReferences" not in away
    assert away["labels"]["optk.dev/owner-uid"] == "u-1"
    assert declared.types == {("v1", "ConfigMap")}
    with pytest.raises(ValueError, match="non-empty cluster name"):
        placed(lambda: namespace("team"), cluster="")


# -- the connection cache -----------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_one_client_per_cluster_rebuilt_when_its_secret_changes(
        client: KubernetesClient, remote: EmbeddedApiServer, ns: str) -> None:
    client.create(cluster_secret("edge-1", ns, kubeconfig_text(remote), region="eu"))
    client.create(cluster_secret("edge-9", ns, kubeconfig_text(remote), region="us"))
    client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "plain",
                   "namespace": ns}, "data": {"password": "eA=="}})
    connections = ClusterConnections(ClusterSecrets(namespace=ns, selector={"region": "eu"}),
                                     PassThroughCache(client))
    view = connections.view()
    assert sorted(view.clusters) == ["edge-1"]  # the selector, and only kubeconfig Secrets
    assert view.clusters["edge-1"].labels == {"region": "eu"}
    first = connections.client(view.clusters["edge-1"])
    assert first.get("v1", "Namespace", "default")["metadata"]["name"] == "default"
    assert connections.client(connections.view().clusters["edge-1"]) is first
    assert connections.connects == 1

    secret = client.get("v1", "Secret", "edge-1", namespace=ns)
    secret["metadata"]["labels"]["rotated"] = "yes"
    client.replace(secret)  # new credentials: a new resourceVersion
    second = connections.client(connections.view().clusters["edge-1"])
    assert second is not first
    assert connections.connects == 2
    assert second.get("v1", "Namespace", "default")

    client.delete("v1", "Secret", "edge-1", namespace=ns)
    view = connections.view()
    assert view.clusters == {}
    assert connections.connected() == []
    assert "no Secret" in (view.why_not("edge-1", connections.secrets) or "")


# -- the parent reconcile -----------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_placed_children_are_created_left_alone_repaired_pruned_and_torn_down(
        client: KubernetesClient, remote: EmbeddedApiServer, remote_client: KubernetesClient,
        parent: dict[str, Any], ns: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client.create(cluster_secret("edge-1", ns, kubeconfig_text(remote)))
    team = f"team-{ns}"
    wanted: dict[str, Any] = {"quota": True}

    def build(p: dict[str, Any]) -> list[ResourceBuilder]:
        home = builders_of(({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "acme-summary"}, "data": {}}, PRESENT))
        away = builders_of((namespace(team), PRESENT),
                           *([(quota_cm(team, cpu="4"), PRESENT)] if wanted["quota"] else []),
                           cluster="edge-1")
        return [*home, *away]

    pr = ParentReconciler(client, build, operator_name="tenant-operator",
                          settings=ParentSettings(clusters=ClusterSecrets(namespace=ns)))
    result = pr.reconcile(fresh(client, parent))
    assert result.ok, result.errors
    assert [r.action for r in result.children] == [Action.CREATED] * 3

    uid = parent["metadata"]["uid"]
    live = remote_client.get("v1", "ConfigMap", "quota", namespace=team)
    assert live["data"] == {"cpu": "4"}
    assert live["metadata"]["labels"]["optk.dev/owner-uid"] == uid
    assert "ownerReferences" not in live["metadata"]  # they cannot cross clusters
    assert remote_client.get("v1", "Namespace", team)["metadata"]["labels"][
        "optk.dev/owner-uid"] == uid
    with pytest.raises(NotFoundError):  # placed, not at home
        client.get("v1", "ConfigMap", "quota", namespace=team)
    home = fresh(client, parent)
    assert inventory_of(home) == [("edge-1", "v1", "Namespace", "", team),
                                  ("edge-1", "v1", "ConfigMap", team, "quota")]
    assert "optk.dev/cleanup" in home["metadata"]["finalizers"]

    with remote_writes(remote) as steady:  # unchanged: nothing written there
        again = pr.reconcile(fresh(client, parent))
    assert again.ok
    assert steady.writes == 0, steady.delta
    assert {r.action for r in again.children} == {Action.UNCHANGED}

    secret = client.get("v1", "Secret", "edge-1", namespace=ns)
    secret["metadata"]["labels"] = {"rotated": "yes"}
    client.replace(secret)  # rotated: the next reconcile reconnects, and still writes nothing
    assert pr.placement is not None
    assert pr.placement.connections.connects == 1
    with remote_writes(remote) as rotated:
        after_rotation = pr.reconcile(fresh(client, parent))
    assert pr.placement.connections.connects == 2
    assert {r.action for r in after_rotation.children} == {Action.UNCHANGED}
    assert rotated.writes == 0, rotated.delta

    live["data"] = {"cpu": "64"}  # drift in the remote cluster
    remote_client.replace(live)
    repaired = pr.reconcile(fresh(client, parent))
    assert Action.UPDATED in [r.action for r in repaired.children]
    assert remote_client.get("v1", "ConfigMap", "quota", namespace=team)["data"] == {"cpu": "4"}

    wanted["quota"] = False  # no longer built: pruned there and from the inventory
    pruned = pr.reconcile(fresh(client, parent))
    assert pruned.ok, pruned.errors
    with pytest.raises(NotFoundError):
        remote_client.get("v1", "ConfigMap", "quota", namespace=team)
    assert inventory_of(fresh(client, parent)) == [("edge-1", "v1", "Namespace", "", team)]

    client.delete(API, "Tenant", "acme", namespace=ns)  # the finalizer holds it
    doomed = fresh(client, parent)
    assert doomed["metadata"].get("deletionTimestamp")
    outcome = pr.cleanup.finalize(doomed)
    for _ in range(5):
        if outcome.done:
            break
        outcome = pr.cleanup.finalize(fresh(client, parent))
    assert outcome.done, outcome.reason
    with pytest.raises(NotFoundError):
        remote_client.get("v1", "Namespace", team)
    with pytest.raises(NotFoundError):
        fresh(client, parent)

    token = yaml.safe_load(kubeconfig_text(remote))["users"][0]["user"]["token"]
    assert all(token not in r.getMessage() for r in caplog.records)
    assert all(token not in str(r.args) for r in caplog.records)


@pytest.mark.timeout(120)
def test_an_unreachable_cluster_holds_back_only_its_children_and_they_converge_on_return(
        client: KubernetesClient, parent: dict[str, Any], ns: str) -> None:
    with EmbeddedApiServer() as edge:
        edge_client = KubernetesClient(edge.api_client())
        client.create(cluster_secret("edge-2", ns, kubeconfig_text(edge)))
        settings = ParentSettings(clusters=ClusterSecrets(
            namespace=ns, request_timeout=2.0, retry_after=1.0, retry_max=4.0))
        def builds(p: dict[str, Any]) -> list[ResourceBuilder]:
            return [
                *builders_of(({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "acme-home"}, "data": {"a": "1"}},
                              PRESENT)),
                *builders_of((quota_cm("default", cpu="2"), PRESENT), cluster="edge-2"),
                *builders_of((quota_cm("default", cpu="9"), PRESENT), cluster="nowhere"),
            ]
        pr = ParentReconciler(client, builds, operator_name="tenant-operator",
                              settings=settings)
        edge.stop()
        try:
            first = pr.reconcile(fresh(client, parent))
            waits = {w.message.split(" waits for cluster ")[1].split(":")[0]: w
                     for w in first.waiting}
            assert set(waits) == {"'edge-2'", "'nowhere'"}
            assert {w.reason for w in first.waiting} == {UNAVAILABLE_REASON}
            assert "no Secret" in waits["'nowhere'"].message
            assert first.requeue_after == 1.0  # bounded backoff, not a hot loop
            assert [r.ref.name for r in first.children] == ["acme-home"]  # home converged
            second = pr.reconcile(fresh(client, parent))
            assert second.requeue_after == 2.0
            # never placed in 'nowhere' (no Secret): waiting, not orphaned, and not recorded
            assert {w.reason for w in second.waiting} == {UNAVAILABLE_REASON}
            assert all(e[0] != "nowhere" for e in inventory_of(fresh(client, parent)))
            conditions = {c["type"]: c for c in fresh(client, parent)["status"]["conditions"]}
            assert conditions["Reconciled"]["status"] == "False"
            assert conditions["Reconciled"]["reason"] == UNAVAILABLE_REASON
            assert "edge-2" in conditions["Reconciled"]["message"]
            # recorded before anything was placed: not forgotten while it waits
            assert ("edge-2", "v1", "ConfigMap", "default", "quota") in inventory_of(
                fresh(client, parent))
        finally:
            edge.start()
        back = pr.reconcile(fresh(client, parent))
        assert [w.message for w in back.waiting if "edge-2" in w.message] == []
        assert edge_client.get("v1", "ConfigMap", "quota", namespace="default")["data"] == {
            "cpu": "2"}
        with Requests(edge) as steady:
            pr.reconcile(fresh(client, parent))
        assert steady.writes == 0
        listed = edge_client.list("v1", "ConfigMap", namespace="default")["items"]
        assert [o["metadata"]["name"] for o in listed].count("quota") == 1  # no duplicate


@pytest.mark.timeout(60)
def test_a_remote_object_that_is_not_ours_is_neither_taken_over_nor_deleted(
        client: KubernetesClient, remote: EmbeddedApiServer, remote_client: KubernetesClient,
        parent: dict[str, Any], ns: str) -> None:
    team = f"theirs-{ns}"
    remote_client.create(namespace(team))
    remote_client.create(quota_cm(team, cpu="1"))
    client.create(cluster_secret("edge-1", ns, kubeconfig_text(remote)))
    wanted = {"on": True}
    pr = ParentReconciler(
        client, lambda p: builders_of(*([(quota_cm(team, cpu="8"), PRESENT)]
                                        if wanted["on"] else []), cluster="edge-1"),
        operator_name="tenant-operator",
        settings=ParentSettings(clusters=ClusterSecrets(namespace=ns)))
    result = pr.reconcile(fresh(client, parent))
    assert [r.action for r in result.children] == [Action.SKIPPED]
    wanted["on"] = False
    pr.reconcile(fresh(client, parent))
    assert remote_client.get("v1", "ConfigMap", "quota", namespace=team)["data"] == {"cpu": "1"}
    assert PLACED_ANNOTATION not in (fresh(client, parent)["metadata"].get("annotations") or {})


@pytest.mark.timeout(60)
def test_an_absent_placed_child_is_never_recorded_and_a_steady_state_writes_nothing(
        client: KubernetesClient, remote: EmbeddedApiServer, remote_client: KubernetesClient,
        parent: dict[str, Any], ns: str, requests: Callable[[], Requests]) -> None:
    client.create(cluster_secret("edge-1", ns, kubeconfig_text(remote)))
    team = f"gone-{ns}"
    pr = ParentReconciler(
        client, lambda p: builders_of((namespace(team), PRESENT),
                                      (quota_cm(team, cpu="1"), ABSENT), cluster="edge-1"),
        operator_name="tenant-operator",
        settings=ParentSettings(clusters=ClusterSecrets(namespace=ns)))
    assert pr.reconcile(fresh(client, parent)).ok
    assert inventory_of(fresh(client, parent)) == [("edge-1", "v1", "Namespace", "", team)]
    with requests() as home, Requests(remote) as away:
        again = pr.reconcile(fresh(client, parent))
    assert again.ok
    assert home.writes == 0, home.delta
    assert away.writes == 0, away.delta
    with pytest.raises(NotFoundError):
        remote_client.get("v1", "ConfigMap", "quota", namespace=team)


@pytest.mark.timeout(120)
def test_a_cluster_unreachable_at_deletion_keeps_the_finalizer_and_says_so(
        client: KubernetesClient, parent: dict[str, Any], ns: str) -> None:
    with EmbeddedApiServer() as edge:
        edge_client = KubernetesClient(edge.api_client())
        client.create(cluster_secret("edge-3", ns, kubeconfig_text(edge)))
        pr = ParentReconciler(
            client, lambda p: builders_of((quota_cm("default", cpu="3"), PRESENT),
                                          cluster="edge-3"),
            operator_name="tenant-operator",
            settings=ParentSettings(clusters=ClusterSecrets(namespace=ns, request_timeout=2.0)))
        assert pr.reconcile(fresh(client, parent)).ok
        client.delete(API, "Tenant", "acme", namespace=ns)
        edge.stop()
        try:
            outcome = pr.cleanup.finalize(fresh(client, parent))
            assert not outcome.done
            assert "edge-3" in outcome.reason
            held = fresh(client, parent)  # still there, its finalizer kept, the reason shown
            assert "optk.dev/cleanup" in held["metadata"]["finalizers"]
            cleanup = {c["type"]: c for c in held["status"]["conditions"]}["Cleanup"]
            assert cleanup["reason"] == "CleanupPending"
            assert "edge-3" in cleanup["message"]
        finally:
            edge.start()
        outcome = pr.cleanup.finalize(fresh(client, parent))
        for _ in range(5):
            if outcome.done:
                break
            outcome = pr.cleanup.finalize(fresh(client, parent))
        assert outcome.done, outcome.reason
        with pytest.raises(NotFoundError):
            edge_client.get("v1", "ConfigMap", "quota", namespace="default")


@pytest.mark.timeout(60)
def test_a_placed_child_is_written_as_the_home_children_are_server_side_apply_included(
        client: KubernetesClient, remote: EmbeddedApiServer, remote_client: KubernetesClient,
        parent: dict[str, Any], ns: str) -> None:
    client.create(cluster_secret("edge-1", ns, kubeconfig_text(remote)))
    team = f"ssa-{ns}"
    resources = ResourceReconciler(client, settings=ResourceSettings(
        apply=ServerSideApply(), field_manager="tenant-operator"))
    pr = ParentReconciler(
        client, lambda p: builders_of((namespace(team), PRESENT), cluster="edge-1"),
        operator_name="tenant-operator", resources=resources,
        settings=ParentSettings(clusters=ClusterSecrets(namespace=ns)))
    assert pr.reconcile(fresh(client, parent)).ok
    managers = {(m["manager"], m["operation"]) for m in
                remote_client.get("v1", "Namespace", team)["metadata"]["managedFields"]}
    assert ("tenant-operator", "Apply") in managers


@pytest.mark.timeout(60)
def test_a_removed_cluster_reports_its_children_orphaned_and_keeps_them_recorded(
        client: KubernetesClient, remote: EmbeddedApiServer, remote_client: KubernetesClient,
        parent: dict[str, Any], ns: str) -> None:
    client.create(cluster_secret("edge-4", ns, kubeconfig_text(remote)))
    team = f"orphan-{ns}"
    pr = ParentReconciler(
        client, lambda p: builders_of((namespace(team), PRESENT), cluster="edge-4"),
        operator_name="tenant-operator",
        settings=ParentSettings(clusters=ClusterSecrets(namespace=ns, retry_after=2.0)))
    assert pr.reconcile(fresh(client, parent)).ok
    client.delete("v1", "Secret", "edge-4", namespace=ns)
    result = pr.reconcile(fresh(client, parent))
    assert [w.reason for w in result.waiting] == [ORPHANED_REASON]
    assert "orphaned" in result.waiting[0].message
    assert "edge-4" in result.waiting[0].message
    assert result.requeue_after == 2.0
    assert inventory_of(fresh(client, parent)) == [("edge-4", "v1", "Namespace", "", team)]
    assert remote_client.get("v1", "Namespace", team)  # left alone there, not forgotten
    conditions = {c["type"]: c for c in fresh(client, parent)["status"]["conditions"]}
    assert conditions["Reconciled"]["reason"] == ORPHANED_REASON


@pytest.mark.timeout(60)
def test_workers_connecting_at_once_share_one_client(
        client: KubernetesClient, remote: EmbeddedApiServer, ns: str) -> None:
    client.create(cluster_secret("edge-1", ns, kubeconfig_text(remote)))
    connections = ClusterConnections(ClusterSecrets(namespace=ns), PassThroughCache(client))
    record = connections.view().clusters["edge-1"]
    start = threading.Barrier(4)

    def connect() -> object:
        start.wait()
        return connections.client(record)

    with ThreadPoolExecutor(4) as pool:
        clients = list(pool.map(lambda _: connect(), range(4)))
    assert connections.connects == 1
    kept = connections.client(record)
    assert all(c is kept for c in clients)  # none of them closed under another worker
    assert kept.get("v1", "Namespace", "default")


def test_a_kind_only_the_workload_cluster_serves_has_the_scope_it_has_there(
        client: KubernetesClient, remote: EmbeddedApiServer, remote_client: KubernetesClient,
        parent: dict[str, Any], ns: str) -> None:
    """A cluster-scoped custom kind served only in the workload cluster: its scope is asked of
    that cluster's discovery. Before, the home cluster was asked; not knowing the kind, it let
    the namespaced parent's namespace decide, and the child went to a namespace the remote
    kind does not have (issue 41's note, docs/clusters.md)."""
    group = f"edge-{ns}.optk.dev"
    remote_client.create({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"edgepolicies.{group}"},
        "spec": {"group": group, "scope": "Cluster",
                 "names": {"kind": "EdgePolicy", "plural": "edgepolicies"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object",
                                         "x-kubernetes-preserve-unknown-fields": True}}}]}})
    wait_for(lambda: remote_client.is_served(f"{group}/v1", "EdgePolicy"))
    assert not client.is_served(f"{group}/v1", "EdgePolicy")
    client.create(cluster_secret("edge-1", ns, kubeconfig_text(remote)))
    policy = {"apiVersion": f"{group}/v1", "kind": "EdgePolicy",
              "metadata": {"name": f"policy-{ns}"}, "spec": {"mode": "strict"}}
    pr = ParentReconciler(
        client, lambda p: builders_of((policy, PRESENT), cluster="edge-1"),
        operator_name="tenant-operator",
        settings=ParentSettings(clusters=ClusterSecrets(namespace=ns)))
    declared = pr.declared(fresh(client, parent))
    assert [c.ref.namespace for c in declared.placed] == [None]
    result = pr.reconcile(fresh(client, parent))
    assert result.ok, result
    live = remote_client.get(f"{group}/v1", "EdgePolicy", f"policy-{ns}")
    assert "namespace" not in live["metadata"]
    assert live["spec"] == {"mode": "strict"}
    assert inventory_of(fresh(client, parent)) == [
        ("edge-1", f"{group}/v1", "EdgePolicy", "", f"policy-{ns}")]
