"""``builders.helm``: three charts kept in ``tests/fixtures/charts`` rendered by Helm's own engine
(helm-python-sdk, the ``helm`` extra) and split into builders, compared with the objects written
out here: ``webapp`` (``tpl``, ``include``, ``toYaml``, ``required``, ``range``, ``if``,
``with``, Sprig, ``NOTES.txt``), ``widget-operator`` (``crds/``, RBAC, pre-install hooks, a
``test`` hook, namespaces forced) and ``monitored`` (loaded from a ``.tgz``; ``.Capabilities``;
a post-install hook refused). Also: render errors naming the chart, template and line, the
cache (a second call renders nothing), overrides on top, and the engine missing."""

from __future__ import annotations

import copy
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

import builders
from builders import Component, DesiredState, compose, helm, run_builders
from builders.composition import dependencies_of

pytest.importorskip("helm_python", reason="Helm's engine (helm-python-sdk, the helm extra) "
                    "is not installed")

CHARTS = Path(__file__).resolve().parents[1] / "fixtures" / "charts"
WEBAPP_LABELS = {
    "app.kubernetes.io/name": "webapp", "app.kubernetes.io/instance": "shop",
    "helm.sh/chart": "webapp-1.2.0", "app.kubernetes.io/version": "2.5.1",
    "app.kubernetes.io/managed-by": "Helm",
}
SELECTOR = {"app.kubernetes.io/name": "webapp", "app.kubernetes.io/instance": "shop"}


