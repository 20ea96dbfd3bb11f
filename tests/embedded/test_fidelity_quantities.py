"""Quantities are stored in canonical form wherever a built-in type has one, as a real server
stores them (``0.5`` -> ``500m``, ``1024Mi`` -> ``1Gi``, ``1000m`` -> ``1``), over HTTP with the
official client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest

from reconciler.embedded import EmbeddedApiServer


@pytest.fixture
def client(kube_api: EmbeddedApiServer) -> Iterator[kubernetes.client.ApiClient]:
    with kube_api.api_client() as api_client:
        yield api_client


def _raw(response: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(response.data)
    return data


SENT = {"cpu": "0.5", "memory": "1024Mi", "ephemeral-storage": "1000m"}
STORED = {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "1"}


def _container() -> dict[str, Any]:
    return {"name": "c", "image": "busybox:1.36",
            "resources": {"requests": dict(SENT), "limits": {"cpu": "1.5", "memory": "2048Mi"}}}


def test_pod_template_and_volume_quantities_are_canonical(
    client: kubernetes.client.ApiClient, kube_namespace: str
) -> None:
    apps = kubernetes.client.AppsV1Api(client)
    body = {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {
            "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {
                "containers": [_container()],
                "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "0.5Gi"}}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1024Mi"}}}}],
        },
    }
    created = _raw(apps.create_namespaced_stateful_set(kube_namespace, body,
                                                       _preload_content=False))
    spec = created["spec"]
    resources = spec["template"]["spec"]["containers"][0]["resources"]
    assert resources == {"requests": STORED, "limits": {"cpu": "1500m", "memory": "2Gi"}}
    assert spec["template"]["spec"]["volumes"][0]["emptyDir"] == {"sizeLimit": "512Mi"}
    assert spec["volumeClaimTemplates"][0]["spec"]["resources"] == {
        "requests": {"storage": "1Gi"}}

    # The same on update: a replace with other spellings stores the canonical text again.
    body["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "0.25"
    replaced = _raw(apps.replace_namespaced_stateful_set(
        "db", kube_namespace, {**body, "metadata": created["metadata"]},
        _preload_content=False))
    assert replaced["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"][
        "cpu"] == "250m"


def test_pod_pvc_and_hpa_quantities_are_canonical(
    client: kubernetes.client.ApiClient, kube_namespace: str
) -> None:
    core = kubernetes.client.CoreV1Api(client)
    pod = _raw(core.create_namespaced_pod(kube_namespace, {
        "metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "image": "busybox:1.36",
             "resources": {"limits": {"cpu": "1000m", "memory": "1048576Ki"}}}]}},
        _preload_content=False))
    # Requests default to the limits, canonical too (and the pod is Guaranteed).
    assert pod["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}
    assert pod["status"]["qosClass"] == "Guaranteed"

    pvc = _raw(core.create_namespaced_persistent_volume_claim(kube_namespace, {
        "metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "2048Mi"}, "limits": {"storage": "4096Mi"}}}},
        _preload_content=False))
    assert pvc["spec"]["resources"] == {"requests": {"storage": "2Gi"},
                                        "limits": {"storage": "4Gi"}}

    autoscaling = kubernetes.client.AutoscalingV2Api(client)
    hpa = _raw(autoscaling.create_namespaced_horizontal_pod_autoscaler(kube_namespace, {
        "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                    "name": "web"},
                 "maxReplicas": 3,
                 "metrics": [{"type": "Resource", "resource": {
                     "name": "memory", "target": {"type": "AverageValue",
                                                  "averageValue": "1024Mi"}}}]}},
        _preload_content=False))
    assert hpa["spec"]["metrics"][0]["resource"]["target"] == {
        "type": "AverageValue", "averageValue": "1Gi"}


def test_an_invalid_quantity_is_refused_as_undecodable(
    client: kubernetes.client.ApiClient, kube_namespace: str
) -> None:
    core = kubernetes.client.CoreV1Api(client)
    with pytest.raises(kubernetes.client.ApiException) as caught:
        core.create_namespaced_pod(kube_namespace, {
            "metadata": {"name": "bad"}, "spec": {"containers": [
                {"name": "c", "image": "busybox:1.36",
                 "resources": {"requests": {"cpu": "lots"}}}]}})
    assert caught.value.status == 400
    assert caught.value.body is not None
    assert json.loads(caught.value.body)["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: quantities must match the regular '
        "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
