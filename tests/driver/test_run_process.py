"""``optk run`` as a process, in both forms: plain and as deployed (``--leader-elect``,
``--lease-namespace``, ``--watch-namespace``) run through the same process shell
(``reconciler._commands.running.run_command``): the log level is honoured, the heap is frozen (the
``optk.heap`` DEBUG lines), and a server that cannot be reached is one line naming its URL and
exit code 2. Real processes against the session's embedded API server; every wait is bounded."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from reconciler import KubernetesClient
from tests.driver.conftest import child_data, thing, wait_until

ROOT = Path(__file__).resolve().parents[2]
_ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
_OPERATOR = "tests.driver.sample_operator"


class _Stderr:
    """A process's stderr, read on a thread so that every wait on it is bounded."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        assert process.stderr is not None
        self._stream = process.stderr
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self._stream:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, predicate: Callable[[str], bool], timeout: float) -> str | None:
        """The first line ``predicate`` accepts, waiting up to ``timeout`` seconds for it."""
        deadline = time.monotonic() + timeout
        while True:
            found = next((line for line in list(self.lines) if predicate(line)), None)
            if found is not None or time.monotonic() > deadline or not self._reader.is_alive():
                return found or next((line for line in list(self.lines) if predicate(line)), None)
            time.sleep(0.05)

    def text(self) -> str:
        """Everything read so far (the tail, for assertion messages)."""
        return "\n".join(self.lines)[-3000:]

    def finish(self) -> None:
        """Wait (bounded) until the process's stderr is closed and read."""
        self._reader.join(timeout=30)


@contextmanager
def _optk_run(args: Sequence[str], *, env: dict[str, str] | None = None,
              ) -> Iterator[tuple[subprocess.Popen[str], _Stderr]]:
    """``python -m reconciler run ARGS``; SIGTERM after the block, exit awaited (bounded)."""
    process = subprocess.Popen([sys.executable, "-m", "reconciler", "run", *args], cwd=ROOT,
                               env=env or _ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    stderr = _Stderr(process)
    try:
        yield process, stderr
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
            stderr.finish()


def _deployed(kube_api: Any, ns: str, *level: str) -> list[str]:
    return [_OPERATOR, "--kubeconfig", str(kube_api.kubeconfig_path), "--leader-elect",
            "--lease-namespace", ns, "--watch-namespace", ns, *level]


def _lease_held(kube_api: Any, ns: str) -> Callable[[], bool]:
    coordination = kubernetes.client.CoordinationV1Api(kube_api.api_client())

    def held() -> bool:
        try:
            lease = coordination.read_namespaced_lease("sample-leader", ns)
        except kubernetes.client.ApiException:
            return False
        return bool(lease.spec and lease.spec.holder_identity)

    return held


def _frozen(line: str) -> int:
    """N of the ``optk.heap`` line ``heap frozen ...: N objects frozen``."""
    found = re.search(r": (\d+) objects frozen$", line)
    assert found is not None, line
    return int(found.group(1))


def test_optk_run_as_deployed_logs_at_debug_and_freezes_its_heap(
    kube_api: Any, client: KubernetesClient, ns: str
) -> None:
    client.create(thing(ns, "a"))
    with _optk_run(_deployed(kube_api, ns, "--log-level", "debug")) as (process, stderr):
        cold = stderr.wait_for(lambda line: "heap frozen after the cold start" in line, 90)
        assert cold is not None, stderr.text()
        assert child_data(client, ns, "a") == {"value": "1"}  # the cold start reconciled
    assert process.returncode == 0, stderr.text()
    start = next((line for line in stderr.lines if "heap frozen at start" in line), None)
    assert start is not None, stderr.text()
    counts = [_frozen(line) for line in (start, cold)]
    assert 0 < counts[0] <= counts[1], counts
    assert " DEBUG optk.heap " in cold
    assert any(" DEBUG optk." in line and "heap" not in line for line in stderr.lines), (
        stderr.text())


def test_optk_run_as_deployed_quiet_logs_no_info(kube_api: Any, ns: str) -> None:
    with _optk_run(_deployed(kube_api, ns, "-q")) as (process, stderr):
        assert wait_until(_lease_held(kube_api, ns), timeout=60), stderr.text()
    assert process.returncode == 0, stderr.text()
    assert not [line for line in stderr.lines if " INFO " in line or " DEBUG " in line], (
        stderr.text())


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


_UNREACHABLE = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "{url}"}}
contexts:
- name: c
  context: {{cluster: c, user: u}}
current-context: c
users:
- name: u
  user: {{token: x}}
"""


@pytest.mark.parametrize("level", [[], ["-q"]], ids=["info", "quiet"])
@pytest.mark.parametrize("form", [[], ["--leader-elect", "--lease-namespace", "default"]],
                         ids=["plain", "deployed"])
def test_an_unreachable_server_is_one_line_naming_it_and_exit_2(
    tmp_path: Path, form: list[str], level: list[str]
) -> None:
    url = f"https://127.0.0.1:{_closed_port()}"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(_UNREACHABLE.format(url=url))
    result = subprocess.run(
        [sys.executable, "-m", "reconciler", "run", _OPERATOR, "--kubeconfig", str(kubeconfig),
         *form, *level], cwd=ROOT, env=_ENV, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    naming = [line for line in result.stderr.splitlines() if url in line]
    assert len(naming) == 1, result.stderr[-3000:]
    assert naming[0].startswith(f"optk run: cannot reach the Kubernetes API server at {url}")
    if level:
        assert result.stderr.splitlines() == naming
