"""The Tenant example's acceptance (issue 41) on two real control planes: the real tier of
``tests/examples/test_tenant.py``.

The session's control plane (``real_kube_api``) is the management cluster (the Tenants, the
cluster Secrets) **and** the workload cluster ``edge-1`` (its Secret holds a kubeconfig of that
same plane); the session's second plane (``second_real_kube_api``, tests/conftest.py) is the
workload cluster ``edge-2``. The example operator runs as its own user, ``tenant-operator``
(a client certificate in group ``system:masters`` on both planes), so each plane's audit log
tells its requests apart from the test's.

Promises checked, one running operator for the module and one Tenant per test: the Tenant
converges in both clusters (Namespace, ResourceQuota, Role, RoleBinding; ``status.clusters``
says Converged; the figure printed); a drift in the second plane is repaired from its watch (the
figure printed; the bound is generous, issue 41 asks 1 s); a forced resync makes no write and no
GET of a child by the operator's user in either plane; a cluster Secret unlabelled loses the
children there, labelled again gets them back; the second plane's API server stopped: its
children wait with a condition naming ``edge-2`` while ``edge-1`` converges as usual, and when
it is back all converge with no duplicate; deleting the Tenant removes the children from both
planes (a Namespace may stay ``Terminating`` a while: its ``deletionTimestamp`` is accepted).
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import kubernetes
import pytest

from examples.tenant.builders import namespace_name
from examples.tenant.crds import API_VERSION, KIND
from examples.tenant.operator import make_operator
from reconciler import ClusterSecrets, KubernetesClient, NotFoundError, OperatorRuntime
from reconciler.envtest import ControlPlane
from reconciler.testing import wait_synced

pytestmark = pytest.mark.timeout(240)

USER = "tenant-operator"
MERGE = "application/merge-patch+json"
RBAC = "rbac.authorization.k8s.io/v1"
DRIFT_BOUND = 5.0  # seconds (issue 41 asks for 1 s; the figure is printed)
POLL = 0.05
WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})
CHILD_RESOURCES = frozenset({"namespaces", "resourcequotas", "roles", "rolebindings"})


@dataclass
class Fleet:
    """The module's clusters and its running operator."""

    home: KubernetesClient  # the management cluster (admin), also edge-1
    two: KubernetesClient  # edge-2 (admin)
    home_plane: ControlPlane
    edge_plane: ControlPlane
    namespace: str  # where the Tenants and the cluster Secrets live
    operator: str  # its name: its children's managed-by label
    runtime: OperatorRuntime


def _client_of(plane: ControlPlane) -> KubernetesClient:
    return KubernetesClient(plane.api_client())


def _operator_kubeconfig(plane: ControlPlane) -> str:
    return plane.kubeconfig_for(USER, groups=["system:masters"]).read_text()


def _cluster_secret(ns: str, name: str, kubeconfig: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "data": {"kubeconfig": base64.b64encode(kubeconfig.encode()).decode()}}


@pytest.fixture(scope="module")
def fleet(real_kube_api: ControlPlane, second_real_kube_api: ControlPlane) -> Iterator[Fleet]:
    home, two = _client_of(real_kube_api), _client_of(second_real_kube_api)
    ns = f"tenant-real-{uuid.uuid4().hex[:8]}"
    home.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    home.create(_cluster_secret(ns, "edge-1", _operator_kubeconfig(real_kube_api), env="prod"))
    home.create(_cluster_secret(ns, "edge-2", _operator_kubeconfig(second_real_kube_api),
                                env="prod"))
    as_operator = KubernetesClient(kubernetes.config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(real_kube_api.kubeconfig_for(USER, groups=["system:masters"]))))
    name = f"tenant-{uuid.uuid4().hex[:6]}"
    operator = make_operator(
        name=name, namespace=ns, events=False,
        clusters=ClusterSecrets(namespace=ns, request_timeout=2.0, retry_after=0.5,
                                retry_max=2.0))
    runtime = operator.start(as_operator)
    try:
        assert wait_synced(runtime, 30)
        yield Fleet(home=home, two=two, home_plane=real_kube_api,
                    edge_plane=second_real_kube_api, namespace=ns, operator=name,
                    runtime=runtime)
    finally:
        runtime.stop(5)
        second_real_kube_api.start_apiserver()  # no-op unless a failed test left it stopped
        home.delete("v1", "Namespace", ns)


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(POLL)
    return bool(predicate())


def get(client: KubernetesClient, api_version: str, kind: str, name: str,
        namespace: str | None = None) -> dict[str, Any] | None:
    try:
        return client.get(api_version, kind, name, namespace=namespace)
    except NotFoundError:
        return None


