"""Dependencies between children in a running operator (issue 24), on the embedded server: a
status-only change that makes a dependency ready wakes the waiting parent at once (no poll), a
status change no rule reads wakes nothing, and a component built only while its kind is served is
created once a CRD starts serving it (``watch_served_kinds``)."""

from __future__ import annotations

import uuid
from typing import Any

from builders import Component, ResourceBuilder, resource_builder
from reconciler import KubernetesClient, NotFoundError, watch_served_kinds
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
