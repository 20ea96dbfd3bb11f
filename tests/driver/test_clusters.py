"""An ``Operator`` placing children in another cluster (issue 41), on two embedded servers.

``Applying(clusters=ClusterSecrets(...))`` is where the operator's clusters are declared (the
``Operator`` keeps its 20 top-level fields); a child built with ``builders.placed`` is written
to the cluster its Secret names by the running operator, and deleting the parent deletes it
there under the cleanup finalizer before the parent goes.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from builders import ResourceBuilder, placed
from reconciler import Applying, ClusterSecrets, KubernetesClient, NotFoundError
from reconciler._commands.uninstall import uninstall
from reconciler.embedded import EmbeddedApiServer
from tests.driver.conftest import make_operator, running, thing, wait_until
from tests.driver.sample_operator import API_VERSION


def _exists(client: KubernetesClient, api_version: str, kind: str, name: str,
            namespace: str | None = None) -> bool:
    try:
        client.get(api_version, kind, name, namespace=namespace)
    except NotFoundError:
        return False
    return True


@pytest.mark.timeout(120)
def test_a_running_operator_places_a_child_in_another_cluster_and_deletes_it_with_the_parent(
        client: KubernetesClient, kube_namespace: str) -> None:
    ns = kube_namespace
    with EmbeddedApiServer() as edge:
        edge_client = KubernetesClient(edge.api_client())
        text = edge.kubeconfig_path.read_text()
        client.create({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "edge-1", "namespace": ns},
                       "data": {"kubeconfig": base64.b64encode(text.encode()).decode()}})

        def build(parent: dict[str, Any]) -> list[ResourceBuilder]:
            name = f"{ns}-{parent['metadata']['name']}"
            cm = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": name, "namespace": "default"},
                  "data": {"value": parent["spec"]["value"]}}
            return [placed(lambda: cm, cluster="edge-1")]

        operator = make_operator(ns, build=build,
                                 applying=Applying(clusters=ClusterSecrets(namespace=ns)))
        with running(operator, client) as runtime:
            client.create(thing(ns, "a", value="7"))
            assert wait_until(lambda: _exists(edge_client, "v1", "ConfigMap", f"{ns}-a",
                                              "default"))
            placed_cm = edge_client.get("v1", "ConfigMap", f"{ns}-a", namespace="default")
            assert placed_cm["data"] == {"value": "7"}
            assert "ownerReferences" not in placed_cm["metadata"]
            parent = client.get(API_VERSION, "Thing", "a", namespace=ns)
            assert "optk.dev/cleanup" in parent["metadata"]["finalizers"]

            client.delete(API_VERSION, "Thing", "a", namespace=ns)
            assert wait_until(lambda: not _exists(edge_client, "v1", "ConfigMap", f"{ns}-a",
                                                  "default"), timeout=20)
            assert wait_until(lambda: not _exists(client, API_VERSION, "Thing", "a", ns),
                              timeout=20)
            placement = runtime.reconciler.placement
            assert placement is not None
            assert placement.connections.connected() == ["edge-1"]
        assert placement.connections.connected() == []  # closed when the operator stopped


@pytest.mark.timeout(120)
def test_uninstall_deletes_placed_children_and_releases_the_parent_even_when_a_cluster_is_down(
        client: KubernetesClient, kube_namespace: str) -> None:
    ns = kube_namespace
    with EmbeddedApiServer() as edge:
        edge_client = KubernetesClient(edge.api_client())
        text = edge.kubeconfig_path.read_text()
        client.create({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "edge-1", "namespace": ns},
                       "data": {"kubeconfig": base64.b64encode(text.encode()).decode()}})
        name = f"{ns}-u"

        def build(parent: dict[str, Any]) -> list[ResourceBuilder]:
            cm = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": name, "namespace": "default"}, "data": {}}
            return [placed(lambda: cm, cluster="edge-1")]

        operator = make_operator(ns, build=build, applying=Applying(
            clusters=ClusterSecrets(namespace=ns, request_timeout=2.0)))
        with running(operator, client):
            client.create(thing(ns, "u"))
            assert wait_until(lambda: _exists(edge_client, "v1", "ConfigMap", name, "default"))
        edge.stop()
        try:
            report = uninstall(client, operator)
        finally:
            edge.start()
        assert [ref.name for ref, why in report.kept if "edge-1" in why] == ["u"]
        parent = client.get(API_VERSION, "Thing", "u", namespace=ns)
        assert "optk.dev/cleanup" not in (parent["metadata"].get("finalizers") or [])  # way out
        assert _exists(edge_client, "v1", "ConfigMap", name, "default")
        report = uninstall(client, operator)  # the cluster is back: its child goes
        assert report.ok, report.kept
        assert not _exists(edge_client, "v1", "ConfigMap", name, "default")
