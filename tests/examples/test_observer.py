"""The Observer example: an operator whose children are the Thanos operator itself (CRD, RBAC,
ServiceAccount, Deployment) and a Thanos resource, installed in order (issue 24): from the request
log (embedded) and the audit log (real), no request for a Thanos before its CRD is Established
and no write to it before the operator's Deployment is Available (made so by status patches, as a
kubelet would); it converges, a forced resync makes no write, switching its ``thanos`` block off
removes everything in reverse order (the CRD last, after its custom resource is gone), and so does
its deletion, which leaves nothing of what it created. On the embedded server and the real
control plane (where no Pod runs: the objects are checked, not the operator inside the
Deployment)."""

from __future__ import annotations

import ast
import contextlib
import copy
import json
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
from reconciler.testing import make_available, wait_idle, wait_synced
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


class _Trail:
    """The requests a server answered, in order: the embedded server's request log, the real
    control plane's audit log; ``(verb, resource, name, code, namespace)`` each."""

    def __init__(self, kube_api: Any, server: str) -> None:
        self.api, self.real = kube_api, server == "real"
        if not self.real:
            kube_api.enable_request_log()

    def requests(self) -> list[tuple[str, str, str, int, str]]:
        if not self.real:
            return [(r.verb, r.resource.split(".")[0], r.name or "", r.code, r.namespace or "")
                    for r in self.api.request_log() if "/" not in r.resource]
        self.api.request_counts()  # complete up to now
        found = []
        for line in self.api.audit_log_path.read_text().splitlines():
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            if event.get("stage") == "ResponseComplete" and not ref.get("subresource"):
                found.append((event["verb"], str(ref.get("resource")), str(ref.get("name") or ""),
                              int((event.get("responseStatus") or {}).get("code") or 0),
                              str(ref.get("namespace") or "")))
        return found

    def mark(self) -> int:
        return len(self.requests())

    def since(self, mark: int) -> list[tuple[str, str, str, int, str]]:
        return self.requests()[mark:]


_TEARDOWN = (("thanoses", "obs"), ("deployments", "obs-thanos-operator"),
             ("serviceaccounts", "obs-thanos-operator"), ("clusterroles", None),
             ("clusterrolebindings", None), ("customresourcedefinitions", CRD_NAME))


def _deleted_in_reverse(requests: list[tuple[str, str, str, int, str]], ns: str) -> list[str]:
    """The Observer's children in the order their first delete request came; asserts that
    dependents went first (Thanos, operator Deployment, RBAC and ServiceAccount, CRD)."""
    order: list[str] = []
    for verb, resource, name, _, _ in requests:
        for kind, wanted in _TEARDOWN:
            wanted = wanted or f"{ns}-obs-thanos-operator"
            if verb == "delete" and resource == kind and name == wanted and kind not in order:
                order.append(kind)
    assert order[:2] == ["thanoses", "deployments"], order
    assert sorted(order[2:5]) == ["clusterrolebindings", "clusterroles", "serviceaccounts"], order
    assert order[5:] == ["customresourcedefinitions"], order
    return order


def _make_operator_available(kube: KubernetesClient, ns: str) -> None:
    """The operator Deployment Available, as a kubelet would make it: no kubelet runs, nor
    (envtest runs the garbage collector, namespace and service-account controllers only) a
    deployment controller, so its status is patched."""
    make_available(kube, {"apiVersion": "apps/v1", "kind": "Deployment",
                          "metadata": {"name": "obs-thanos-operator", "namespace": ns}})


def _condition(kube: KubernetesClient, ns: str, type_: str) -> dict[str, Any]:
    live = kube.get(API_VERSION, KIND, "obs", namespace=ns)
    return next((c for c in (live.get("status") or {}).get("conditions", ())
                 if c["type"] == type_), {})


