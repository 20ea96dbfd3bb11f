"""Child processes of a benchmark: the embedded API server and operators, with CPU and memory.

``Processes`` starts each program in its own process group, remembers it, and stops every one
it started (SIGTERM, then SIGKILL after a bound) when it is closed, on normal exit as on error.
``cpu_seconds(pid)`` and ``peak_rss_bytes(pid)`` read ``/proc`` (Linux): user plus system time,
and the high-water mark of the resident set (``VmHWM``), so no sampling can miss a peak.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

REPO = Path(__file__).resolve().parent.parent
"""The repository root: the working directory of every child (``examples`` and ``benchmarks``
import from there)."""

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def peak_rss_bytes(pid: int) -> int:
    """The process's peak resident set size (``VmHWM``) in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status")


class ProcessError(RuntimeError):
    """A child process did not start or died: its name, exit code and the tail of its log."""

    def __init__(self, *, name: str, message: str, log: Path | None) -> None:
        tail = ""
        if log is not None and log.exists():
            tail = "\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        super().__init__(f"{name}: {message}{tail}")
        self.name = name


class Processes:
    """Every process a benchmark started, stopped on ``close()`` (a context manager)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._running: list[tuple[str, subprocess.Popen[bytes], IO[bytes]]] = []

    def __enter__(self) -> Processes:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def start(
        self, name: str, argv: Sequence[str], *, env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` from the repository root, its output in ``<directory>/<name>.log``."""
        log = open(self.directory / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop()
        environment = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
        process = subprocess.Popen(
            list(argv), cwd=REPO, env=environment, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
        self._running.append((name, process, log))
        return process

    def log_path(self, name: str) -> Path:
        """Where ``name``'s output goes."""
        return self.directory / f"{name}.log"

    def check_alive(self, name: str, process: subprocess.Popen[bytes]) -> None:
        """Raise ``ProcessError`` if the process has exited."""
        code = process.poll()
        if code is not None:
            raise ProcessError(name=name, message=f"exited with code {code}",
                               log=self.log_path(name))

    def stop(self, process: subprocess.Popen[bytes], *, timeout: float = 10.0) -> None:
        """SIGTERM the process, SIGKILL it after ``timeout`` seconds; forget it."""
        for entry in list(self._running):
            if entry[1] is process:
                self._running.remove(entry)
                _terminate(process, timeout)
                entry[2].close()

    def close(self) -> None:
        """Stop every process still running, newest first."""
        while self._running:
            self.stop(self._running[-1][1])


def _terminate(process: subprocess.Popen[bytes], timeout: float) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)


def start_apiserver(processes: Processes, *, name: str = "apiserver") -> tuple[
    subprocess.Popen[bytes], Path
]:
    """``optk apiserver`` in its own process; returns it and its kubeconfig, once written."""
    kubeconfig = processes.directory / f"{name}.kubeconfig"
    process = processes.start(
        name, [sys.executable, "-m", "reconciler", "apiserver", "--kubeconfig", str(kubeconfig)]
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        processes.check_alive(name, process)
        if kubeconfig.exists() and "listening on" in processes.log_path(name).read_text():
            return process, kubeconfig
        time.sleep(0.02)
    raise ProcessError(name=name, message="did not start within 60 s",
                       log=processes.log_path(name))
