"""The Observer's ``spec.prometheusOperatorChart`` (issue 40): the Prometheus-operator-like chart
kept in ``examples/observer/charts`` installed through ``builders.helm`` beside the Thanos
operator the Observer builds in code, on both servers. Its CRDs are created (and Established)
before its operator's Deployment; the ``Thanos`` waits until both operators' Deployments are
Available; a forced resync makes no write and renders nothing; a changed value patches only
the chart's Deployment; removing the block prunes the chart's objects; deleting the Observer
leaves nothing of either but the chart's CRDs, kept as Helm keeps them (released: no Observer's
owner label)."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pytest
from hypothesis import strategies as st

from builders import helm
from builders.testing import check_builders
from examples.observer.builders import OPERATOR_NAME, PROMETHEUS_OPERATOR_CHART, build
from examples.observer.crds import API_VERSION, KIND
from examples.observer.operator import make_operator
from examples.observer.operator import operator as observer_operator
from reconciler import KubernetesClient, NotFoundError
from reconciler._commands.rbac import derive_rules, operator_facts
from reconciler.testing import make_available, wait_idle, wait_synced
from tests.driver.conftest import wait_until
from tests.examples.test_observer import (
    THANOS_SPEC,
    _condition,
    _converged,
    _exists,
    _Trail,
    kube,  # noqa: F401 (the fixture: no Thanos CRD left over)
)

pytest.importorskip("helm_python", reason="Helm's engine (helm-python-sdk, the helm extra) "
                    "is not installed")

CHART_CRDS = ("servicemonitors.monitoring.observe.optk.dev",
              "prometheuses.monitoring.observe.optk.dev")
CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
PROMETHEUS = "obs-prometheus-operator"


def _observer(ns: str, chart: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "obs", "namespace": ns},
            "spec": {"thanos": {"spec": dict(THANOS_SPEC)}, "prometheusOperatorChart": chart}}


def _available(client: KubernetesClient, name: str, ns: str) -> None:
    make_available(client, {"apiVersion": "apps/v1", "kind": "Deployment",
                            "metadata": {"name": name, "namespace": ns}})


def _chart_objects(client: KubernetesClient, ns: str) -> list[str]:
    """The chart's objects that exist, its CRDs aside (kept: ``_released``)."""
    found = []
    for api_version, kind, name, where in (
            ("apps/v1", "Deployment", PROMETHEUS, ns), ("v1", "Service", PROMETHEUS, ns),
            ("v1", "ServiceAccount", PROMETHEUS, ns),
            ("rbac.authorization.k8s.io/v1", "ClusterRole", f"{ns}-{PROMETHEUS}", None),
            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", f"{ns}-{PROMETHEUS}", None)):
        if _exists(client, api_version, kind, name, where):
            found.append(f"{kind} {name}")
    return found


def _released(client: KubernetesClient) -> bool:
    """Whether the chart's CRDs exist, kept as Helm keeps them and no Observer's any more."""
    for name in CHART_CRDS:
        try:
            meta = client.get(*CRD, name)["metadata"]
        except NotFoundError:
            return False
        if "optk.dev/owner-uid" in (meta.get("labels") or {}):
            return False
    return True


@pytest.mark.needs_controller_manager
@pytest.mark.both_servers
def test_the_observer_installs_its_chart_in_order_beside_the_thanos_operator(
    kube: KubernetesClient, kube_namespace: str, kube_api: Any, kube_api_name: str,  # noqa: F811
) -> None:
    ns = kube_namespace
    trail = _Trail(kube_api, kube_api_name)
    name = f"observer-{uuid.uuid4().hex[:6]}"
    runtime = make_operator(name=name, namespace=ns, events=False).start(kube)
    helm.clear_cache()
    try:
        assert wait_synced(runtime, 20)
        start = trail.mark()
        kube.create(_observer(ns, {"logLevel": "debug"}))
        assert wait_until(lambda: _exists(kube, "apps/v1", "Deployment", PROMETHEUS, ns), 60)
        assert wait_until(lambda: _exists(kube, "apps/v1", "Deployment", "obs-thanos-operator",
                                          ns), 60)
        for crd in CHART_CRDS:
            conditions = kube.get(*CRD, crd)["status"]["conditions"]
            assert {c["type"]: c["status"] for c in conditions}["Established"] == "True"
        creates = [(resource, name_) for verb, resource, name_, code, _ in trail.since(start)
                   if verb == "create" and code < 300]
        crds = [i for i, (resource, _) in enumerate(creates)
                if resource == "customresourcedefinitions"]
        deployments = [i for i, (resource, _) in enumerate(creates) if resource == "deployments"]
        assert len(crds) == 3, creates  # two of the chart's and the Thanos CRD
        assert max(crds) < min(deployments), creates
        deployment = kube.get("apps/v1", "Deployment", PROMETHEUS, namespace=ns)
        assert deployment["spec"]["template"]["spec"]["containers"][0]["args"][0] == (
            "--log-level=debug")
        assert deployment["metadata"]["labels"]["app.kubernetes.io/managed-by"] == name
        assert deployment["metadata"]["annotations"]["optk.dev/helm-chart"] == (
            "prometheus-operator-0.2.0")

        # the Thanos waits for both operators: the Thanos operator's alone is not enough
        _available(kube, "obs-thanos-operator", ns)
        waiting = f"waits for component 'prometheus-operator': Deployment {ns}/{PROMETHEUS}"
        assert wait_until(lambda: waiting in str(_condition(kube, ns, "Ready").get("message")),
                          30), _condition(kube, ns, "Ready")
        assert wait_idle(runtime, 30)
        assert not _exists(kube, "monitoring.optk.dev/v1alpha1", "Thanos", "obs", ns)
        _available(kube, PROMETHEUS, ns)
        assert wait_until(lambda: _converged(kube, runtime, ns), 60)
        assert _exists(kube, "monitoring.optk.dev/v1alpha1", "Thanos", "obs", ns)

        # a forced resync: no write, no render
        writes, reconciles = runtime.stats.writes, runtime.stats.total
        renders = helm.cache_info().renders
        assert runtime.resync_all() == 1
        assert wait_until(lambda: runtime.stats.total > reconciles, 10)
        assert wait_idle(runtime, 30)
        assert (runtime.stats.writes, helm.cache_info().renders) == (writes, renders)

        # a changed value: one patch, to the chart's Deployment
        mark = trail.mark()
        kube.patch(API_VERSION, KIND, "obs", {"spec": {"prometheusOperatorChart": {
            "logLevel": "warn"}}}, patch_type="application/merge-patch+json", namespace=ns)
        assert wait_until(lambda: kube.get("apps/v1", "Deployment", PROMETHEUS, namespace=ns)[
            "spec"]["template"]["spec"]["containers"][0]["args"][0] == "--log-level=warn", 30)
        assert wait_idle(runtime, 30)
        patches = [(verb, resource, name_) for verb, resource, name_, code, _ in
                   trail.since(mark) if verb in ("patch", "update", "create", "delete")
                   and resource not in ("observers", "leases", "events")]
        assert patches == [("patch", "deployments", PROMETHEUS)], patches

        # the block removed: the chart's objects are pruned (its CRDs kept, released), the
        # Thanos operator's stay
        kube.patch(API_VERSION, KIND, "obs", {"spec": {"prometheusOperatorChart": None}},
                   patch_type="application/merge-patch+json", namespace=ns)
        assert wait_until(lambda: _chart_objects(kube, ns) == [], 60), _chart_objects(kube, ns)
        assert wait_until(lambda: _released(kube), 30)
        assert _exists(kube, "apps/v1", "Deployment", "obs-thanos-operator", ns)

        # back, then the Observer deleted: nothing of either is left
        kube.patch(API_VERSION, KIND, "obs", {"spec": {"prometheusOperatorChart": {}}},
                   patch_type="application/merge-patch+json", namespace=ns)
        assert wait_until(lambda: _exists(kube, "apps/v1", "Deployment", PROMETHEUS, ns), 60)
        _available(kube, PROMETHEUS, ns)
        assert wait_until(lambda: _converged(kube, runtime, ns), 60)
        gone = trail.mark()
        kube.delete(API_VERSION, KIND, "obs", namespace=ns)
        assert wait_until(lambda: not _exists(kube, API_VERSION, KIND, "obs", ns), 60)
        assert wait_until(lambda: _chart_objects(kube, ns) == [], 60), _chart_objects(kube, ns)
        # in reverse: the Thanos (which waits for the chart's operator) before that operator
        deletes = [(resource, name_) for verb, resource, name_, _, _ in trail.since(gone)
                   if verb == "delete"]
        assert deletes.index(("thanoses", "obs")) < deletes.index(("deployments", PROMETHEUS)), \
            deletes
        assert _released(kube)
        assert not _exists(kube, "apps/v1", "Deployment", "obs-thanos-operator", ns)
    finally:
        runtime.stop(5)
        with contextlib.suppress(NotFoundError):
            kube.patch(API_VERSION, KIND, "obs", {"metadata": {"finalizers": None}},
                       patch_type="application/merge-patch+json", namespace=ns)
        for crd in CHART_CRDS:
            with contextlib.suppress(NotFoundError):
                kube.delete(*CRD, crd)
        for kind in ("ClusterRole", "ClusterRoleBinding"):
            with contextlib.suppress(NotFoundError):
                kube.delete("rbac.authorization.k8s.io/v1", kind, f"{ns}-{PROMETHEUS}")


def test_the_chart_kept_in_the_example_renders_its_crds_rbac_service_and_deployment() -> None:
    chart = helm.chart(PROMETHEUS_OPERATOR_CHART, values={}, release="obs", namespace="demo")
    assert [b.name.split(" ", 3)[3] for b in chart] == [  # type: ignore[attr-defined]
        f"CustomResourceDefinition/{CHART_CRDS[0]}", f"CustomResourceDefinition/{CHART_CRDS[1]}",
        f"ServiceAccount/{PROMETHEUS}", f"ClusterRole/demo-{PROMETHEUS}",
        f"ClusterRoleBinding/demo-{PROMETHEUS}", f"Service/{PROMETHEUS}",
        f"Deployment/{PROMETHEUS}"]


def test_a_namespace_yaml_reads_as_a_number_stays_a_string_in_the_binding() -> None:
    """Found by the examples' property kit (namespace "0"): the chart's ClusterRoleBinding
    subject took the release namespace unquoted, which YAML reads as the number 0 and the
    schema refuses; the template quotes it now."""
    chart = helm.chart(PROMETHEUS_OPERATOR_CHART, values={}, release="obs", namespace="0")
    binding = next(o for builder in chart for o, _ in [builder()]
                   if o["kind"] == "ClusterRoleBinding")
    assert binding["subjects"][0]["namespace"] == "0"


_NAMES = st.from_regex(r"[a-z][a-z0-9]{0,10}", fullmatch=True)
_VALUES = st.fixed_dictionaries({}, optional={
    "logLevel": st.sampled_from(["debug", "info", "WARN"]),
    "replicas": st.integers(0, 5),
    "watchNamespaces": st.lists(_NAMES, max_size=3),
    "extraArgs": st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True),
                                 st.from_regex(r"[a-z0-9]{0,8}", fullmatch=True), max_size=2),
    "service": st.fixed_dictionaries({"port": st.integers(1024, 65535)}),
})
OBSERVERS = st.builds(
    lambda name, ns, uid, values, thanos: {
        "apiVersion": API_VERSION, "kind": KIND,
        "metadata": {"name": name, "namespace": ns, "uid": uid},
        "spec": {"prometheusOperatorChart": values, **({"thanos": {}} if thanos else {})}},
    _NAMES, _NAMES, st.uuids().map(str), _VALUES, st.booleans())


