"""The virtual clock: time that moves only when a test says so.

Every timer of the driver reads an injected ``Clock`` (``reconciler.clocks``); this one lets a
test run 10 h resyncs, 5-minute backoff caps and 15 s leases in milliseconds and
deterministically. Boundary: time and waking its waiters; nothing of the driver. Public through
``reconciler.testing``.
"""

from __future__ import annotations

import threading
import time

from reconciler._base import errors as _errors

__all__ = ["VirtualClock"]


class VirtualClock:
    """A clock that moves only when a test calls ``advance``; waits end when their deadline passes.

    Waiting threads register their condition; ``advance`` notifies every registered condition so
    its waiter re-checks its deadline against the new time. ``wait_for_waiters`` lets a test block
    (in real time) until the threads it started have reached their waits, so that an ``advance``
    is observed by all of them.
    """

    def __init__(self, *, start: float = 1_700_000_000.0) -> None:
        self._lock = threading.Condition()
        self._now = 0.0
        self._epoch = start
        self._waiting: dict[int, threading.Condition] = {}
        self._next_id = 0

    def monotonic(self) -> float:
        """Virtual seconds since the clock was made."""
        with self._lock:
            return self._now

    def time(self) -> float:
        """The virtual wall clock (``start`` plus the virtual seconds elapsed)."""
        with self._lock:
            return self._epoch + self._now

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every waiter so it re-checks its deadline."""
        if seconds < 0:
            raise _errors.ReconcilerUsageError(
                f"a clock cannot go backwards (advance by {seconds})"
            )
        with self._lock:
            self._now += seconds
            waiters = list(self._waiting.values())
            self._lock.notify_all()
        for condition in waiters:
            with condition:
                condition.notify_all()

    @property
    def waiters(self) -> int:
        """How many threads are currently blocked in ``sleep`` or ``wait``."""
        with self._lock:
            return len(self._waiting)

    def wait_for_waiters(self, count: int, *, timeout: float = 5.0) -> bool:
        """Block (real time) until at least ``count`` threads wait on this clock."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self._waiting) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._lock.wait(min(remaining, 0.01))
        return True

    def sleep(self, seconds: float) -> None:
        """Block until virtual time has moved ``seconds`` forward."""
        condition = threading.Condition()
        with condition:
            deadline = self.monotonic() + seconds
            while self.monotonic() < deadline:
                self._wait_registered(condition)

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        """Wait on ``condition`` until notified, or until virtual time passes the deadline."""
        deadline = None if timeout is None else self.monotonic() + timeout
        if deadline is not None and self.monotonic() >= deadline:
            return
        self._wait_registered(condition)

    def _wait_registered(self, condition: threading.Condition) -> None:
        with self._lock:
            token = self._next_id
            self._next_id += 1
            self._waiting[token] = condition
            self._lock.notify_all()
        try:
            # A real-time cap guards against a notify lost between registration and waiting.
            condition.wait(0.05)
        finally:
            with self._lock:
                del self._waiting[token]