def converged(client: KubernetesClient, target: str, pods: int = 20) -> bool:
    """The four children are in ``client``'s cluster, the quota as asked, the namespace live."""
    space = get(client, "v1", "Namespace", target)
    quota = get(client, "v1", "ResourceQuota", "tenant-quota", target)
    return (space is not None and "deletionTimestamp" not in space["metadata"]
            and quota is not None and quota["spec"]["hard"].get("pods") == str(pods)
            and get(client, RBAC, "Role", "tenant-admin", target) is not None
            and get(client, RBAC, "RoleBinding", "tenant-admins", target) is not None)


def removed(client: KubernetesClient, target: str) -> bool:
    """The children are gone from ``client``'s cluster: the namespace deleted, or being deleted
    by the namespace controller (``deletionTimestamp`` set) with the operator's three objects
    in it gone."""
    space = get(client, "v1", "Namespace", target)
    if space is None:
        return True
    return ("deletionTimestamp" in space["metadata"]
            and get(client, "v1", "ResourceQuota", "tenant-quota", target) is None
            and get(client, RBAC, "Role", "tenant-admin", target) is None
            and get(client, RBAC, "RoleBinding", "tenant-admins", target) is None)


def summary(client: KubernetesClient, ns: str, name: str) -> dict[str, tuple[str, str]]:
    tenant = get(client, API_VERSION, KIND, name, ns) or {}
    return {c["name"]: (c["state"], c["reason"])
            for c in (tenant.get("status") or {}).get("clusters") or ()}


BOTH_CONVERGED = {"edge-1": ("Converged", "Converged"), "edge-2": ("Converged", "Converged")}


def create_tenant(fleet: Fleet, name: str) -> str:
    """A Tenant selecting ``env=prod``; its namespace's name in the workload clusters."""
    created = fleet.home.create({
        "apiVersion": API_VERSION, "kind": KIND,
        "metadata": {"name": name, "namespace": fleet.namespace},
        "spec": {"clusterSelector": [{"key": "env", "value": "prod"}],
                 "quota": {"pods": 20}, "admins": ["alice"]}})
    return namespace_name(created)


def delete_tenant(fleet: Fleet, name: str, target: str) -> None:
    """Delete the Tenant: its children leave both planes and its finalizer comes off."""
    fleet.home.delete(API_VERSION, KIND, name, namespace=fleet.namespace)
    started = time.monotonic()
    assert wait_until(lambda: removed(fleet.home, target) and removed(fleet.two, target))
    assert wait_until(lambda: get(fleet.home, API_VERSION, KIND, name, fleet.namespace) is None)
    print(f"{name} deleted: its children removed and its finalizer off in "
          f"{time.monotonic() - started:.2f} s")


def audit_offset(plane: ControlPlane) -> int:
    """Where the audit log ends now (flushed: every request answered so far is in it)."""
    plane.request_counts(user=USER)
    return plane.audit_log_path.stat().st_size


def operator_requests(plane: ControlPlane, offset: int) -> list[tuple[str, str, str]]:
    """The operator user's requests in ``plane``'s audit log after ``offset``, as (verb,
    resource, name), one per request (a watch logs two stages)."""
    plane.request_counts(user=USER)  # flush up to now
    with plane.audit_log_path.open("rb") as handle:
        handle.seek(offset)
        lines = handle.read().decode("utf-8", "replace").splitlines()
    seen: set[str] = set()
    out: list[tuple[str, str, str]] = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if ((event.get("user") or {}).get("username") != USER
                or event.get("auditID") in seen):
            continue
        seen.add(event.get("auditID"))
        ref = event.get("objectRef") or {}
        out.append((str(event.get("verb")), str(ref.get("resource")), str(ref.get("name"))))
    return out


