"""``optk run`` of the versioned Thanos operator against a local API server (issue 36).

The embedded server, like any API server on this machine, cannot reach the webhooks' Service:
``optk run`` sees the server's loopback URL and serves the webhooks at 127.0.0.1 itself (the
``local`` mode the tests used to ask for), so a v1alpha1 parent is stored (converted to v1alpha2
by the operator's own conversion webhook), read back at either version, and reconciled. The
operator runs as a process with a kubeconfig, as ``optk run`` is used; the server is a fresh
embedded one (the test installs the two-version Thanos CRD cluster-wide).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from examples.thanos.crds import KIND, THANOS_VERSIONED_CRD
from reconciler import KubernetesClient, NotFoundError, ServerError
from reconciler.embedded import EmbeddedApiServer

ROOT = Path(__file__).resolve().parents[2]
GROUP = THANOS_VERSIONED_CRD["spec"]["group"]
CRD_NAME = THANOS_VERSIONED_CRD["metadata"]["name"]


def eventually(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def running() -> Iterator[tuple[KubernetesClient, subprocess.Popen[str]]]:
    with EmbeddedApiServer() as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "run",
             "examples.thanos.operator:versioned_operator",
             "--kubeconfig", str(server.kubeconfig_path)],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        try:
            yield KubernetesClient(server.api_client()), process
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)


def _conversion_url(client: KubernetesClient) -> str | None:
    try:
        crd = client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD_NAME)
    except NotFoundError:
        return None
    webhook = ((crd["spec"].get("conversion") or {}).get("webhook") or {})
    url = (webhook.get("clientConfig") or {}).get("url")
    return str(url) if url else None


def _created(client: KubernetesClient, obj: dict[str, object]) -> bool:
    """Create ``obj``; False while the served CRD still names no reachable webhook."""
    try:
        client.create(obj)
    except ServerError:
        return False
    return True


def test_optk_run_serves_the_webhooks_locally_for_a_local_api_server(
    running: tuple[KubernetesClient, subprocess.Popen[str]],
) -> None:
    client, process = running
    eventually(lambda: process.poll() is not None or _conversion_url(client) is not None,
               "the conversion webhook's URL in the CRD")
    assert process.poll() is None, process.communicate()[0]
    assert str(_conversion_url(client)).startswith("https://127.0.0.1:")

    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    parent = {"apiVersion": f"{GROUP}/v1alpha1", "kind": KIND,
              "metadata": {"name": "metrics", "namespace": "team"},
              "spec": {"objectStorageSecret": "objstore", "query": {}}}
    eventually(lambda: _created(client, parent), "a v1alpha1 Thanos stored through the webhook")
    hub = client.get(f"{GROUP}/v1alpha2", KIND, "metrics", namespace="team")
    assert hub["spec"]["objectStorage"] == {"secretName": "objstore"}
    assert "objectStorageSecret" not in hub["spec"]
    spoke = client.get(f"{GROUP}/v1alpha1", KIND, "metrics", namespace="team")
    assert spoke["spec"]["objectStorageSecret"] == "objstore"

    def reconciled() -> bool:
        try:
            client.get("apps/v1", "Deployment", "metrics-query", namespace="team")
        except NotFoundError:
            return False
        return True

    eventually(reconciled, "the operator's Deployment for the parent")
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    assert "served at a local URL" in output


@pytest.mark.parametrize(("url", "local"), [
    ("https://127.0.0.1:6443", True), ("https://127.0.0.2", True), ("https://[::1]:443", True),
    ("https://localhost:8443", True), ("https://10.96.0.1:443", False),
    ("https://kubernetes.default.svc", False), ("https://192.168.1.5:6443", False),
])
def test_a_local_server_is_a_loopback_address_or_localhost(url: str, local: bool) -> None:
    from reconciler._driver.deployed import is_local_server

    assert is_local_server(url) is local
