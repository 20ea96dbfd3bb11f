"""Dependencies between children in a running operator (issue 24), on the embedded server: a
status-only change that makes a dependency ready wakes the waiting parent at once (no poll), a
status change no rule reads wakes nothing, and a component built only while its kind is served is
created once a CRD starts serving it (``watch_served_kinds``)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest

from builders import Component, ResourceBuilder, resource_builder
from reconciler import KubernetesClient, NotFoundError, Reporting, watch_served_kinds
from reconciler.testing import make_available, wait_idle
from tests.driver.conftest import make_operator, running, thing, wait_until
from tests.driver.sample_operator import API_VERSION

_GROUP = f"g{uuid.uuid4().hex[:8]}.deps.optk.dev"


def _crd(group: str) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}}


@resource_builder
def _web(parent: Any) -> dict[str, Any]:
    labels = {"app": parent["metadata"]["name"]}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"{parent['metadata']['name']}-web"},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}


@resource_builder
def _config(parent: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"{parent['metadata']['name']}-after"}, "data": {"a": "1"}}


@resource_builder
def _widget(parent: Any) -> dict[str, Any]:
    return {"apiVersion": f"{_GROUP}/v1", "kind": "Widget",
            "metadata": {"name": parent["metadata"]["name"]}, "spec": {"size": 1}}


def _ordered(parent: Any) -> list[ResourceBuilder]:
    return [Component(name="web", builders=[_web(parent)]),
            Component(name="after", depends_on="web", builders=[_config(parent)]),
            Component(name="widget", when_served=True, builders=[_widget(parent)])]


def _exists(client: KubernetesClient, api_version: str, kind: str, name: str, ns: str) -> bool:
    try:
        client.get(api_version, kind, name, namespace=ns)
    except NotFoundError:
        return False
    return True


def _ready(client: KubernetesClient, ns: str) -> dict[str, Any]:
    parent = client.get(API_VERSION, "Thing", "r", namespace=ns)
    return next((c for c in (parent.get("status") or {}).get("conditions") or ()
                 if c["type"] == "Ready"), {})


def test_a_dependency_becoming_ready_wakes_the_parent_and_a_served_kind_activates(
    client: KubernetesClient, ns: str
) -> None:
    operator = make_operator(ns, build=lambda parent: [
        b for c in _ordered(parent) for b in c], on_start=[watch_served_kinds])
    with running(operator, client) as runtime:
        client.create(thing(ns, "r"))
        assert wait_until(lambda: "r-after" in str(_ready(client, ns).get("message")))
        assert not _exists(client, "v1", "ConfigMap", "r-after", ns)
        ready = _ready(client, ns)
        assert ready["reason"] in ("DependencyNotReady", "KindNotServed")
        assert "waits until Widget" in ready["message"]
        assert wait_idle(runtime, 10)
        # A status change of the Deployment that keeps its verdict (not available) wakes no one.
        reconciles = runtime.stats.total
        client.patch("apps/v1", "Deployment", "r-web", {"status": {"conditions": [
            {"type": "Progressing", "status": "True", "reason": "Test"}]}},
            patch_type="application/merge-patch+json", namespace=ns, subresource="status")
        assert wait_idle(runtime, 10, settle=0.3)
        assert runtime.stats.total == reconciles
        # Available (a status-only change, as a kubelet would): the waiting parent wakes at once
        # (the default recheck is 5 s away and Readiness is off: only the wake can do it).
        make_available(client, {"apiVersion": "apps/v1", "kind": "Deployment",
                                "metadata": {"name": "r-web", "namespace": ns}})
        assert wait_until(lambda: _exists(client, "v1", "ConfigMap", "r-after", ns), 3)
        assert runtime.triggers()["awaited"] >= 1
        # The Widget kind becomes served: the parent waiting for it is reconciled.
        client.create(_crd(_GROUP))
        try:
            assert wait_until(lambda: _exists(client, f"{_GROUP}/v1", "Widget", "r", ns), 10)
            assert wait_until(lambda: _ready(client, ns).get("status") == "True", 10)
        finally:
            client.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                          f"widgets.{_GROUP}")


def _counting(parent: Any, children: Any) -> dict[str, Any]:
    """A status function counting the ConfigMaps it observes and reading their data."""
    maps = [c for c in children if c.get("kind") == "ConfigMap"]
    return {"configMaps": len(maps),
            "values": sorted(str((c.get("data") or {}).get("a")) for c in maps)}


def test_the_status_function_observes_the_children_of_a_waiting_component(
    client: KubernetesClient, ns: str
) -> None:
    """Issue 36: a component held back by its dependency (its Deployment became unavailable)
    still has its children; the status function sees them, and their informer keeps
    running, so a change of one reaches the status while it waits."""
    operator = make_operator(
        ns, build=lambda parent: [
        b for c in _ordered(parent)[:2] for b in c],
        reporting=Reporting(status=_counting),
    )
    with running(operator, client) as runtime:
        client.create(thing(ns, "r"))
        assert wait_until(lambda: _exists(client, "apps/v1", "Deployment", "r-web", ns))
        make_available(client, {"apiVersion": "apps/v1", "kind": "Deployment",
                                "metadata": {"name": "r-web", "namespace": ns}})

        def status() -> dict[str, Any]:
            return dict(client.get(API_VERSION, "Thing", "r", namespace=ns).get("status") or {})

        assert wait_until(lambda: status().get("configMaps") == 1, 10)
        # The Deployment becomes unavailable (a rollout, a node lost): "after" waits again.
        client.patch("apps/v1", "Deployment", "r-web", {"status": {"conditions": [
            {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"}],
            "availableReplicas": 0, "readyReplicas": 0}},
            patch_type="application/merge-patch+json", namespace=ns, subresource="status")
        deployments = runtime.informers.informer("apps/v1", "Deployment")
        assert deployments is not None
        assert wait_until(lambda: not ((deployments.cache.get(ns, "r-web") or {}).get(
            "status") or {}).get("availableReplicas"))  # the reconcile reads the cache
        runtime.request(ns, "r")  # a status change no one waits on wakes no one: reconcile
        assert wait_until(lambda: _ready(client, ns).get("reason") == "DependencyNotReady", 10)
        assert wait_idle(runtime, 10)
        assert status()["configMaps"] == 1  # still there: observed while it waits
        assert ("v1", "ConfigMap") in runtime.informers.types()
        # A change of the waiting child reaches the status function (its informer runs).
        client.patch("v1", "ConfigMap", "r-after", {"data": {"a": "2"}},
                     patch_type="application/merge-patch+json", namespace=ns)
        assert wait_until(lambda: status().get("values") == ["2"], 10)
        assert status()["configMaps"] == 1


def test_an_ordinary_ordered_teardown_waits_without_warnings(
    client: KubernetesClient, ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 36: deleting a parent tears its components down dependents first, the dependency
    waiting until they are gone (the cleanup finalizer, here for ``on_delete``, runs the
    ordered teardown first): ordinary waiting, logged at INFO (the reason, once per
    change) and DEBUG (the retries), never as a WARNING."""
    caplog.set_level(logging.INFO)
    operator = make_operator(ns, build=lambda parent: [
        b for c in _ordered(parent)[:2] for b in c], on_delete=lambda parent: None)
    with running(operator, client) as runtime:
        client.create(thing(ns, "r"))
        assert wait_until(lambda: _exists(client, "apps/v1", "Deployment", "r-web", ns))
        make_available(client, {"apiVersion": "apps/v1", "kind": "Deployment",
                                "metadata": {"name": "r-web", "namespace": ns}})
        assert wait_until(lambda: _exists(client, "v1", "ConfigMap", "r-after", ns), 10)
        assert wait_idle(runtime, 10)
        caplog.clear()
        client.delete(API_VERSION, "Thing", "r", namespace=ns)
        assert wait_until(lambda: not _exists(client, API_VERSION, "Thing", "r", ns), 20)
    waits = [r for r in caplog.records if "cleanup waits" in r.getMessage()]
    assert waits, "the teardown did not wait: nothing tested"
    assert all(r.levelno == logging.INFO for r in waits), waits
    warnings = [f"{r.name}: {r.getMessage()}" for r in caplog.records
                if r.levelno >= logging.WARNING]
    assert not warnings, warnings
