"""``python -m examples.thanos`` as a process against a cluster: children, then ServiceMonitors.

The operator runs in its own process with a kubeconfig, as it would against a real cluster; the
test plays the user: it waits for the Thanos CRD the operator installs, creates a parent, sees
its children, installs the ServiceMonitor CRD and sees the ServiceMonitor follow without touching
the parent, then stops the process with SIGTERM and expects a clean exit. Each test runs on a
fresh embedded server and on a fresh real control plane (``reconciler.envtest.ControlPlane``,
skipped without ``OPTK_KUBE_ASSETS``): a fresh one, since the test installs cluster-wide CRDs
and names fixed namespaces.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.thanos.crds import API_VERSION, KIND, SERVICE_MONITOR_CRD
from reconciler import KubernetesClient, NotFoundError
from reconciler.embedded import EmbeddedApiServer
from reconciler.envtest import ControlPlane

ROOT = Path(__file__).resolve().parents[2]


def eventually(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def exists(client: KubernetesClient, api_version: str, kind: str, name: str) -> bool:
    try:
        client.get(api_version, kind, name, namespace="team")
    except NotFoundError:
        return False
    return True


KINDS = (("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("v1", "Service"),
         ("networking.k8s.io/v1", "Ingress"))
"""The kinds ``optk plan`` would create for the samples."""


def stored(server: Any, client: KubernetesClient) -> int:
    """Objects stored: all of them on the embedded server, else those of ``KINDS`` in ``demo``
    (a real control plane has objects of its own; ``optk plan``'s dry runs are counted as
    requests on both, so request counts cannot show that nothing was written)."""
    if isinstance(server, EmbeddedApiServer):
        return server.object_count()
    return sum(len(client.list(api_version, kind, namespace="demo")["items"])
               for api_version, kind in KINDS)


@pytest.fixture(params=["embedded", "real"])
def server(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh embedded server, or a fresh real control plane."""
    if request.param == "embedded":
        with EmbeddedApiServer() as embedded:
            yield embedded
        return
    if request.config.getoption("--kube-api") == "embedded":
        pytest.skip("real control plane: --kube-api=embedded")
    with ControlPlane(request.getfixturevalue("kube_assets")) as plane:
        yield plane


@pytest.fixture
def running(server: Any) -> Iterator[tuple[KubernetesClient, subprocess.Popen[str]]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "examples.thanos", "--kubeconfig",
         str(server.kubeconfig_path)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        yield KubernetesClient(server.api_client()), process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def test_the_operator_process_builds_children_and_follows_the_servicemonitor_crd(
    running: tuple[KubernetesClient, subprocess.Popen[str]],
) -> None:
    client, process = running
    eventually(lambda: client.is_served(API_VERSION, KIND), "the Thanos CRD")
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    client.create({"apiVersion": API_VERSION, "kind": KIND,
                   "metadata": {"name": "metrics", "namespace": "team"},
                   "spec": {"query": {}}})
    eventually(lambda: exists(client, "apps/v1", "Deployment", "metrics-query"), "the Deployment")
    # the children are written one after the other: the Service may follow the Deployment
    eventually(lambda: exists(client, "v1", "Service", "metrics-query"), "the Service")

    client.create(SERVICE_MONITOR_CRD)
    eventually(
        lambda: exists(client, "monitoring.coreos.com/v1", "ServiceMonitor", "metrics-query"),
        "the ServiceMonitor",
    )

    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    assert "thanos-operator stopped" in output


def test_optk_plan_shows_what_the_samples_would_create_and_writes_nothing(server: Any) -> None:
    from examples.thanos.crds import THANOS_CRD
    from examples.thanos.demo import SAMPLES_FILE

    client = KubernetesClient(server.api_client())
    client.create(THANOS_CRD)
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}})
    client.create({"apiVersion": "v1", "kind": "Secret",  # the store gateway's input
                   "metadata": {"name": "thanos-objstore", "namespace": "demo"},
                   "stringData": {"objstore.yml": "type: FILESYSTEM"}})
    objects = stored(server, client)
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "plan", "examples.thanos.operator:operator",
         "-f", str(SAMPLES_FILE), "--kubeconfig", str(server.kubeconfig_path)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
        text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "create    StatefulSet.apps/v1 demo/observatory-store-gateway" in done.stdout
    assert "create    Deployment.apps/v1 demo/edge-query" in done.stdout
    # edge's switched-off components are ABSENT and already missing: nothing to do.
    assert "edge-query-frontend" not in done.stdout
    assert stored(server, client) == objects
