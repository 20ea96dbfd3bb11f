"""One child process of the control plane: started in its own process group with its output in a
log file, checked for an early exit, stopped with SIGTERM then SIGKILL to the whole group.

A module-level set holds every running component so that ``stop_all()`` (called at interpreter
exit and by the pytest plugin at session finish) leaves no process behind. That needs a live
interpreter: for a parent that is SIGKILLed (or crashes), each component is started on Linux with
``PR_SET_PDEATHSIG`` = SIGKILL, so the kernel ends it when its parent dies. The kernel means the
parent *thread*, so every component is forked by one daemon thread of this module (``_Spawner``)
that lives as long as the process, whichever thread starts or restarts a control plane.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from reconciler.envtest._errors import ComponentCrashedError

__all__ = ["Component", "read_from", "stop_all"]

_LIVE: dict[Component, None] = {}
_LIVE_LOCK = threading.Lock()
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with_parent_hook() -> Callable[[], None] | None:
    """On Linux, a ``preexec_fn`` that makes the child get SIGKILL when its parent thread exits
    (and kills the child at once if the parent is already gone); None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - a libc without prctl
        return None
    parent, kill = os.getpid(), int(signal.SIGKILL)

    def hook() -> None:  # runs in the child between fork and exec: keep it to system calls
        prctl(_PR_SET_PDEATHSIG, kill, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), kill)

    return hook


class _Spawner:
    """The one thread that forks every component (see the module docstring): ``popen()`` from
    any thread hands the call to it and waits for the result."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = (
            queue.SimpleQueue())
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def _run(self) -> None:
        while True:
            call, future = self._requests.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(call())
                except BaseException as exc:  # handed to the caller
                    future.set_exception(exc)

    def popen(self, argv: Sequence[str], *, log: Any) -> subprocess.Popen[bytes]:
        """``subprocess.Popen`` of ``argv`` (new session, output to ``log``), forked by the
        spawner thread with the parent-death signal set."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive() or self._pid != os.getpid():
                self._requests = queue.SimpleQueue()  # a forked child starts its own thread
                self._thread = threading.Thread(target=self._run, name="optk-envtest-spawner",
                                                daemon=True)
                self._thread.start()
                self._pid = os.getpid()
        hook = _die_with_parent_hook()
        future: Future[subprocess.Popen[bytes]] = Future()
        self._requests.put((lambda: subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True, preexec_fn=hook,
        ), future))
        try:
            return future.result()
        except BaseException:  # e.g. Ctrl-C while waiting: a process started anyway is ended
            future.add_done_callback(_kill_orphan)
            raise


def _kill_orphan(future: Future[subprocess.Popen[bytes]]) -> None:
    if not future.cancelled() and future.exception() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(future.result().pid, signal.SIGKILL)


_SPAWNER = _Spawner()


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
            self._process = _SPAWNER.popen(argv, log=log)
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
