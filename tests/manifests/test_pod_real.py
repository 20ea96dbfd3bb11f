"""The pod as the kubelet runs it (issue 23, 5), on the real control plane.

The generated manifests are applied (RBAC on); the Deployment's container is then run as a
kubelet would run it, with no kubelet: its ``command`` with ``$(VAR)`` references expanded, its
``env`` with the downward-API values filled in, ``KUBERNETES_SERVICE_HOST``/``_PORT``, the
ServiceAccount token from a TokenRequest (with the CA and namespace) bind-mounted at
``/var/run/secrets/kubernetes.io/serviceaccount`` in a mount namespace of its own, the pod's
``runAsUser``/``runAsGroup`` (``setpriv``), in a network namespace of its own
(``tests.podnet``: a veth pair, the pod address). The pod reaches the API server through the
``kubernetes`` Service address, here ``127.0.0.1`` inside the pod forwarded to the API server
(the serving certificate names 127.0.0.1; nothing is bound on the host). From the host, the
test probes ``/healthz`` and ``/readyz`` at the pod address and the port the probes name,
scrapes ``/metrics`` with a ServiceAccount token (200) and without one (401), and checks that
the operator reconciles the samples with no 403 (its log, its ``/readyz``).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from reconciler import AlreadyExistsError, KubernetesClient
from reconciler.envtest import ControlPlane
from tests.manifests.test_rbac_real import (
    _documents,
    _scrape,
    _scraper,
    _steps_converge,
    _token,
    _wait_for_service_account,
    _wait_plain,
)
from tests.podnet import PodNetwork, pod_network, terminate

pytestmark = pytest.mark.timeout(400)

ROOT = Path(__file__).resolve().parents[2]
_SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
_OP_NS = "optk-pod-op"


@pytest.fixture(scope="module")
def plane(kube_assets: Path) -> Iterator[ControlPlane]:
    with ControlPlane(kube_assets) as cp:
        yield cp


def _expand(value: str, env: Mapping[str, str]) -> str:
    """The kubelet's ``$(VAR)`` expansion (an unknown reference stays as written)."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: env.get(m.group(1), m.group(0)), value)


def _container_env(container: Mapping[str, Any], pod: Mapping[str, str]) -> dict[str, str]:
    """The container's ``env``, downward-API ``fieldRef`` values filled in from ``pod``."""
    env: dict[str, str] = {}
    for item in container.get("env") or ():
        if "value" in item:
            env[item["name"]] = _expand(str(item["value"]), env)
        else:
            env[item["name"]] = pod[item["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def _status(url: str) -> int | None:
    """The answer's status; None while nothing listens (the pod is starting)."""
    try:
        return _scrape(url, None)[0]
    except OSError:
        return None


def _pod_argv(net: PodNetwork, command: list[str], user: int, group: int,
              secrets: Path) -> list[str]:
    """``command`` in the pod's network namespace and a mount namespace of its own, where the
    ServiceAccount's files are mounted where the kubelet mounts them, as ``user:group``."""
    script = ("set -e; mount -t tmpfs -o mode=755 pod-run /run; "
              f"mkdir -p {_SA_DIR}; mount --bind -o ro \"$0\" {_SA_DIR}; "
              f"exec setpriv --reuid {user} --regid {group} --clear-groups \"$@\"")
    return net.argv(["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                     str(secrets), *command])


def test_the_generated_pod_serves_its_probes_and_metrics_and_reconciles(
    plane: ControlPlane, tmp_path: Path
) -> None:
    if shutil.which("setpriv") is None or shutil.which("unshare") is None:
        pytest.skip("setpriv and unshare are needed to run the pod's process")
    admin = KubernetesClient(plane.api_client())
    documents = [obj for obj, _ in _documents(_OP_NS)]
    for obj in documents:
        if obj["kind"] == "Deployment":
            continue  # no kubelet: the test runs its container below
        with contextlib.suppress(AlreadyExistsError):
            admin.create(obj)
    _wait_for_service_account(plane, _OP_NS)
    deployment = next(o for o in documents if o["kind"] == "Deployment")
    pod_spec = deployment["spec"]["template"]["spec"]
    container = pod_spec["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    probe_port = ports[container["readinessProbe"]["httpGet"]["port"]]
    assert ports[container["livenessProbe"]["httpGet"]["port"]] == probe_port
    secrets = tmp_path / "serviceaccount"
    secrets.mkdir(mode=0o755)
    secrets.chmod(0o755)
    for name, text in (("token", _token(plane, _OP_NS, pod_spec["serviceAccountName"])),
                       ("ca.crt", Path(plane.ca_cert_path).read_text()),
                       ("namespace", _OP_NS)):
        (secrets / name).write_text(text)
        (secrets / name).chmod(0o644)  # the kubelet's default mode for projected files
    reader = _scraper(plane, admin, _OP_NS, "prometheus", reader=True)
    host, api_port = plane.url.removeprefix("https://").rsplit(":", 1)
    with pod_network() as net, net.forward("127.0.0.1", int(api_port), (host, int(api_port))):
        env = {"PATH": f"{ROOT / '.venv' / 'bin'}:/usr/bin:/bin", "HOME": "/tmp",
               "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": api_port,
               **_container_env(container, {"metadata.namespace": _OP_NS,
                                            "metadata.name": "operator-0"})}
        command = [_expand(part, env) for part in container["command"]]
        security = pod_spec["securityContext"]
        process = subprocess.Popen(
            _pod_argv(net, command, security["runAsUser"], security["runAsGroup"], secrets),
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines: list[str] = []
        reader_thread = threading.Thread(
            target=lambda: lines.extend(process.stderr or ()), daemon=True)
        reader_thread.start()
        base = f"http://{net.pod_ip}:{probe_port}"
        try:
            assert _wait_plain(lambda: _status(f"{base}/readyz") == 200, 90), lines[-20:]
            assert _scrape(f"{base}/healthz", None) == (200, "ok")
            status, body = _scrape(f"{base}/metrics", reader)
            assert status == 200, body
            assert "leader_election_master_status" in body
            assert _scrape(f"{base}/metrics", None)[0] == 401
            assert _steps_converge(admin, "demo-pod") is None, lines[-20:]
            assert _scrape(f"{base}/readyz", None) == (200, "ok")  # not degraded
        finally:
            terminate(process, grace=pod_spec["terminationGracePeriodSeconds"])
            reader_thread.join(timeout=10)
    assert process.returncode == 0, lines[-20:]
    logged = [json.loads(line) for line in lines if line.startswith("{")]
    assert logged, lines[-20:]
    assert all(set(line) >= {"ts", "level", "logger", "msg"} for line in logged)
    forbidden = [line for line in lines if "403" in line or "orbidden" in line]
    assert forbidden == []
    serving = [line["msg"] for line in logged if line["msg"].startswith("metrics and health")]
    assert serving in ([f"metrics and health on http://[::]:{probe_port} (/metrics authorized "
                        "by the API server)"],
                       [f"metrics and health on http://0.0.0.0:{probe_port} (/metrics "
                        "authorized by the API server)"]), serving
