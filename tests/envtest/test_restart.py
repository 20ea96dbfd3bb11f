"""``ControlPlane.restart_apiserver``: kube-apiserver stopped and started over the same etcd.

A control plane of this module's own (a restart would disturb the session's shared one): objects
survive with their uid and resourceVersion, new writes continue the resourceVersion sequence,
clients and kubeconfigs made before the restart keep working, request counting continues, and a
watch from a version before the restart gets 410 Gone (``too old resource version``), as from
any real API server whose watch cache started after that version, while a watch from a fresh
list works. kube-controller-manager rides the outage out: its garbage collector still collects.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import urllib3
from kubernetes import config as kube_config
from kubernetes import watch as kube_watch

from reconciler.envtest import ControlPlane


@pytest.fixture(scope="module")
def plane(kube_assets: Path) -> Iterator[ControlPlane]:
    with ControlPlane(kube_assets) as control_plane:
        yield control_plane


@pytest.fixture
def namespace(plane: ControlPlane) -> Iterator[str]:
    name = f"restart-{uuid.uuid4().hex[:8]}"
    with plane.api_client() as client:
        core = kubernetes.client.CoreV1Api(client)
        core.create_namespace({"metadata": {"name": name}})
        yield name
        core.delete_namespace(name)


def _configmap(name: str, **metadata: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **metadata}, "data": {"k": name}}


def test_objects_and_resource_versions_survive_and_old_clients_keep_working(
    plane: ControlPlane, namespace: str
) -> None:
    url, kubeconfig = plane.url, plane.kubeconfig_path
    pids = set(plane.pids)
    old_client = plane.api_client()  # connections pooled before the restart
    viewer = kube_config.new_client_from_config(str(plane.kubeconfig_for("viewer")))
    core = kubernetes.client.CoreV1Api(old_client)
    made = [core.create_namespaced_config_map(namespace, _configmap(f"c{i}")) for i in range(5)]
    versions = {m.metadata.name: (m.metadata.uid, m.metadata.resource_version) for m in made}
    before = plane.request_counts()

    started = time.monotonic()
    plane.restart_apiserver(down_seconds=1.0)
    took = time.monotonic() - started

    assert 1.0 <= took < 30, f"restart took {took:.1f} s"
    assert (plane.url, plane.kubeconfig_path) == (url, kubeconfig)
    new_pids = set(plane.pids) - pids
    assert len(new_pids) == 1, plane.describe()  # only kube-apiserver was started again
    assert plane.describe()["kube-apiserver"]["pid"] in new_pids
    plane.check()
    live = core.list_namespaced_config_map(namespace).items
    assert {m.metadata.name: (m.metadata.uid, m.metadata.resource_version) for m in live} == (
        versions)
    newest = max(int(version) for _, version in versions.values())
    after = core.create_namespaced_config_map(namespace, _configmap("after"))
    assert int(after.metadata.resource_version) > newest
    # a client built from a kubeconfig made before the restart: same CA, certificate, port
    with pytest.raises(kubernetes.client.ApiException) as denied:
        kubernetes.client.CoreV1Api(viewer).list_namespaced_config_map(namespace)
    assert denied.value.status == 403  # authenticated as "viewer", refused by RBAC
    with kube_config.new_client_from_config(str(kubeconfig)) as fresh:
        assert kubernetes.client.CoreV1Api(fresh).read_namespaced_config_map(
            "c0", namespace).data == {"k": "c0"}
    counts = plane.request_counts()  # the audit log is appended to across the restart
    assert counts["create"] - before["create"] == 1
    assert counts["list"] - before["list"] >= 1
    old_client.close()
    viewer.close()


def test_a_watch_from_before_the_restart_is_gone_and_one_from_a_new_list_works(
    plane: ControlPlane, namespace: str
) -> None:
    with plane.api_client() as client:
        core = kubernetes.client.CoreV1Api(client)
        old = core.create_namespaced_config_map(namespace, _configmap("old"))
        # etcd moves past the ConfigMap's version before the restart (another kind): the new
        # server's watch cache then starts after it
        core.create_namespaced_secret(namespace, {"metadata": {"name": "later"}})
        events = kube_watch.Watch().stream(
            core.list_namespaced_config_map, namespace,
            resource_version=old.metadata.resource_version, timeout_seconds=1)
        assert [e["type"] for e in events] == []  # before the restart: an empty, good watch

        plane.restart_apiserver()

        with pytest.raises(kubernetes.client.ApiException) as gone:
            list(kube_watch.Watch().stream(
                core.list_namespaced_config_map, namespace,
                resource_version=old.metadata.resource_version, timeout_seconds=2))
        assert gone.value.status == 410
        assert "too old resource version" in str(gone.value.reason)
        listed = core.list_namespaced_config_map(namespace)
        assert [m.metadata.name for m in listed.items] == ["old"]
        core.create_namespaced_config_map(namespace, _configmap("new"))
        seen = [(e["type"], e["object"].metadata.name) for e in kube_watch.Watch().stream(
            core.list_namespaced_config_map, namespace,
            resource_version=listed.metadata.resource_version, timeout_seconds=2)]
        assert seen == [("ADDED", "new")]


@pytest.mark.needs_controller_manager
def test_stopped_refuses_then_starts_and_the_garbage_collector_still_collects(
    plane: ControlPlane, namespace: str
) -> None:
    with plane.api_client() as client:
        core = kubernetes.client.CoreV1Api(client)
        owner = core.create_namespaced_config_map(namespace, _configmap("owner"))
        core.create_namespaced_config_map(namespace, _configmap("dependent", ownerReferences=[{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
            "uid": owner.metadata.uid}]))
        plane.stop_apiserver()
        plane.stop_apiserver()  # idempotent
        assert "kube-apiserver" not in plane.describe()
        plane.check()  # etcd and kube-controller-manager keep running
        with pytest.raises(urllib3.exceptions.MaxRetryError):
            core.read_namespaced_config_map("owner", namespace, _request_timeout=5)
        plane.start_apiserver()
        plane.start_apiserver()  # a no-op while it runs
        core.delete_namespaced_config_map("owner", namespace)
        deadline = time.monotonic() + 30
        while core.list_namespaced_config_map(namespace).items:
            assert time.monotonic() < deadline, "the dependent was not collected after 30 s"
            time.sleep(0.2)
    plane.check()


def test_a_negative_outage_is_refused() -> None:
    with pytest.raises(ValueError, match="down_seconds"):
        ControlPlane().restart_apiserver(down_seconds=-1)
