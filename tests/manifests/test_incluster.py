"""In-cluster configuration against the embedded API server: the service account's files and
variables, the token re-read when it rotates, and ``optk run --leader-elect`` as a process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from examples.thanos.operator import operator as thanos_operator
from reconciler import LeaderElection
from reconciler._client.connect import load_client
from reconciler._client.incluster import (
    InClusterConfig,
    InClusterConfigError,
    TokenFile,
    incluster_api_client,
    pod_namespace,
)
from reconciler._driver.deployed import deployed_operator

ROOT = Path(__file__).resolve().parents[2]


def _service_account(tmp_path: Path, kube_api: Any, token: str) -> tuple[Path, dict[str, str]]:
    directory = tmp_path / "serviceaccount"
    directory.mkdir()
    (directory / "token").write_text(token + "\n")
    (directory / "ca.crt").write_bytes(Path(kube_api.ca_cert_path).read_bytes())
    (directory / "namespace").write_text("operators\n")
    host, port = kube_api.url.removeprefix("https://").rsplit(":", 1)
    return directory, {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}


def _rotate(path: Path, token: str) -> None:
    """As the kubelet does: write a new file, then rename it over the old one."""
    new = path.with_suffix(".new")
    new.write_text(token)
    os.replace(new, path)


def test_missing_variables_and_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(InClusterConfigError) as raised:
        InClusterConfig.from_environment({"KUBERNETES_SERVICE_PORT": "443"}, directory=tmp_path)
    assert raised.value.missing == ("KUBERNETES_SERVICE_HOST", str(tmp_path / "token"),
                                    str(tmp_path / "ca.crt"))
    assert isinstance(raised.value, LookupError)


def test_the_client_follows_the_token_file_as_it_rotates(kube_api: Any, tmp_path: Path) -> None:
    directory, env = _service_account(tmp_path, kube_api, "expired-token")
    config = InClusterConfig.from_environment(env, directory=directory)
    assert config.url == kube_api.url
    core = kubernetes.client.CoreV1Api(incluster_api_client(config))
    with pytest.raises(kubernetes.client.ApiException) as refused:
        core.list_namespace()
    assert refused.value.status == 401
    _rotate(directory / "token", kube_api.token)
    assert core.list_namespace().items  # the same client, the new token
    _rotate(directory / "token", "revoked")
    with pytest.raises(kubernetes.client.ApiException):
        core.list_namespace()
    assert pod_namespace(config, environ={}) == "operators"
    assert pod_namespace(config, environ={"POD_NAMESPACE": "elsewhere"}) == "elsewhere"


def test_connect_prefers_a_kubeconfig_then_the_cluster(kube_api: Any, tmp_path: Path) -> None:
    directory, env = _service_account(tmp_path, kube_api, kube_api.token)
    client = load_client(None, environ=env, directory=directory)
    assert client.configuration.host == kube_api.url
    assert kubernetes.client.VersionApi(client).get_code().major
    from_file = load_client(str(kube_api.kubeconfig_path), environ=env, directory=directory)
    assert kubernetes.client.VersionApi(from_file).get_code().major


def test_token_file_reads_only_when_the_file_changes(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("one")
    token = TokenFile(path)
    assert [token.read(), token.read()] == ["one", "one"]
    assert token.reads == 1
    _rotate(path, "two")
    assert token.read() == "two"
    assert token.reads == 2


def test_deployed_operator_sets_election_and_namespaces() -> None:
    deployed = deployed_operator(thanos_operator, leader_elect=True, lease_namespace="ops",
                                 watch_namespace="apps")
    assert deployed.leader_election == LeaderElection(namespace="ops")
    assert deployed.namespace == "apps"
    assert deployed.heartbeat_lease == ("ops", "thanos-operator-resync")
    alone = deployed_operator(thanos_operator, leader_elect=False, lease_namespace="ops",
                              watch_namespace=None)
    assert alone.leader_election is None
    assert alone.heartbeat_lease == ("ops", "thanos-operator-resync")
    assert deployed_operator(thanos_operator, leader_elect=False, lease_namespace=None,
                             watch_namespace=None) == thanos_operator


@pytest.mark.timeout(120)
def test_optk_run_leader_elect_takes_the_lease_and_stops_on_sigterm(
    kube_api: Any, kube_namespace: str
) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "run", "examples.thanos.operator:operator",
         "--kubeconfig", str(kube_api.kubeconfig_path), "--leader-elect",
         "--lease-namespace", kube_namespace],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    coordination = kubernetes.client.CoordinationV1Api(kube_api.api_client())
    try:
        deadline = time.monotonic() + 60
        lease = None
        while lease is None and time.monotonic() < deadline and process.poll() is None:
            try:
                lease = coordination.read_namespaced_lease("thanos-operator-leader",
                                                           kube_namespace)
            except kubernetes.client.ApiException:
                time.sleep(0.2)
        assert lease is not None, "no leader Lease"
        assert lease.spec.holder_identity
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
