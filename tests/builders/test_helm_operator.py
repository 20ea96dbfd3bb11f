"""A chart installed by an operator on the embedded API server, over HTTP with the real client:
the ``widget-operator`` chart of ``tests/fixtures/charts`` as the children of a ``ChartRelease``
parent (values from its spec). The CRDs of ``crds/`` are created and Established before the
hook and the rest are written, the hook before the rest; a forced resync makes 0 writes and
renders nothing; a changed value patches only the object whose rendering changed; a template
whose output goes away is pruned; a failing render gives the parent a condition naming the
chart, template and line, permanent (no retry, no render); deleting the parent leaves nothing
of the chart but its CRDs, kept as Helm keeps them (released: no longer the parent's)."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builders import ResourceBuilder, helm
from reconciler import KubernetesClient, NotFoundError, Operator, Policies, Reporting
from reconciler._reconcile.sharing import is_kept, keep_patch
from reconciler.testing import wait_idle, wait_synced
from tests.driver.conftest import wait_until

pytest.importorskip("helm_python", reason="Helm's engine (helm-python-sdk, the helm extra) "
                    "is not installed")

CHART = Path(__file__).resolve().parents[1] / "fixtures" / "charts" / "operator"
GROUP = "charts.test.optk.dev"
API_VERSION = f"{GROUP}/v1"
KIND = "ChartRelease"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"chartreleases.{GROUP}"},
    "spec": {"group": GROUP, "scope": "Namespaced", "names": {
        "plural": "chartreleases", "singular": "chartrelease", "kind": KIND,
        "listKind": f"{KIND}List"},
        "versions": [{"name": "v1", "served": True, "storage": True,
                      "subresources": {"status": {}},
                      "schema": {"openAPIV3Schema": {
                          "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
}
CRD_API = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
PRUNE = (CRD_API, ("rbac.authorization.k8s.io/v1", "ClusterRole"),
         ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"), ("v1", "ServiceAccount"),
         ("v1", "ConfigMap"), ("apps/v1", "Deployment"), ("example.com/v1", "WidgetClass"))
WIDGET_CRDS = ("widgets.example.com", "widgetclasses.example.com")


def build(parent: dict[str, Any]) -> list[ResourceBuilder]:
    """The chart rendered with the parent's ``spec.values``, released as the parent; its CRDs
    kept on uninstall unless ``spec.keepCrds`` is false."""
    meta, spec = parent["metadata"], parent.get("spec") or {}
    return list(helm.chart(CHART, values=spec.get("values") or {}, release=meta["name"],
                           namespace=meta["namespace"], keep_crds=spec.get("keepCrds", True)))


def _operator(ns: str, release: str) -> Operator:
    return Operator(api_version=API_VERSION, kind=KIND, name=f"charts-{release}", namespace=ns,
                    build=build, install=[CRD], policies=Policies(prune=PRUNE),
                    reporting=Reporting(events=False))


def _exists(client: KubernetesClient, api_version: str, kind: str, name: str,
            namespace: str | None = None) -> bool:
    try:
        client.get(api_version, kind, name, namespace=namespace)
    except NotFoundError:
        return False
    return True


def _condition(client: KubernetesClient, ns: str, name: str, type_: str) -> dict[str, Any]:
    live = client.get(API_VERSION, KIND, name, namespace=ns)
    return next((c for c in (live.get("status") or {}).get("conditions", ())
                 if c["type"] == type_), {})


@pytest.fixture
def kube(kube_api: Any) -> Iterator[KubernetesClient]:
    client = KubernetesClient(kube_api.api_client())
    yield client
    for name in WIDGET_CRDS:
        with contextlib.suppress(NotFoundError):
            client.delete(*CRD_API, name)


def _writes(requests: list[Any]) -> list[tuple[str, str, str]]:
    return [(r.verb, r.resource.split(".")[0], r.name or "") for r in requests
            if r.verb in ("create", "update", "patch", "delete") and "/" not in r.resource]


def test_a_chart_converges_in_order_resyncs_quietly_patches_prunes_and_tears_down(
    kube: KubernetesClient, kube_namespace: str, kube_api: Any,
) -> None:
    ns, release = kube_namespace, f"w{uuid.uuid4().hex[:6]}"
    operator = _operator(ns, release)
    helm.clear_cache()
    kube_api.enable_request_log()
    runtime = operator.start(kube)
    try:
        assert wait_synced(runtime, 20)
        start = len(kube_api.request_log())
        kube.create({"apiVersion": API_VERSION, "kind": KIND,
                     "metadata": {"name": release, "namespace": ns},
                     "spec": {"values": {"migrate": False}}})
        assert wait_until(lambda: _exists(kube, "example.com/v1", "WidgetClass", "standard"), 60)
        assert wait_idle(runtime, 30)
        assert wait_until(lambda: _condition(kube, ns, release, "Reconciled").get("status")
                          == "True", 30), _condition(kube, ns, release, "Reconciled")
        created = [resource for verb, resource, _ in _writes(kube_api.request_log()[start:])
                   if verb == "create" and resource not in ("chartreleases", "leases")]
        # the CRDs first (then Established), then the hook, then the rest
        assert created[:3] == ["customresourcedefinitions"] * 2 + ["configmaps"], created
        assert sorted(created[3:]) == ["clusterrolebindings", "clusterroles", "deployments",
                                       "serviceaccounts", "widgetclasses"], created
        deployment = kube.get("apps/v1", "Deployment", release, namespace=ns)
        labels = deployment["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == f"charts-{release}"
        assert deployment["metadata"]["annotations"][helm.TEMPLATE_ANNOTATION] == (
            "widget-operator/templates/deployment.yaml")
        assert deployment["spec"]["selector"] == {"matchLabels": {"app": release}}
        assert deployment["spec"]["template"]["metadata"]["labels"] == {"app": release}
        assert not _exists(kube, "v1", "Pod", f"{release}-test", ns)  # the test hook: left out
        # cluster-scoped as the chart's CRD declares, though discovery did not know the kind
        # when it was created (no owner reference to the namespaced parent)
        widget_class = kube.get("example.com/v1", "WidgetClass", "standard")["metadata"]
        assert "ownerReferences" not in widget_class
        assert widget_class["annotations"]["optk.dev/owner"] == f"{KIND} {ns}/{release}"
        assert helm.cache_info().renders == 1

        # a forced resync: no write, no render
        writes, reconciles = runtime.stats.writes, runtime.stats.total
        mark = len(kube_api.request_log())
        assert runtime.resync_all() == 1
        assert wait_until(lambda: runtime.stats.total > reconciles, 10)
        assert wait_idle(runtime, 30)
        assert runtime.stats.writes == writes, _writes(kube_api.request_log()[mark:])
        assert helm.cache_info().renders == 1

        # a changed value patches only the object whose rendering changed
        mark = len(kube_api.request_log())
        kube.patch(API_VERSION, KIND, release, {"spec": {"values": {
            "image": "example.com/widget-operator:0.4.0"}}},
            patch_type="application/merge-patch+json", namespace=ns)
        assert wait_until(lambda: kube.get("apps/v1", "Deployment", release, namespace=ns)[
            "spec"]["template"]["spec"]["containers"][0]["image"].endswith(":0.4.0"), 30)
        assert wait_idle(runtime, 30)
        assert [w for w in _writes(kube_api.request_log()[mark:])
                if w[1] != "chartreleases"] == [("patch", "deployments", release)]

        # a template whose output goes away: its object is pruned
        kube.patch(API_VERSION, KIND, release, {"spec": {"values": {"widgetClass": False}}},
                   patch_type="application/merge-patch+json", namespace=ns)
        assert wait_until(lambda: not _exists(kube, "example.com/v1", "WidgetClass",
                                              "standard"), 30)

        # a failing render: a condition naming the chart, template and line
        kube.patch(API_VERSION, KIND, release, {"spec": {"values": {"image": ""}}},
                   patch_type="application/merge-patch+json", namespace=ns)
        expected = ("chart widget-operator-0.3.0: widget-operator/templates/deployment.yaml:17")
        assert wait_until(lambda: expected in str(
            _condition(kube, ns, release, "Reconciled").get("message")), 30), \
            _condition(kube, ns, release, "Reconciled")
        failed = _condition(kube, ns, release, "Reconciled")
        assert "image is required" in failed["message"]
        assert failed["reason"] == "ChartRenderFailed"
        assert _condition(kube, ns, release, "Stalled").get("status") == "True"
        assert wait_idle(runtime, 30)
        # not retried hot: permanent until the parent changes; a resync renders nothing
        reconciles, renders = runtime.stats.total, helm.cache_info().renders
        time.sleep(1.5)
        assert runtime.stats.total == reconciles
        assert runtime.resync_all() == 1
        assert wait_idle(runtime, 30)
        assert helm.cache_info().renders == renders  # the failure is not rendered again

        # deleting the parent leaves nothing of the chart but its CRDs, kept as Helm keeps
        # them (helm.sh/resource-policy: keep): released, no longer the parent's
        kube.delete(API_VERSION, KIND, release, namespace=ns)
        assert wait_until(lambda: not _exists(kube, API_VERSION, KIND, release, ns), 60)
        for api_version, kind, name, where in (
                ("apps/v1", "Deployment", release, ns), ("v1", "ServiceAccount", release, ns),
                ("rbac.authorization.k8s.io/v1", "ClusterRole", release, None),
                ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", release, None)):
            assert wait_until(lambda a=api_version, k=kind, n=name, w=where: not _exists(
                kube, a, k, n, w), 30), (kind, name)
        for name in WIDGET_CRDS:
            meta = kube.get(*CRD_API, name)["metadata"]
            assert "optk.dev/owner-uid" not in (meta.get("labels") or {}), meta
            assert "optk.dev/owner" not in meta["annotations"], meta
            assert meta["annotations"][helm.KEEP_ANNOTATION] == "keep"
    finally:
        runtime.stop(5)
        with contextlib.suppress(NotFoundError):
            kube.patch(API_VERSION, KIND, release, {"metadata": {"finalizers": None}},
                       patch_type="application/merge-patch+json", namespace=ns)
        for kind in ("ClusterRole", "ClusterRoleBinding"):
            with contextlib.suppress(NotFoundError):
                kube.delete("rbac.authorization.k8s.io/v1", kind, release)


def test_crds_not_kept_when_asked_go_with_the_parent(
    kube: KubernetesClient, kube_namespace: str,
) -> None:
    ns, release = kube_namespace, f"w{uuid.uuid4().hex[:6]}"
    runtime = _operator(ns, release).start(kube)
    try:
        assert wait_synced(runtime, 20)
        kube.create({"apiVersion": API_VERSION, "kind": KIND,
                     "metadata": {"name": release, "namespace": ns},
                     "spec": {"values": {"migrate": False}, "keepCrds": False}})
        assert wait_until(lambda: _exists(kube, "example.com/v1", "WidgetClass", "standard"), 60)
        assert wait_idle(runtime, 30)
        kube.delete(API_VERSION, KIND, release, namespace=ns)
        assert wait_until(lambda: not _exists(kube, API_VERSION, KIND, release, ns), 60)
        for name in WIDGET_CRDS:  # the custom resource first, then its CRD
            assert wait_until(lambda n=name: not _exists(kube, *CRD_API, n), 30), name
    finally:
        runtime.stop(5)
        with contextlib.suppress(NotFoundError):
            kube.patch(API_VERSION, KIND, release, {"metadata": {"finalizers": None}},
                       patch_type="application/merge-patch+json", namespace=ns)


def test_the_keep_patch_releases_a_child_from_its_parent_only() -> None:
    live = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {
        "name": "data", "namespace": "a", "resourceVersion": "7",
        "labels": {"optk.dev/owner-uid": "u1", "app": "x"},
        "annotations": {"optk.dev/owner": "Thing a/t", helm.KEEP_ANNOTATION: "keep"},
        "ownerReferences": [{"uid": "other"}, {"uid": "u1", "controller": True}]}}
    assert is_kept(live)
    assert keep_patch(live, "u1") == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "remove", "path": "/metadata/labels/optk.dev~1owner-uid"},
        {"op": "remove", "path": "/metadata/annotations/optk.dev~1owner"},
        {"op": "remove", "path": "/metadata/ownerReferences/1"}]
    assert not is_kept({"metadata": {"annotations": {helm.KEEP_ANNOTATION: "delete"}}})


def test_the_rest_waits_for_a_pre_install_job_to_complete(
    kube: KubernetesClient, kube_namespace: str,
) -> None:
    """As Helm waits for a hook: the chart's objects are not written while its pre-install Job
    runs (the embedded server runs no Job controller: its status is patched as one would)."""
    ns, release = kube_namespace, f"w{uuid.uuid4().hex[:6]}"
    runtime = _operator(ns, release).start(kube)
    try:
        assert wait_synced(runtime, 20)
        kube.create({"apiVersion": API_VERSION, "kind": KIND,
                     "metadata": {"name": release, "namespace": ns},
                     "spec": {"values": {"migrate": True}, "keepCrds": False}})
        assert wait_until(lambda: _exists(kube, "batch/v1", "Job", f"{release}-migrate", ns), 60)
        assert wait_idle(runtime, 30)
        waiting = f"waits for component '{release}-hooks': Job {ns}/{release}-migrate: hook Job"
        assert waiting in str(_condition(kube, ns, release, "Reconciled").get("message"))
        assert not _exists(kube, "apps/v1", "Deployment", release, ns)
        kube.patch("batch/v1", "Job", f"{release}-migrate", {"status": {
            "startTime": "2026-12-06T00:00:00Z", "completionTime": "2026-12-06T00:00:01Z",
            "succeeded": 1, "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True"},
                {"type": "Complete", "status": "True"}]}},
            patch_type="application/merge-patch+json", namespace=ns, subresource="status")
        assert wait_until(lambda: _exists(kube, "apps/v1", "Deployment", release, ns), 30)
    finally:
        runtime.stop(5)
        with contextlib.suppress(NotFoundError):
            kube.delete(API_VERSION, KIND, release, namespace=ns)
        with contextlib.suppress(NotFoundError):
            kube.patch(API_VERSION, KIND, release, {"metadata": {"finalizers": None}},
                       patch_type="application/merge-patch+json", namespace=ns)
        for kind in ("ClusterRole", "ClusterRoleBinding"):
            with contextlib.suppress(NotFoundError):
                kube.delete("rbac.authorization.k8s.io/v1", kind, release)


def test_plan_and_trace_name_the_chart_and_template_of_each_child(
    kube: KubernetesClient, kube_namespace: str, kube_api: Any,
) -> None:
    from reconciler._commands.plans import format_plan, plan_parents
    from reconciler._commands.trace_tree import format_trace, trace_json
    from reconciler._commands.traces import trace_parent

    ns, release = kube_namespace, f"w{uuid.uuid4().hex[:6]}"
    operator = _operator(ns, release)
    parent = {"apiVersion": API_VERSION, "kind": KIND,
              "metadata": {"name": release, "namespace": ns},
              "spec": {"values": {"migrate": False}}}
    runtime = operator.start(kube)
    try:
        assert wait_synced(runtime, 20)
        planned = format_plan(plan_parents(kube, operator.build, [parent],
                                           operator_name=operator.name))
        source = "chart widget-operator-0.3.0, template widget-operator/templates/deployment.yaml"
        line = next(line for line in planned.splitlines() if "Deployment" in line)
        assert line.strip().startswith("create"), planned
        assert line.endswith(f"[{source}]"), planned
        kube.create(parent)
        assert wait_until(lambda: _exists(kube, "apps/v1", "Deployment", release, ns), 60)
        assert wait_idle(runtime, 30)
        trace = trace_parent(kube, operator, name=release, namespace=ns)
        deployment = next(c for c in trace.children if c.ref.kind == "Deployment")
        assert deployment.source == source
        assert f"from: {source}" in format_trace(trace)
        assert {c["kind"]: c["source"] for c in trace_json(trace)["children"]}[
            "Deployment"] == source
    finally:
        runtime.stop(5)
        with contextlib.suppress(NotFoundError):
            kube.delete(API_VERSION, KIND, release, namespace=ns)
