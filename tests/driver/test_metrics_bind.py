"""``optk run --metrics-bind-address``: where ``/metrics``, ``/healthz`` and ``/readyz`` listen.

The kubelet probes the pod's address, not its loopback (issue 23): an ``optk run`` process in a
network namespace of its own (``tests.podnet``: a veth pair, the pod address on the pod end)
answers the probes from the host at the pod address, with the flag and, inside a pod
(``KUBERNETES_SERVICE_HOST`` set), without it. Outside a pod the default stays loopback.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import pytest

from reconciler._base.metrics import (
    HealthServer,
    OperatorMetrics,
    default_bind_address,
    parse_bind_address,
)
from reconciler._commands.cli import build_parser
from tests.podnet import PodNetwork, pod_network, terminate

ROOT = Path(__file__).resolve().parents[2]
_PORT = 8080


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def _serve_in_pod(net: PodNetwork, flags: Sequence[str], env: dict[str, str]) -> list[int | None]:
    """``optk run`` of the sample operator (on a fresh embedded server) in the pod's
    namespace; the answers of ``/healthz`` and ``/readyz`` at the pod address."""
    process = subprocess.Popen(
        net.argv([sys.executable, "-m", "reconciler", "run", "tests.driver.sample_operator",
                  "--embedded", "--metrics-port", str(_PORT), *flags]),
        cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    base = f"http://{net.pod_ip}:{_PORT}"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and process.poll() is None:
            if _status(f"{base}/readyz") == 200:
                break
            time.sleep(0.2)
        return [_status(f"{base}/healthz"), _status(f"{base}/readyz")]
    finally:
        terminate(process, grace=30)


def _without_service_host() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_SERVICE_")}


@pytest.mark.timeout(180)
def test_a_process_bound_to_the_pod_address_answers_the_probes_there() -> None:
    with pod_network() as net:
        answers = _serve_in_pod(net, ["--metrics-bind-address", net.pod_ip],
                                _without_service_host())
    assert answers == [200, 200]


@pytest.mark.timeout(180)
def test_inside_a_pod_the_default_is_every_interface() -> None:
    with pod_network() as net:
        env = {**_without_service_host(), "KUBERNETES_SERVICE_HOST": "10.0.0.1",
               "KUBERNETES_SERVICE_PORT": "443"}
        answers = _serve_in_pod(net, [], env)
    assert answers == [200, 200]


def test_outside_a_pod_the_default_is_loopback() -> None:
    assert default_bind_address({}) == "127.0.0.1"
    assert default_bind_address({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) == "0.0.0.0"
    with HealthServer(OperatorMetrics("x"), ready=lambda: True,
                      host=default_bind_address({})) as server:
        assert server.url.startswith("http://127.0.0.1:")
        assert _status(f"{server.url}/healthz") == 200


def test_the_flag_takes_an_ip_address_and_says_where_the_port_goes(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_bind_address("10.1.2.3") == "10.1.2.3"
    assert parse_bind_address("[::]") == "::"
    assert parse_bind_address("fd00::0001") == "fd00::1"
    for wrong, says in (("0.0.0.0:8080", "--metrics-port"), (":8080", "0.0.0.0"),
                        ("localhost", "not an IP address")):
        with pytest.raises(ValueError, match=says):
            parse_bind_address(wrong)
    args = build_parser().parse_args(["run", "m", "--metrics-bind-address", "::"])
    assert args.metrics_bind_address == "::"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "m", "--metrics-bind-address", "0.0.0.0:8080"])
    assert "--metrics-port" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    assert "a pod, i.e. KUBERNETES_SERVICE_HOST is set" in " ".join(
        capsys.readouterr().out.split())
