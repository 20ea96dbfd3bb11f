"""The embedded API server's core protocol, through the official client over HTTPS.

Each test uses the session server of the ``kube_api`` fixture (the pytest plugin) and a fresh
namespace from ``kube_namespace``; expectations come from the real-apiserver recordings.
"""

from __future__ import annotations

import os
import stat
import threading

import kubernetes.client
import pytest
import urllib3
from kubernetes import watch
from kubernetes.client import ApiException

from reconciler.embedded import EmbeddedApiServer
from tests.embedded.helpers import configmap


@pytest.mark.both_servers
def test_create_get_list_share_one_increasing_resource_version(
    core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    first = core.create_namespaced_config_map(kube_namespace, configmap("a", k="1"))
    second = core.create_namespaced_config_map(kube_namespace, configmap("b", k="2"))
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)
    assert first.metadata.uid
    assert first.metadata.creation_timestamp
    got = core.read_namespaced_config_map("a", kube_namespace)
    assert got.data == {"k": "1"}
    assert got.metadata.resource_version == first.metadata.resource_version
    listed = core.list_namespaced_config_map(kube_namespace)
    assert [i.metadata.name for i in listed.items] == ["a", "b"]
    assert int(listed.metadata.resource_version) >= int(second.metadata.resource_version)


@pytest.mark.both_servers
def test_duplicate_create_is_already_exists(
    core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    core.create_namespaced_config_map(kube_namespace, configmap("dup"))
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map(kube_namespace, configmap("dup"))
    assert caught.value.status == 409
    assert caught.value.body is not None
    assert '"reason":"AlreadyExists"' in caught.value.body
    assert 'configmaps \\"dup\\" already exists' in caught.value.body


@pytest.mark.both_servers
def test_stale_update_is_conflict_and_unconditional_update_is_allowed(
    core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    created = core.create_namespaced_config_map(kube_namespace, configmap("c", k="1"))
    stale = created.metadata.resource_version
    body = configmap("c", k="2")
    body["metadata"]["resourceVersion"] = stale
    updated = core.replace_namespaced_config_map("c", kube_namespace, body)
    assert updated.metadata.resource_version != stale
    body = configmap("c", k="3")
    body["metadata"]["resourceVersion"] = stale
    with pytest.raises(ApiException) as caught:
        core.replace_namespaced_config_map("c", kube_namespace, body)
    assert caught.value.status == 409
    assert '"reason":"Conflict"' in str(caught.value.body)
    again = core.replace_namespaced_config_map("c", kube_namespace, configmap("c", k="4"))
    assert again.data == {"k": "4"}


@pytest.mark.both_servers
def test_no_op_update_keeps_the_resource_version(
    core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    created = core.create_namespaced_config_map(kube_namespace, configmap("same", k="1"))
    replaced = core.replace_namespaced_config_map("same", kube_namespace, created)
    assert replaced.metadata.resource_version == created.metadata.resource_version
    patched = core.patch_namespaced_config_map("same", kube_namespace, {"data": {"k": "1"}})
    assert patched.metadata.resource_version == created.metadata.resource_version
    changed = core.patch_namespaced_config_map("same", kube_namespace, {"data": {"k": "2"}})
    assert int(changed.metadata.resource_version) > int(created.metadata.resource_version)


@pytest.mark.both_servers
def test_missing_object_and_missing_namespace_are_not_found(
    core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_config_map("nope", kube_namespace)
    assert caught.value.status == 404
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map("no-such-namespace", configmap("x"))
    assert caught.value.status == 404
    assert 'namespaces \\"no-such-namespace\\" not found' in str(caught.value.body)


@pytest.mark.both_servers
def test_watch_sees_added_modified_deleted(
    core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    start = core.list_namespaced_config_map(kube_namespace).metadata.resource_version
    seen: list[tuple[str, str]] = []

    def writer() -> None:
        core.create_namespaced_config_map(kube_namespace, configmap("w", k="1"))
        core.patch_namespaced_config_map("w", kube_namespace, {"data": {"k": "2"}})
        core.delete_namespaced_config_map("w", kube_namespace)

    thread = threading.Thread(target=writer)
    stream = watch.Watch()
    thread.start()
    for event in stream.stream(core.list_namespaced_config_map, kube_namespace,
                               resource_version=start, timeout_seconds=5):
        seen.append((event["type"], event["object"].metadata.name))
        if event["type"] == "DELETED":
            stream.stop()
    thread.join()
    assert seen == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]


def test_requests_need_the_bearer_token(kube_api: EmbeddedApiServer) -> None:
    pool = urllib3.PoolManager(ca_certs=str(kube_api.ca_cert_path))
    response = pool.request("GET", f"{kube_api.url}/api/v1/namespaces")
    assert response.status == 401
    assert response.json()["reason"] == "Unauthorized"
    authorised = pool.request("GET", f"{kube_api.url}/api/v1/namespaces",
                              headers={"Authorization": f"Bearer {kube_api.token}"})
    assert authorised.status == 200


def test_kubeconfig_is_private_and_usable(kube_api: EmbeddedApiServer) -> None:
    mode = stat.S_IMODE(os.stat(kube_api.kubeconfig_path).st_mode)
    assert mode == 0o600
    client = kubernetes.config.new_client_from_config(str(kube_api.kubeconfig_path))
    with client:
        listed = kubernetes.client.CoreV1Api(client).list_namespace()
    names = [n.metadata.name for n in listed.items]
    assert "default" in names


def test_refuses_a_non_loopback_host_unless_told() -> None:
    with pytest.raises(ValueError, match="non-loopback"):
        EmbeddedApiServer(host="0.0.0.0")


@pytest.mark.both_servers
def test_request_counts_by_verb(
    kube_api: EmbeddedApiServer, core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    before = kube_api.request_counts()
    core.create_namespaced_config_map(kube_namespace, configmap("counted"))
    core.read_namespaced_config_map("counted", kube_namespace)
    core.list_namespaced_config_map(kube_namespace)
    after = kube_api.request_counts()
    assert set(after) == {"get", "list", "watch", "create", "update", "patch", "delete",
                          "deletecollection"}
    assert after["create"] - before["create"] >= 1
    assert after["get"] - before["get"] >= 1
    assert after["list"] - before["list"] >= 1


@pytest.mark.both_servers
def test_deployment_generation_and_status_subresource(
    apps: kubernetes.client.AppsV1Api, kube_namespace: str
) -> None:
    body = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}},
                         "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        },
    }
    created = apps.create_namespaced_deployment(kube_namespace, body)
    assert created.metadata.generation == 1
    labelled = apps.patch_namespaced_deployment(
        "d", kube_namespace, {"metadata": {"labels": {"x": "y"}}}
    )
    assert labelled.metadata.generation == 1
    scaled = apps.patch_namespaced_deployment("d", kube_namespace, {"spec": {"replicas": 3}})
    assert scaled.metadata.generation == 2
    status = apps.patch_namespaced_deployment_status(
        "d", kube_namespace, {"status": {"replicas": 3}, "spec": {"replicas": 9}}
    )
    assert status.status.replicas == 3
    assert status.spec.replicas == 3
    assert status.metadata.generation == 2


def test_connection_data_needs_a_running_server() -> None:
    from reconciler.embedded import ServerNotRunningError

    server = EmbeddedApiServer()
    with pytest.raises(ServerNotRunningError):
        _ = server.url
    with pytest.raises(ValueError, match="not running"):
        server.api_client()