def test_the_property_kit_checks_the_chart_builders_for_drawn_values() -> None:
    """The chart rendered for drawn values keeps every invariant of code builders: pure, stable
    names, valid and unique, owned (the identity stamped by ``chart(parent=...)``), selectors
    matching their pod templates, ABSENT stubs."""
    check_builders(build, OBSERVERS, managed_by=OPERATOR_NAME, max_examples=30)


def test_the_derived_role_carries_what_the_charts_cluster_role_grants() -> None:
    """``optk manifests`` derives the Observer's role from its builders over sample parents: the
    chart's children (its CRDs, Service, Deployment) and what its ClusterRole grants are in it,
    as for the Thanos operator the Observer builds in code."""
    sample = {"apiVersion": API_VERSION, "kind": KIND,
              "metadata": {"name": "obs", "namespace": "demo", "uid": "u1"},
              "spec": {"prometheusOperatorChart": {}}}
    rules = derive_rules(operator_facts(observer_operator), parents=[sample],
                         lease_namespace="observer-system")
    grants: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        for group in rule.api_groups:
            for resource in rule.resources:
                grants.setdefault((group, resource), set()).update(rule.verbs)
    assert "*" in grants[("monitoring.observe.optk.dev", "servicemonitors")]
    assert "*" in grants[("apps", "statefulsets")]
    for group, resource in (("", "services"), ("apps", "deployments"),
                            ("apiextensions.k8s.io", "customresourcedefinitions"),
                            ("rbac.authorization.k8s.io", "clusterroles")):
        assert {"create", "patch", "delete"} <= grants[(group, resource)], (group, resource)