def _meta(name: str, template: str, *, chart: str, namespace: str | None = None,
          labels: dict[str, str] | None = None, **annotations: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels is not None:
        meta["labels"] = labels
    if namespace is not None:
        meta["namespace"] = namespace
    meta["annotations"] = {**annotations, helm.CHART_ANNOTATION: chart,
                           helm.TEMPLATE_ANNOTATION: template}
    return meta


def _webapp(template: str) -> dict[str, Any]:
    return _meta("shop-webapp", f"webapp/templates/{template}", chart="webapp-1.2.0",
                 namespace="prod", labels=WEBAPP_LABELS)


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    helm.clear_cache()


def test_webapp_renders_the_objects_written_out_here_in_install_order() -> None:
    chart = helm.chart(CHARTS / "webapp", release="shop", namespace="prod", values={
        "hostname": "WEB.Example.com", "env": {"mode": "fast", "level": "info"},
        "image": {"tag": "2.6.0"}})
    assert (chart.chart, chart.release, chart.namespace) == ("webapp-1.2.0", "shop", "prod")
    assert (chart.crds, chart.hooks, len(chart)) == ((), (), 3)
    built = run_builders(chart)
    assert all(state is DesiredState.PRESENT for _, state in built)
    assert [obj for obj, _ in built] == [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _webapp("configmap.yaml"),
         "data": {"greeting": "Hello from shop in prod", "hostname": "web.example.com",
                  "LEVEL": "info", "MODE": "fast"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": _webapp("service.yaml"),
         "spec": {"selector": SELECTOR, "ports": [
             {"name": "http", "port": 80, "targetPort": "http"},
             {"name": "metrics", "port": 9090, "targetPort": "metrics"}]}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _webapp("deployment.yaml"),
         "spec": {"replicas": 2, "selector": {"matchLabels": SELECTOR}, "template": {
             "metadata": {"labels": SELECTOR},
             "spec": {"containers": [{
                 "name": "web", "image": "nginx:2.6.0",
                 "ports": [{"name": "http", "containerPort": 80},
                           {"name": "metrics", "containerPort": 9090}],
                 "resources": {"limits": {"memory": "128Mi"}},
                 "envFrom": [{"configMapRef": {"name": "shop-webapp"}}]}]}}}},
    ]
    # one component named after the release, nothing to wait for
    [component] = chart.components()
    assert (component.name, component.depends_on, component.when_served) == ("shop", (), False)
    [served] = chart.components("web", depends_on=["db"], when_served=True)
    assert (served.name, served.depends_on, served.when_served) == ("web", ("db",), True)


def test_webapp_conditionals_and_the_default_image_tag() -> None:
    chart = helm.chart(CHARTS / "webapp", release="shop", namespace="prod", values={
        "hostname": "a", "service": {"enabled": False}, "replicaCount": 5})
    objects = [obj for obj, _ in run_builders(chart)]
    assert [obj["kind"] for obj in objects] == ["ConfigMap", "Deployment"]
    assert objects[0]["data"] == {"greeting": "Hello from shop in prod", "hostname": "a"}
    assert objects[1]["spec"]["replicas"] == 5
    assert objects[1]["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2.5.1"


def test_a_missing_required_value_names_the_chart_template_and_line() -> None:
    with pytest.raises(helm.ChartRenderError) as failed:
        helm.chart(CHARTS / "webapp", release="shop", namespace="prod")
    error = failed.value
    assert isinstance(error, ValueError)
    assert isinstance(error, builders.BuilderError)
    assert (error.chart, error.template, error.line) == (
        "webapp-1.2.0", "webapp/templates/configmap.yaml", 9)
    assert str(error) == ("chart webapp-1.2.0: webapp/templates/configmap.yaml:9: execution "
                          "error at (webapp/templates/configmap.yaml:9:15): hostname is required")
    # the failure is cached: asking again renders nothing and raises the same error
    with pytest.raises(helm.ChartRenderError, match="hostname is required"):
        helm.chart(CHARTS / "webapp", release="shop", namespace="prod")
    assert helm.cache_info() == helm.CacheInfo(hits=1, renders=1, size=1)


def test_a_template_error_and_text_that_is_no_object(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    (broken / "templates").mkdir(parents=True)
    (broken / "Chart.yaml").write_text("apiVersion: v2\nname: broken\nversion: 0.0.1\n")
    (broken / "templates" / "a.yaml").write_text("kind: ConfigMap\n\n{{ .Values.x | nosuch }}\n")
    with pytest.raises(helm.ChartRenderError) as failed:
        helm.chart(broken, release="r", namespace="n")
    assert (failed.value.template, failed.value.line) == ("broken/templates/a.yaml", 3)
    assert 'function "nosuch" not defined' in str(failed.value)
    (broken / "templates" / "a.yaml").write_text("data:\n  a: [1\n")
    with pytest.raises(helm.ChartRenderError, match="not YAML") as failed:
        helm.chart(broken, release="r", namespace="n")
    assert (failed.value.template, failed.value.line) == ("broken/templates/a.yaml", 3)
    (broken / "templates" / "a.yaml").write_text("apiVersion: v1\nkind: ConfigMap\n")
    with pytest.raises(helm.ChartRenderError, match="not an object with apiVersion, kind"):
        helm.chart(broken, release="r", namespace="n")


def test_no_such_chart_is_a_load_error(tmp_path: Path) -> None:
    with pytest.raises(helm.ChartLoadError, match="no such chart") as failed:
        helm.chart(tmp_path / "absent", release="r", namespace="n")
    assert isinstance(failed.value, OSError)
    (tmp_path / "empty").mkdir()
    with pytest.raises(helm.ChartLoadError, match=r"Chart\.yaml"):
        helm.chart(tmp_path / "empty", release="r", namespace="n")


def _operator_meta(name: str, template: str, namespace: str | None = "ops",
                   **annotations: str) -> dict[str, Any]:
    return _meta(name, f"widget-operator/{template}", chart="widget-operator-0.3.0",
                 namespace=namespace, **annotations)


def _crd(plural: str, kind: str, scope: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": _operator_meta(f"{plural}.example.com", "crds/widgets.yaml", None,
                                   **{helm.KEEP_ANNOTATION: "keep"}),
        "spec": {"group": "example.com", "scope": scope, "names": {
            "plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                "openAPIV3Schema": {"type": "object",
                                    "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


def test_widget_operator_splits_crds_hooks_and_the_rest_into_ordered_components() -> None:
    chart = helm.chart(CHARTS / "operator", release="widgets", namespace="ops")
    components = chart.components(depends_on="storage")
    assert [(c.name, c.depends_on) for c in components] == [
        ("widgets-crds", ()),
        ("widgets-hooks", ("widgets-crds", "storage")),
        ("widgets", ("widgets-crds", "widgets-hooks", "storage")),
    ]
    crds = run_builders(chart.crds)
    assert crds == [(_crd("widgets", "Widget", "Namespaced"), DesiredState.CREATED),
                    (_crd("widgetclasses", "WidgetClass", "Cluster"), DesiredState.CREATED)]
    deleted = helm.chart(CHARTS / "operator", release="widgets", namespace="ops", keep_crds=False)
    assert all(helm.KEEP_ANNOTATION not in obj["metadata"]["annotations"]
               for obj, _ in run_builders(deleted.crds))
    image = "example.com/widget-operator:0.3.0"
    assert run_builders(chart.hooks) == [  # by weight: -1, then 5
        ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": _operator_meta(
            "widgets-migration-plan", "templates/migrate.yaml",
            **{"helm.sh/hook": "pre-install", "helm.sh/hook-weight": "-1"}),
          "data": {"plan": "all"}}, DesiredState.CREATED),
        ({"apiVersion": "batch/v1", "kind": "Job", "metadata": _operator_meta(
            "widgets-migrate", "templates/migrate.yaml",
            **{"helm.sh/hook": "pre-install,pre-upgrade", "helm.sh/hook-weight": "5"}),
          "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
              {"name": "migrate", "image": image, "args": ["migrate"]}]}}}},
         DesiredState.CREATED),
    ]
    rbac = "rbac.authorization.k8s.io/v1"
    assert [obj for obj, _ in run_builders(chart.objects)] == [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": _operator_meta("widgets", "templates/rbac.yaml")},
        {"apiVersion": rbac, "kind": "ClusterRole",
         "metadata": _operator_meta("widgets", "templates/rbac.yaml", None),
         "rules": [{"apiGroups": ["example.com"], "resources": ["widgets", "widgetclasses"],
                    "verbs": ["get", "list", "watch", "update"]}]},
        {"apiVersion": rbac, "kind": "ClusterRoleBinding",
         "metadata": _operator_meta("widgets", "templates/rbac.yaml", None),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "widgets"},
         "subjects": [{"kind": "ServiceAccount", "name": "widgets", "namespace": "ops"}]},
        # the template said namespace: somewhere-else; the release namespace wins
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": _operator_meta("widgets", "templates/deployment.yaml"),
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "widgets"}}, "template": {
             "metadata": {"labels": {"app": "widgets"}}, "spec": {
                 "serviceAccountName": "widgets",
                 "containers": [{"name": "operator", "image": image}]}}}},
        # cluster-scoped by the chart's own CRD: the namespace the template gave is dropped
        {"apiVersion": "example.com/v1", "kind": "WidgetClass",
         "metadata": _operator_meta("standard", "templates/deployment.yaml", None),
         "spec": {"size": "medium"}},
    ]
    # the test hook (templates/test.yaml) and NOTES-like files are left out
    assert len(chart) == 2 + 2 + 5
    # iterating gives the three components' builders, each carrying its node
    assert [dependencies_of(b).name for b in chart] == (  # type: ignore[union-attr]
        ["widgets-crds"] * 2 + ["widgets-hooks"] * 2 + ["widgets"] * 5)