def test_a_tenant_converges_in_both_planes_repairs_drift_and_resyncs_with_no_write(
        fleet: Fleet) -> None:
    target = create_tenant(fleet, "acme")
    started = time.monotonic()  # after the create: a real API server may take seconds to admit
    assert wait_until(lambda: converged(fleet.home, target) and converged(fleet.two, target))
    assert wait_until(lambda: summary(fleet.home, fleet.namespace, "acme") == BOTH_CONVERGED)
    print(f"converged in both real planes in {time.monotonic() - started:.2f} s")
    binding = fleet.two.get(RBAC, "RoleBinding", "tenant-admins", namespace=target)
    assert binding["subjects"][0]["name"] == "alice"
    assert "ownerReferences" not in binding["metadata"]
    # the home plane is also edge-1: its placed namespace is the operator's, by its label
    assert fleet.home.get("v1", "Namespace", target)["metadata"]["labels"][
        "app.kubernetes.io/managed-by"] == fleet.operator

    # a drift in the second plane: repaired from its watch
    time.sleep(0.5)
    before_drift = audit_offset(fleet.edge_plane)
    fleet.two.patch("v1", "ResourceQuota", "tenant-quota", {"spec": {"hard": {"pods": "999"}}},
                    namespace=target, patch_type=MERGE)
    drifted = time.monotonic()
    assert wait_until(lambda: (get(fleet.two, "v1", "ResourceQuota", "tenant-quota", target)
                               or {}).get("spec", {}).get("hard", {}).get("pods") == "20",
                      DRIFT_BOUND)
    print(f"drift in the second real plane repaired in "
          f"{(time.monotonic() - drifted) * 1000:.0f} ms")
    # the audit log shows the operator's repair under its own user (so the count below can fail)
    assert wait_until(lambda: ("patch", "resourcequotas", "tenant-quota") in operator_requests(
        fleet.edge_plane, before_drift), 5)

    # a forced resync: no write, no GET of a child, by the operator's user in either plane
    time.sleep(0.5)
    offsets = [audit_offset(p) for p in (fleet.home_plane, fleet.edge_plane)]
    key = (fleet.namespace, "acme")
    reconciles = fleet.runtime.stats.reconciles[key]
    assert fleet.runtime.resync_all() == 1
    assert wait_until(lambda: fleet.runtime.stats.reconciles[key] > reconciles)
    time.sleep(0.5)
    for plane, offset in zip((fleet.home_plane, fleet.edge_plane), offsets, strict=True):
        asked = operator_requests(plane, offset)
        writes = [r for r in asked if r[0] in WRITES and r[1] not in ("leases", "events")]
        reads = [r for r in asked if r[0] == "get" and r[1] in CHILD_RESOURCES]
        assert (writes, reads) == ([], []), asked

    delete_tenant(fleet, "acme", target)


@pytest.mark.needs_controller_manager  # the pruned Namespace must go before it is made again
def test_a_cluster_unlabelled_loses_the_children_and_labelled_again_gets_them(
        fleet: Fleet) -> None:
    target = create_tenant(fleet, "beta")
    assert wait_until(lambda: converged(fleet.home, target) and converged(fleet.two, target))
    try:
        fleet.home.patch("v1", "Secret", "edge-2", {"metadata": {"labels": {"env": "dev"}}},
                         namespace=fleet.namespace, patch_type=MERGE)
        assert wait_until(lambda: removed(fleet.two, target))
        assert wait_until(lambda: set(summary(fleet.home, fleet.namespace, "beta")) == {
            "edge-1"})
        assert converged(fleet.home, target)
    finally:
        fleet.home.patch("v1", "Secret", "edge-2", {"metadata": {"labels": {"env": "prod"}}},
                         namespace=fleet.namespace, patch_type=MERGE)
    relabelled = time.monotonic()
    # the pruned namespace may still be Terminating: its successor is made once it is gone
    assert wait_until(lambda: converged(fleet.two, target), 60)
    assert wait_until(lambda: summary(fleet.home, fleet.namespace, "beta") == BOTH_CONVERGED)
    print(f"labelled again: converged there in {time.monotonic() - relabelled:.2f} s")
    delete_tenant(fleet, "beta", target)


def test_a_stopped_api_server_holds_back_only_its_cluster_then_all_converge(
        fleet: Fleet) -> None:
    target = create_tenant(fleet, "gamma")
    assert wait_until(lambda: converged(fleet.home, target) and converged(fleet.two, target))
    fleet.edge_plane.stop_apiserver()
    try:
        fleet.home.patch(API_VERSION, KIND, "gamma", {"spec": {"quota": {"pods": 30}}},
                         namespace=fleet.namespace, patch_type=MERGE)
        assert wait_until(lambda: converged(fleet.home, target, pods=30))  # as usual
        assert wait_until(lambda: summary(fleet.home, fleet.namespace, "gamma").get(
            "edge-2") == ("Waiting", "ClusterUnavailable"))
        tenant = fleet.home.get(API_VERSION, KIND, "gamma", namespace=fleet.namespace)
        conditions = {c["type"]: c for c in tenant["status"]["conditions"]}
        assert conditions["Reconciled"]["status"] == "False"
        assert "'edge-2'" in conditions["Reconciled"]["message"]
        assert summary(fleet.home, fleet.namespace, "gamma")["edge-1"] == (
            "Converged", "Converged")
    finally:
        fleet.edge_plane.start_apiserver()
    back = time.monotonic()
    assert wait_until(lambda: converged(fleet.two, target, pods=30), 60)
    assert wait_until(lambda: summary(fleet.home, fleet.namespace, "gamma") == BOTH_CONVERGED)
    print(f"second API server back: converged there in {time.monotonic() - back:.2f} s")
    for kind, api_version in (("ResourceQuota", "v1"), ("Role", RBAC), ("RoleBinding", RBAC)):
        items = fleet.two.list(api_version, kind, namespace=target)["items"]
        assert [i["metadata"]["name"] for i in items] == [
            {"ResourceQuota": "tenant-quota", "Role": "tenant-admin",
             "RoleBinding": "tenant-admins"}[kind]]
    delete_tenant(fleet, "gamma", target)
