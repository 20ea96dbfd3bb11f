"""``ControlPlane`` with real processes: the session's control plane for connection data, RBAC
users and audit counts; a fresh one for crash reporting and for stopping on Ctrl-C."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
from kubernetes import config as kube_config

from reconciler.envtest import (
    ComponentCrashedError,
    ControlPlane,
    ControlPlaneError,
    UnknownUserError,
    find_assets,
)
from tests.envtest._pids import alive


def _configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


def _wait_allowed(call: Any) -> Any:
    """``call()`` once the RBAC authorizer's cache has the binding just made (a 403 before)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return call()
        except kubernetes.client.ApiException as exc:
            if exc.status != 403 or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _bind_reader(plane: ControlPlane, namespace: str, subject: dict[str, str]) -> None:
    with plane.api_client() as admin:
        rbac = kubernetes.client.RbacAuthorizationV1Api(admin)
        rbac.create_namespaced_role(namespace, {
            "metadata": {"name": "reader"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]})
        rbac.create_namespaced_role_binding(namespace, {
            "metadata": {"name": "reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": "reader"},
            "subjects": [subject]})


def test_connection_data_and_admin(real_kube_api: ControlPlane) -> None:
    assert real_kube_api.url.startswith("https://127.0.0.1:")
    assert real_kube_api.kubeconfig_path.stat().st_mode & 0o777 == 0o600
    with kube_config.new_client_from_config(str(real_kube_api.kubeconfig_path)) as client:
        namespaces = kubernetes.client.CoreV1Api(client).list_namespace().items
    names = [n.metadata.name for n in namespaces]
    assert "default" in names