def test_a_chart_inside_a_users_component_and_with_overrides_on_top() -> None:
    chart = helm.chart(CHARTS / "operator", release="widgets", namespace="ops",
                       values={"migrate": False})
    patched = chart.with_overrides({"Deployment/widgets": {"spec": {"template": {"spec": {
        "containers": [{"name": "operator", "env": [{"name": "DEBUG", "value": "1"}]}]}}}}})
    user = Component(name="operator", builders=patched.objects, depends_on="widgets-crds",
                     ready_when=lambda obj: True)
    built = compose(Component(name="widgets-crds", builders=chart.crds), user)
    deployment = next(obj for obj, _ in run_builders(built) if obj["kind"] == "Deployment")
    assert deployment["spec"]["template"]["spec"]["containers"] == [{
        "name": "operator", "image": "example.com/widget-operator:0.3.0",
        "env": [{"name": "DEBUG", "value": "1"}]}]
    assert {dependencies_of(b).name for b in built} == {  # type: ignore[union-attr]
        "widgets-crds", "operator"}
    with pytest.raises(helm.ChartError, match=r"\['Service/nope'\]"):
        chart.with_overrides({"Service/nope": {"spec": {}}})


def test_builders_hand_out_fresh_copies_and_the_cache_renders_once_per_input() -> None:
    values = {"hostname": "a"}
    first = helm.chart(CHARTS / "webapp", release="shop", namespace="prod", values=values)
    obj, _ = first.objects[0]()
    obj["data"]["hostname"] = "changed"
    again = helm.chart(CHARTS / "webapp", release="shop", namespace="prod",
                       values=copy.deepcopy(values))
    assert again.objects[0]()[0]["data"]["hostname"] == "a"
    assert helm.cache_info() == helm.CacheInfo(hits=1, renders=1, size=1)
    helm.chart(CHARTS / "webapp", release="shop", namespace="other", values=values)
    helm.chart(CHARTS / "webapp", release="shop", namespace="prod", values={"hostname": "b"})
    assert helm.cache_info() == helm.CacheInfo(hits=1, renders=3, size=3)


def _packaged(tmp_path: Path) -> Path:
    archive = tmp_path / "monitored-0.1.0.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(CHARTS / "monitored", arcname="monitored")
    return archive