@pytest.mark.needs_controller_manager
@pytest.mark.both_servers
def test_the_observer_installs_in_order_and_tears_down_in_reverse(
    kube: KubernetesClient, kube_namespace: str, kube_api: Any, kube_api_name: str
) -> None:
    ns = kube_namespace
    trail = _Trail(kube_api, kube_api_name)
    name = f"observer-{uuid.uuid4().hex[:6]}"
    operator = make_operator(name=name, namespace=ns, events=False)
    runtime = operator.start(kube)
    try:
        assert wait_synced(runtime, 20)
        start = trail.mark()
        kube.create(_observer(ns, {"spec": copy.deepcopy(THANOS_SPEC)}))
        # CRD -> (Established) -> RBAC and ServiceAccount -> Deployment; the Thanos waits
        assert wait_until(lambda: _exists(kube, "apps/v1", "Deployment", "obs-thanos-operator",
                                          ns), 60)
        waiting = (f"1 waiting: Thanos {ns}/obs (component 'thanos') waits for component "
                   f"'operator': Deployment {ns}/obs-thanos-operator: ")  # then why: no status
        assert wait_until(lambda: str(_condition(kube, ns, "Ready").get("message")).startswith(
            waiting), 30), _condition(kube, ns, "Ready")
        assert _condition(kube, ns, "Reconciled")["reason"] == "DependencyNotReady"
        crd = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD_NAME)
        assert {c["type"]: c["status"] for c in crd["status"]["conditions"]}["Established"] == \
            "True"
        assert wait_idle(runtime, 30)
        before = trail.since(start)
        # 0 requests for a Thanos before its CRD was Established (one would have been answered
        # 404: the kind is served from then on; the operator's informer of the Thanos kind it
        # prunes starts listing then), and 0 writes to it before the Deployment is Available
        # (in this test's namespace: another test's operator may still watch Thanos elsewhere)
        thanos_requests = [r for r in before if r[1] == "thanoses" and r[4] == ns]
        assert [r for r in thanos_requests if r[3] == 404] == []
        assert [r for r in thanos_requests if r[0] not in ("get", "list", "watch")] == []
        available = trail.mark()
        _make_operator_available(kube, ns)
        assert wait_until(lambda: _converged(kube, runtime, ns), 60)
        writes = [r[:2] for r in trail.since(available) if r[1] == "thanoses" and r[0] == "create"]
        assert writes == [("create", "thanoses")]
        assert _owned_objects(kube, name) == {
            "CustomResourceDefinition": 1, "ClusterRole": 1, "ClusterRoleBinding": 1,
            "ServiceAccount": 1, "Deployment": 1, "Service": 0, "Thanos": 1,
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
        writes_before, reconciles = runtime.stats.writes, runtime.stats.total
        assert runtime.resync_all() == 1
        assert wait_until(lambda: runtime.stats.total > reconciles, 10)
        assert wait_idle(runtime, 30)
        assert runtime.stats.writes == writes_before

        # the thanos block off: everything goes, dependents first, each once those are gone
        off = trail.mark()
        kube.patch(API_VERSION, KIND, "obs", {"spec": {"thanos": {"enabled": False}}},
                   patch_type="application/merge-patch+json", namespace=ns)
        assert wait_until(lambda: sum(_owned_objects(kube, name).values()) == 0, 60), \
            _owned_objects(kube, name)
        _deleted_in_reverse(trail.since(off), ns)

        # on again, then the Observer deleted: the same reverse order, nothing left
        kube.patch(API_VERSION, KIND, "obs", {"spec": {"thanos": {"enabled": True}}},
                   patch_type="application/merge-patch+json", namespace=ns)
        assert wait_until(lambda: _exists(kube, "apps/v1", "Deployment", "obs-thanos-operator",
                                          ns), 60)
        _make_operator_available(kube, ns)
        assert wait_until(lambda: sum(_owned_objects(kube, name).values()) == 6, 60), \
            _owned_objects(kube, name)
        assert wait_until(lambda: _converged(kube, runtime, ns), 60)
        gone = trail.mark()
        kube.delete(API_VERSION, KIND, "obs", namespace=ns)
        assert wait_until(lambda: not _exists(kube, API_VERSION, KIND, "obs", ns), 60)
        assert wait_until(lambda: sum(_owned_objects(kube, name).values()) == 0, 60), \
            _owned_objects(kube, name)
        assert not _exists(kube, "apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD_NAME)
        _deleted_in_reverse(trail.since(gone), ns)
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
