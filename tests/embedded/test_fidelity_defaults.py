"""What a real 1.25 server stores beyond the ``SetDefaults_*`` functions, over HTTP with the
official client: a Job's own labels, a DaemonSet's template-generation annotation, the zero
fields of Events and HPA status, and the ServiceAccount admission plugin's token volume."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest

from reconciler.embedded import EmbeddedApiServer

MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


@pytest.fixture
def client(kube_api: EmbeddedApiServer) -> Iterator[kubernetes.client.ApiClient]:
    with kube_api.api_client() as api_client:
        yield api_client


def _raw(response: Any) -> dict[str, Any]:
    """The JSON a ``_preload_content=False`` call returned, nulls included."""
    data: dict[str, Any] = json.loads(response.data)
    return data


def _pod_spec(**extra: Any) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "busybox:1.36"}], **extra}


def test_job_labels_default_to_its_template_labels_with_the_generated_ones(
    client: kubernetes.client.ApiClient, kube_namespace: str
) -> None:
    batch = kubernetes.client.BatchV1Api(client)
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
            "spec": {"template": {"metadata": {"labels": {"app": "once"}},
                                  "spec": _pod_spec(restartPolicy="Never")}}}
    job = _raw(batch.create_namespaced_job(kube_namespace, body, _preload_content=False))
    uid = job["metadata"]["uid"]
    expected = {"app": "once", "controller-uid": uid, "job-name": "once"}
    assert job["metadata"]["labels"] == expected
    assert job["spec"]["template"]["metadata"]["labels"] == expected
    assert job["spec"]["selector"] == {"matchLabels": {"controller-uid": uid}}

    # Labels of its own are kept; a Job and template without labels get the generated ones
    # (issue 35, item 8: kube-apiserver 1.25 answers so; tests/conformance compares the two).
    own = {**body, "metadata": {"name": "own", "labels": {"team": "a"}}}
    job = _raw(batch.create_namespaced_job(kube_namespace, own, _preload_content=False))
    assert job["metadata"]["labels"] == {"team": "a"}
    bare = {**body, "metadata": {"name": "bare"},
            "spec": {"template": {"spec": _pod_spec(restartPolicy="Never")}}}
    job = _raw(batch.create_namespaced_job(kube_namespace, bare, _preload_content=False))
    generated = {"controller-uid": job["metadata"]["uid"], "job-name": "bare"}
    assert job["metadata"]["labels"] == generated
    assert job["spec"]["template"]["metadata"]["labels"] == generated


def test_daemonset_template_generation_annotation_follows_template_changes(
    client: kubernetes.client.ApiClient, kube_namespace: str
) -> None:
    apps = kubernetes.client.AppsV1Api(client)
    key = "deprecated.daemonset.template.generation"
    body = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"metadata": {"labels": {"app": "agent"}},
                                  "spec": _pod_spec()}}}
    created = apps.create_namespaced_daemon_set(kube_namespace, body)
    assert created.metadata.annotations == {key: "1"}
    assert created.metadata.generation == 1

    patched = apps.patch_namespaced_daemon_set("agent", kube_namespace, {
        "spec": {"template": {"metadata": {"labels": {"app": "agent", "v": "2"}}}}})
    assert patched.metadata.annotations[key] == "2"
    assert patched.metadata.generation == 2

    # A spec change outside the template bumps the generation only; the client cannot set it.
    patched = apps.patch_namespaced_daemon_set("agent", kube_namespace, {
        "metadata": {"annotations": {key: "9"}}, "spec": {"minReadySeconds": 5}})
    assert patched.metadata.annotations[key] == "2"
    assert patched.metadata.generation == 3
    unchanged = apps.patch_namespaced_daemon_set("agent", kube_namespace, {
        "metadata": {"labels": {"x": "y"}}})
    assert unchanged.metadata.annotations[key] == "2"


def test_core_event_carries_the_zero_fields_of_a_real_server(
    client: kubernetes.client.ApiClient, kube_namespace: str
) -> None:
    core = kubernetes.client.CoreV1Api(client)
    body = {"metadata": {"name": "e"}, "reason": "Started", "message": "m", "type": "Normal",
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": kube_namespace}}
    event = _raw(core.create_namespaced_event(kube_namespace, body, _preload_content=False))
    assert event["eventTime"] is None
    assert event["firstTimestamp"] is None
    assert event["lastTimestamp"] is None
    assert event["reportingComponent"] == ""
    assert event["reportingInstance"] == ""
    assert event["source"] == {}
    read = _raw(core.read_namespaced_event("e", kube_namespace, _preload_content=False))
    assert {k: read[k] for k in ("eventTime", "reportingComponent", "reportingInstance")} == {
        "eventTime": None, "reportingComponent": "", "reportingInstance": ""}

    events = kubernetes.client.EventsV1Api(client)
    new = _raw(events.create_namespaced_event(kube_namespace, {
        "metadata": {"name": "n"}, "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "optk", "reportingInstance": "optk-0", "action": "Sync",
        "reason": "Synced", "type": "Normal"}, _preload_content=False))
    assert new["regarding"] == {}
    assert new["deprecatedSource"] == {}
    assert new["deprecatedFirstTimestamp"] is None
    assert new["deprecatedLastTimestamp"] is None


def test_hpa_status_as_autoscaling_v2_returns_it(
    client: kubernetes.client.ApiClient, kube_namespace: str
) -> None:
    autoscaling = kubernetes.client.AutoscalingV2Api(client)
    body = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": "web"}, "maxReplicas": 3}}
    hpa = _raw(autoscaling.create_namespaced_horizontal_pod_autoscaler(
        kube_namespace, body, _preload_content=False))
    assert hpa["status"] == {"currentMetrics": None, "desiredReplicas": 0}
    status = _raw(autoscaling.patch_namespaced_horizontal_pod_autoscaler_status(
        "web", kube_namespace, {"status": {"currentReplicas": 2, "desiredReplicas": 2}},
        _preload_content=False))
    assert status["status"] == {"currentMetrics": None, "currentReplicas": 2,
                                "desiredReplicas": 2}


def test_pod_gets_the_service_account_token_volume_in_every_container(
    client: kubernetes.client.ApiClient, kube_namespace: str
) -> None:
    core = kubernetes.client.CoreV1Api(client)
    spec = _pod_spec(initContainers=[{"name": "init", "image": "busybox:1.36"}])
    spec["containers"].append({"name": "own", "image": "busybox:1.36", "volumeMounts": [
        {"name": "mine", "mountPath": MOUNT_PATH}]})
    spec["volumes"] = [{"name": "mine", "emptyDir": {}}]
    pod = _raw(core.create_namespaced_pod(kube_namespace, {
        "metadata": {"name": "p"}, "spec": spec}, _preload_content=False))
    volumes = pod["spec"]["volumes"]
    assert len(volumes) == 2
    assert volumes[0] == {"name": "mine", "emptyDir": {}}
    token = volumes[1]
    assert re.fullmatch(r"kube-api-access-[bcdfghjklmnpqrstvwxz2456789]{5}", token["name"])
    assert token["projected"] == {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt",
                       "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}
    mount = {"name": token["name"], "readOnly": True, "mountPath": MOUNT_PATH}
    init, first, own = pod["spec"]["initContainers"][0], *pod["spec"]["containers"]
    assert init["volumeMounts"] == [mount]
    assert first["volumeMounts"] == [mount]
    assert own["volumeMounts"] == [{"name": "mine", "mountPath": MOUNT_PATH}]
    assert pod["spec"]["serviceAccountName"] == pod["spec"]["serviceAccount"] == "default"

    # An update keeps the volume (it is not added twice) and labels change freely.
    updated = _raw(core.patch_namespaced_pod("p", kube_namespace, {
        "metadata": {"labels": {"a": "b"}}}, _preload_content=False))
    assert updated["spec"]["volumes"] == volumes


def test_pod_without_automount_gets_no_token_volume(
    client: kubernetes.client.ApiClient, kube_namespace: str
) -> None:
    core = kubernetes.client.CoreV1Api(client)
    pod = _raw(core.create_namespaced_pod(kube_namespace, {
        "metadata": {"name": "p"}, "spec": _pod_spec(automountServiceAccountToken=False)},
        _preload_content=False))
    assert "volumes" not in pod["spec"]
    assert "volumeMounts" not in pod["spec"]["containers"][0]
    assert pod["spec"]["serviceAccountName"] == "default"