def test_monitored_from_a_tgz_with_capabilities_and_a_refused_hook(tmp_path: Path) -> None:
    archive = _packaged(tmp_path)
    with pytest.raises(helm.ChartHookError) as refused:
        helm.chart(archive, release="m", namespace="mon")
    assert isinstance(refused.value, ValueError)
    assert (refused.value.template, refused.value.hook) == (
        "monitored/templates/notify.yaml", "post-install")
    assert "skip_hooks" in str(refused.value)
    plain = helm.chart(archive, release="m", namespace="mon", skip_hooks={"post-install"},
                       values={"port": "9000"})
    service: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": _meta("m", "monitored/templates/service.yaml", chart="monitored-0.1.0",
                          namespace="mon", labels={"app": "m"}),
        "spec": {"selector": {"app": "m"}, "ports": [{"port": 9000}]}}
    assert [obj for obj, _ in run_builders(plain)] == [service]
    served = helm.chart(archive, release="m", namespace="mon", skip_hooks={"post-install"},
                        values={"port": "9000"}, kube_version="v1.31.0",
                        api_versions=["monitoring.coreos.com/v1/ServiceMonitor"])
    assert [obj for obj, _ in run_builders(served)] == [service, {
        "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
        "metadata": _meta("m", "monitored/templates/service.yaml", chart="monitored-0.1.0",
                          namespace="mon"),
        "spec": {"selector": {"matchLabels": {"app": "m"}}, "endpoints": [{"port": "http"}]}}]


def test_the_engine_is_helms_own() -> None:
    assert helm.engine_version().startswith("v4.")


def test_without_the_engine_the_module_imports_and_chart_says_what_is_missing() -> None:
    script = f"""
import importlib.abc, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "helm_python":
            raise ModuleNotFoundError("No module named 'helm_python' (blocked by the test)")
sys.meta_path.insert(0, Refuse())
from builders import helm
try:
    helm.chart({str(CHARTS / "webapp")!r}, release="r", namespace="n", values={{"hostname": "a"}})
except helm.HelmEngineMissingError as exc:
    assert isinstance(exc, ImportError)
    print(exc)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)
    assert "pip install 'operator-toolkit[helm]'" in done.stdout, done.stderr


def test_with_the_parent_each_object_carries_the_identity_and_no_selector_changes() -> None:
    parent = {"apiVersion": "example.com/v1", "kind": "Shop",
              "metadata": {"name": "shop", "namespace": "prod", "uid": "u-1"}}
    chart = helm.chart(CHARTS / "operator", release="shop", namespace="prod", parent=parent,
                       managed_by="shops", values={"migrate": False})
    built = {f"{obj['kind']}/{obj['metadata']['name']}": obj for obj, _ in run_builders(chart)}
    deployment = built["Deployment/shop"]
    assert deployment["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "shops", "app.kubernetes.io/instance": "shop",
        "app.kubernetes.io/component": "shop", "optk.dev/owner-uid": "u-1"}
    assert deployment["metadata"]["ownerReferences"] == [{
        "apiVersion": "example.com/v1", "kind": "Shop", "name": "shop", "uid": "u-1",
        "controller": True, "blockOwnerDeletion": True}]
    assert deployment["spec"]["selector"] == {"matchLabels": {"app": "shop"}}
    assert deployment["spec"]["template"]["metadata"] == {"labels": {"app": "shop"}}
    for cluster_scoped in ("ClusterRole/shop", "WidgetClass/standard",
                           "CustomResourceDefinition/widgets.example.com"):
        assert "ownerReferences" not in built[cluster_scoped]["metadata"], cluster_scoped
        assert built[cluster_scoped]["metadata"]["labels"]["optk.dev/owner-uid"] == "u-1"
    with pytest.raises(builders.InvalidSpecError, match="managed_by"):
        helm.chart(CHARTS / "operator", release="shop", namespace="prod", parent=parent)


def test_a_cached_failure_is_raised_afresh_each_time() -> None:
    errors = []
    for _ in range(2):
        try:
            helm.chart(CHARTS / "webapp", release="shop", namespace="prod")
        except helm.ChartRenderError as exc:
            errors.append(exc)
    first, second = errors
    assert first is not second
    assert (str(first), first.template, first.line) == (str(second), second.template,
                                                        second.line)
    assert helm.cache_info().renders == 1


def test_hooks_are_done_as_helm_waits_for_them() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}}
    assert helm.hook_done(job) == "hook Job not complete"
    running = {**job, "status": {"startTime": "2026-12-06T00:00:00Z", "active": 1}}
    assert helm.hook_done(running) == "hook Job not complete"  # kstatus would call it Current
    assert helm.hook_done({**job, "status": {"conditions": [
        {"type": "Complete", "status": "True"}]}}) is None
    assert helm.hook_done({**job, "status": {"conditions": [
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}}) == (
        "hook Job failed: BackoffLimitExceeded")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    assert helm.hook_done(pod) == "hook Pod Pending"
    assert helm.hook_done({**pod, "status": {"phase": "Succeeded"}}) is None
    assert helm.hook_done({"apiVersion": "v1", "kind": "ConfigMap"}) is None
    hooks = helm.chart(CHARTS / "operator", release="w", namespace="n").components()[1]
    assert hooks.ready_when is helm.hook_done
