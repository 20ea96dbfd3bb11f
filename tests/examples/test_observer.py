"""The Observer example: an operator whose children are the Thanos operator itself (CRD, RBAC,
ServiceAccount, Deployment) and a Thanos resource. It converges, a forced resync makes no write,
switching its ``thanos`` block off removes the operator with its cluster-scoped objects, and its
deletion leaves nothing of what it created. On the embedded server and the real control plane
(where no Pod runs: the objects are checked, not the operator inside the Deployment)."""

from __future__ import annotations

import ast
import contextlib
import copy
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import examples.observer
from examples.observer.crds import API_VERSION, KIND
from examples.observer.operator import PRUNE, make_operator
from examples.thanos.crds import API_VERSION as THANOS_API_VERSION
from examples.thanos.crds import THANOS_CRD
from reconciler import KubernetesClient, NotFoundError, OperatorRuntime
from reconciler.testing import wait_idle, wait_synced
from tests.driver.conftest import wait_until
from tests.examples.test_thanos_builders import PUBLIC_FACADES

CRD_NAME = THANOS_CRD["metadata"]["name"]
THANOS_SPEC = {"objectStorageSecret": "objstore", "query": {"replicas": 2}}


def _exists(client: KubernetesClient, api_version: str, kind: str, name: str,
            namespace: str | None = None) -> bool:
    try:
        client.get(api_version, kind, name, namespace=namespace)
    except NotFoundError:
        return False
    return True


@pytest.fixture
def kube(kube_api: Any) -> Iterator[KubernetesClient]:
    """A client with no Thanos CRD left by other tests (the Observer must own the one it
    builds), and none left behind by this one."""
    client = KubernetesClient(kube_api.api_client())
    _remove_thanos_crd(client)
    yield client
    _remove_thanos_crd(client)


def _remove_thanos_crd(client: KubernetesClient) -> None:
    try:
        for item in client.list(THANOS_API_VERSION, "Thanos")["items"]:
            meta = item["metadata"]
            client.patch(THANOS_API_VERSION, "Thanos", meta["name"],
                         {"metadata": {"finalizers": None}},
                         patch_type="application/merge-patch+json", namespace=meta["namespace"])
    except NotFoundError:
        pass
    try:
        client.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD_NAME)
    except NotFoundError:
        return
    assert wait_until(lambda: not _exists(client, "apiextensions.k8s.io/v1",
                                          "CustomResourceDefinition", CRD_NAME), 30)


def _owned_objects(client: KubernetesClient, operator_name: str) -> dict[str, int]:
    """How many objects of each kind the Observer builds carry its managed-by label, in every
    namespace and cluster-wide."""
    counts = {}
    for api_version, kind in PRUNE:
        try:
            items = client.list(api_version, kind,
                                label_selector=f"app.kubernetes.io/managed-by={operator_name}")
        except NotFoundError:  # the Thanos kind once its CRD is gone
            items = {"items": []}
        counts[kind] = len(items["items"])
    return counts


def _observer(namespace: str, thanos: dict[str, Any] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {} if thanos is None else {"thanos": thanos}
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": "obs", "namespace": namespace}, "spec": spec}


def _converged(client: KubernetesClient, runtime: OperatorRuntime, ns: str) -> bool:
    if not wait_idle(runtime, 30):
        return False
    live = client.get(API_VERSION, KIND, "obs", namespace=ns)
    conditions = {c["type"]: c["status"] for c in (live.get("status") or {}).get("conditions", ())}
    return conditions.get("Reconciled") == "True"


@pytest.mark.needs_controller_manager
@pytest.mark.both_servers
def test_the_observer_installs_the_thanos_operator_and_removes_it_all(
    kube: KubernetesClient, kube_namespace: str
) -> None:
    ns = kube_namespace
    name = f"observer-{uuid.uuid4().hex[:6]}"
    operator = make_operator(name=name, namespace=ns, events=False)
    runtime = operator.start(kube)
    try:
        assert wait_synced(runtime, 20)
        kube.create(_observer(ns, {"spec": copy.deepcopy(THANOS_SPEC)}))
        assert wait_until(lambda: _converged(kube, runtime, ns), 60)
        assert _owned_objects(kube, name) == {
            "CustomResourceDefinition": 1, "ClusterRole": 1, "ClusterRoleBinding": 1,
            "ServiceAccount": 1, "Deployment": 1, "Thanos": 1,
        }
        deployment = kube.get("apps/v1", "Deployment", "obs-thanos-operator", namespace=ns)
        pod = deployment["spec"]["template"]["spec"]
        assert pod["containers"][0]["command"] == [
            "optk", "run", "examples.thanos.operator:operator"]
        assert pod["serviceAccountName"] == "obs-thanos-operator"
        thanos = kube.get(THANOS_API_VERSION, "Thanos", "obs", namespace=ns)
        assert thanos["spec"]["query"] == {"replicas": 2}
        observer = kube.get(API_VERSION, KIND, "obs", namespace=ns)
        assert observer["metadata"]["finalizers"] == ["optk.dev/cleanup"]

        # a forced resync of a converged Observer writes nothing
        writes, reconciles = runtime.stats.writes, runtime.stats.total
        assert runtime.resync_all() == 1
        assert wait_until(lambda: runtime.stats.total > reconciles, 10)
        assert wait_idle(runtime, 30)
        assert runtime.stats.writes == writes

        # the thanos block off: the operator, its Thanos and its cluster objects go
        kube.patch(API_VERSION, KIND, "obs", {"spec": {"thanos": {"enabled": False}}},
                   patch_type="application/merge-patch+json", namespace=ns)
        assert wait_until(lambda: sum(_owned_objects(kube, name).values()) == 0, 60), \
            _owned_objects(kube, name)

        # on again, then the Observer deleted: nothing it created is left
        kube.patch(API_VERSION, KIND, "obs", {"spec": {"thanos": {"enabled": True}}},
                   patch_type="application/merge-patch+json", namespace=ns)
        assert wait_until(lambda: sum(_owned_objects(kube, name).values()) == 6, 60), \
            _owned_objects(kube, name)
        assert wait_until(lambda: _converged(kube, runtime, ns), 60)
        kube.delete(API_VERSION, KIND, "obs", namespace=ns)
        assert wait_until(lambda: not _exists(kube, API_VERSION, KIND, "obs", ns), 60)
        # the namespaced children go with the garbage collector, the rest went before
        assert wait_until(lambda: sum(_owned_objects(kube, name).values()) == 0, 60), \
            _owned_objects(kube, name)
        assert not _exists(kube, "apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD_NAME)
    finally:
        runtime.stop(5)
        with contextlib.suppress(NotFoundError):
            kube.patch(API_VERSION, KIND, "obs", {"metadata": {"finalizers": None}},
                       patch_type="application/merge-patch+json", namespace=ns)
        for api_version, kind in PRUNE[1:3]:
            for item in kube.list(api_version, kind, label_selector=(
                    f"app.kubernetes.io/managed-by={name}"))["items"]:
                kube.delete(api_version, kind, item["metadata"]["name"])


def test_the_observer_imports_only_public_facades() -> None:
    """DESIGN.md section 1: the example is a user's code; it never reaches a private module."""
    toolkit = ("builders", "objectmatcher", "reconciler")
    for path in sorted(Path(examples.observer.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            modules = (
                [alias.name for alias in node.names] if isinstance(node, ast.Import)
                else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            )
            for module in modules:
                if module.split(".")[0] in toolkit:
                    assert module in PUBLIC_FACADES, f"{path.name} imports {module}"