def test_a_certificate_user_has_only_what_rbac_grants(
    real_kube_api: ControlPlane, kube_namespace_real: str
) -> None:
    user = f"alice-{kube_namespace_real}"
    path = real_kube_api.kubeconfig_for(user, groups=["devs"])
    with kube_config.new_client_from_config(str(path)) as client:
        core = kubernetes.client.CoreV1Api(client)
        with pytest.raises(kubernetes.client.ApiException) as caught:
            core.list_namespaced_config_map(kube_namespace_real)
        assert caught.value.status == 403
        assert f'User \\"{user}\\" cannot list' in str(caught.value.body)
        _bind_reader(real_kube_api, kube_namespace_real, {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"})
        _wait_allowed(lambda: core.list_namespaced_config_map(kube_namespace_real))
    counts = real_kube_api.request_counts(user=user)
    assert counts["list"] >= 2
    assert counts["create"] == 0


def test_request_counts_are_complete_when_read(
    real_kube_api: ControlPlane, kube_namespace_real: str
) -> None:
    before = real_kube_api.request_counts()
    with real_kube_api.api_client() as client:
        core = kubernetes.client.CoreV1Api(client)
        for index in range(5):
            core.create_namespaced_config_map(kube_namespace_real, _configmap(f"c{index}"))
        core.read_namespaced_config_map("c0", kube_namespace_real)
        core.patch_namespaced_config_map("c0", kube_namespace_real, {"data": {"a": "1"}})
        core.delete_namespaced_config_map("c1", kube_namespace_real)
    after = real_kube_api.request_counts()
    delta = {verb: after[verb] - before[verb] for verb in after}
    assert delta == {"get": 1, "list": 0, "watch": 0, "create": 5, "update": 0, "patch": 1,
                     "delete": 1, "deletecollection": 0}
    admin = real_kube_api.request_counts(user="optk-admin")
    assert admin["create"] >= 5


def test_an_unregistered_user_gets_a_client_certificate(real_kube_api: ControlPlane) -> None:
    path = real_kube_api.kubeconfig_for("bob")
    assert "client-certificate-data" in path.read_text()


def test_registered_token_users_get_a_token_kubeconfig(kube_assets: Path) -> None:
    with ControlPlane(kube_assets, users={"carol": ["team"]}) as plane:
        path = plane.kubeconfig_for("carol")
        assert "token:" in path.read_text()
        with pytest.raises(UnknownUserError) as caught:
            plane.kubeconfig_for("carol", groups=["other"])
        assert "carol" in str(caught.value)
        with kube_config.new_client_from_config(str(path)) as client:
            with pytest.raises(kubernetes.client.ApiException) as denied:
                kubernetes.client.CoreV1Api(client).list_namespace()
            assert denied.value.status == 403
        assert plane.request_counts(user="carol")["list"] == 1
        pids = plane.pids
        assert len(pids) == len(plane.components)
        # Ctrl-C inside the block stops everything
        with pytest.raises(KeyboardInterrupt), plane:
            raise KeyboardInterrupt
    assert not [pid for pid in pids if alive(pid)]


def test_a_crashed_component_shows_its_log_and_nothing_is_left(
    tmp_path: Path, kube_assets: Path
) -> None:
    real = find_assets(kube_assets)
    (tmp_path / "kube-apiserver").write_text("#!/bin/sh\necho 'flag provided but not defined: "
                                             "--boom' >&2\nexit 3\n")
    (tmp_path / "kube-apiserver").chmod(0o755)
    if real.kube_controller_manager is not None:
        (tmp_path / "kube-controller-manager").symlink_to(real.kube_controller_manager)
    plane = ControlPlane(tmp_path)
    with pytest.raises(ComponentCrashedError) as caught:
        plane.start()
    assert caught.value.component == "kube-apiserver"
    assert caught.value.returncode == 3
    assert "--boom" in caught.value.log_tail
    assert "--boom" in str(caught.value)
    assert len(plane.pids) == 2  # etcd and kube-apiserver were started ...
    assert not [pid for pid in plane.pids if alive(pid)]  # ... and are gone



def test_a_service_account_of_any_name_length_gets_a_token(
    real_kube_api: ControlPlane, kube_namespace_real: str
) -> None:
    """Issue 36: a ServiceAccount user over 64 characters (a certificate's common name) failed;
    it now gets a TokenRequest token, and is that ServiceAccount with its groups."""
    name = "operator-" + "x" * 70
    user = f"system:serviceaccount:{kube_namespace_real}:{name}"
    path = real_kube_api.kubeconfig_for(user, groups=["system:serviceaccounts"])
    assert "token:" in path.read_text()
    with kube_config.new_client_from_config(str(path)) as client:
        core = kubernetes.client.CoreV1Api(client)
        with pytest.raises(kubernetes.client.ApiException) as caught:
            core.list_namespaced_config_map(kube_namespace_real)
        assert caught.value.status == 403
        assert f'User \\"{user}\\" cannot list' in str(caught.value.body)
        _bind_reader(real_kube_api, kube_namespace_real, {
            "kind": "Group", "apiGroup": "rbac.authorization.k8s.io",
            "name": f"system:serviceaccounts:{kube_namespace_real}"})
        _wait_allowed(lambda: core.list_namespaced_config_map(kube_namespace_real))
    assert real_kube_api.request_counts(user=user)["list"] >= 2
    with pytest.raises(ControlPlaneError, match="carries the groups"):
        real_kube_api.kubeconfig_for(user, groups=["devs"])


def test_a_user_of_any_name_length_gets_a_certificate(
    real_kube_api: ControlPlane, kube_namespace_real: str
) -> None:
    user = f"someone-{kube_namespace_real}-" + "y" * 80
    path = real_kube_api.kubeconfig_for(user, groups=["devs-long"])
    with kube_config.new_client_from_config(str(path)) as client:
        core = kubernetes.client.CoreV1Api(client)
        with pytest.raises(kubernetes.client.ApiException) as caught:
            core.list_namespaced_config_map(kube_namespace_real)
        assert f'User \\"{user}\\" cannot list' in str(caught.value.body)
        _bind_reader(real_kube_api, kube_namespace_real, {
            "kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user})
        _wait_allowed(lambda: core.list_namespaced_config_map(kube_namespace_real))
