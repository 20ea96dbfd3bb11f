"""``optk apiserver`` in its own process, and the ``optk`` pytest plugin in a user's test run."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import kubernetes.client
import kubernetes.config
import pytest

from reconciler.embedded import EmbeddedApiServer


def test_optk_apiserver_serves_until_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "apiserver", "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("embedded Kubernetes API server listening on https://127.0.0.1:")
        deadline = time.monotonic() + 10
        while not kubeconfig.exists():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert stat.S_IMODE(os.stat(kubeconfig).st_mode) == 0o600
        text = kubeconfig.read_text()
        assert "certificate-authority-data" in text
        assert "insecure-skip-tls-verify" not in text
        with kubernetes.config.new_client_from_config(str(kubeconfig)) as client:
            names = [n.metadata.name for n in
                     kubernetes.client.CoreV1Api(client).list_namespace().items]
        assert "kube-system" in names
    finally:
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=15)
    assert process.returncode == 0
    assert "stopped" in out
    assert not kubeconfig.exists()  # its token and CA died with the server


def test_optk_apiserver_survives_a_burst_of_signals(tmp_path: Path) -> None:
    """Repeated SIGTERM/SIGINT (a user pressing Ctrl-C twice, a supervisor retrying) must
    still stop the server, never deadlock its signal handling."""
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "apiserver", "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert process.stdout is not None
    assert "listening on" in process.stdout.readline()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGTERM, signal.SIGTERM, signal.SIGINT):
        process.send_signal(sig)
    out, _ = process.communicate(timeout=15)
    assert process.returncode == 0
    assert "stopped" in out


def test_optk_apiserver_refuses_a_public_host() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "reconciler", "apiserver", "--host", "0.0.0.0"],
        capture_output=True, text=True, timeout=30, check=False,
    )
    assert result.returncode == 2
    assert "refusing to bind" in result.stderr
    assert "Traceback" not in result.stderr


def test_optk_apiserver_takes_its_memory_bounds_as_quantities(tmp_path: Path) -> None:
    """``--history-bytes 4Ki``: a history that small has forgotten the first of twenty 1 KB
    ConfigMaps, so a list at that version is 410 Expired (the default 64 MiB keeps it)."""
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "apiserver", "--kubeconfig", str(kubeconfig),
         "--history-bytes", "4Ki", "--watch-buffer-bytes", "64Ki",
         "--watch-buffer-total-bytes", "1Mi"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        assert "listening on" in process.stdout.readline()
        while not kubeconfig.exists():
            time.sleep(0.02)
        with kubernetes.config.new_client_from_config(str(kubeconfig)) as client:
            core = kubernetes.client.CoreV1Api(client)
            versions = [core.create_namespaced_config_map("default", {
                "metadata": {"name": f"big-{i}"}, "data": {"v": "x" * 1024}},
            ).metadata.resource_version for i in range(20)]
            with pytest.raises(kubernetes.client.ApiException) as expired:
                core.list_namespaced_config_map("default", resource_version=versions[0],
                                                resource_version_match="Exact")
            assert expired.value.status == 410
            recent = core.list_namespaced_config_map(  # the newest is still in the history
                "default", resource_version=versions[-1], resource_version_match="Exact")
            assert len(recent.items) == 20
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=15)


@pytest.mark.parametrize("size", ["12.5", "0", "-1Mi", "lots"])
def test_optk_apiserver_refuses_a_size_that_is_not_bytes(size: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "reconciler", "apiserver", f"--history-bytes={size}"],
        capture_output=True, text=True, timeout=30, check=False,
    )
    assert result.returncode == 2
    assert f"{size!r} is not a size in bytes" in result.stderr
    assert "Traceback" not in result.stderr


def test_pytest_plugin_gives_kube_api_and_kube_namespace(tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""
        import kubernetes.client

        def test_uses_the_server(kube_api, kube_namespace):
            with kube_api.api_client() as client:
                core = kubernetes.client.CoreV1Api(client)
                core.create_namespaced_config_map(
                    kube_namespace, {"metadata": {"name": "from-a-user"}})
                names = [c.metadata.name
                         for c in core.list_namespaced_config_map(kube_namespace).items]
            assert names == ["from-a-user"]
            assert kube_namespace.startswith("test-")
    """))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_serves_on_localhost_with_a_verified_certificate() -> None:
    with EmbeddedApiServer(host="localhost") as server, server.api_client() as client:
        assert server.url.startswith("https://localhost:")
        version = kubernetes.client.VersionApi(client).get_code()
    assert version.major == "1"
