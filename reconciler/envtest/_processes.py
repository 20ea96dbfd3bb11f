"""One child process of the control plane: started in its own process group with its output in a
log file, checked for an early exit, stopped with SIGTERM then SIGKILL to the whole group.

A module-level set holds every running component so that ``stop_all()`` (called at interpreter
exit and by the pytest plugin at session finish) leaves no process behind.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from reconciler.envtest._errors import ComponentCrashedError

__all__ = ["Component", "read_from", "stop_all"]

_LIVE: dict[Component, None] = {}
_LIVE_LOCK = threading.Lock()


def tail(path: Path, *, lines: int = 30, max_bytes: int = 16_384) -> str:
    """The last ``lines`` lines of ``path`` (at most ``max_bytes`` read)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return "(no log written)"
    return "\n".join(data.splitlines()[-lines:]) or "(empty log)"


def read_from(path: Path, offset: int) -> bytes:
    """The bytes of ``path`` from ``offset`` on (empty when it does not exist)."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            return handle.read()
    except FileNotFoundError:
        return b""


class Component:
    """A started binary; ``stop()`` ends its process group (idempotent)."""

    def __init__(self, *, name: str, argv: Sequence[str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        with log_path.open("ab") as log:
            self._process = subprocess.Popen(
                list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True,
            )
        self.pid = self._process.pid
        with _LIVE_LOCK:
            _LIVE[self] = None

    def running(self) -> bool:
        """Whether the process has not exited."""
        return self._process.poll() is None

    def log_tail(self) -> str:
        """The last lines of the component's log."""
        return tail(self.log_path)

    def check(self) -> None:
        """Raise ``ComponentCrashedError`` (with the log's tail) if the process has exited."""
        code = self._process.poll()
        if code is not None:
            raise ComponentCrashedError(
                component=self.name, returncode=code, log_path=self.log_path,
                log_tail=self.log_tail(),
            )

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    def stop(self, *, grace: float = 5.0) -> None:
        """SIGTERM to the process group, SIGKILL after ``grace`` seconds, then reap."""
        try:
            if self._process.poll() is None:
                self._signal_group(signal.SIGTERM)
                deadline = time.monotonic() + grace
                while self._process.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.02)
            # the group may hold children even when the leader is gone
            self._signal_group(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=5.0)
        finally:
            with _LIVE_LOCK:
                _LIVE.pop(self, None)


def stop_all() -> None:
    """Stop every component still running in this interpreter (newest first)."""
    with _LIVE_LOCK:
        components = list(reversed(_LIVE))
    for component in components:
        component.stop(grace=2.0)


atexit.register(stop_all)
