"""Time as the driver sees it: one ``Clock`` injected everywhere the driver reads time or waits.

The driver is thread-based (the official client is synchronous), so a clock must do three things:
tell the time (``monotonic`` for intervals, ``time`` for timestamps written to status), sleep, and
wait on a ``threading.Condition`` with a timeout. ``RealClock`` maps these onto the OS;
``reconciler.testing.VirtualClock`` keeps its own time that only ``advance()`` moves, so tests
of periodic behaviour (resync every 10 h, 5-minute backoff caps, 15 s leases) run in
milliseconds and deterministically.
Nothing outside this module calls ``time.sleep`` or ``time.monotonic`` in the driver.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "RealClock"]


@runtime_checkable
class Clock(Protocol):
    """The driver's source of time and its only way to wait."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards (for intervals and deadlines)."""
        ...

    def time(self) -> float:
        """Seconds since the epoch (for timestamps written to objects)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for ``seconds`` of this clock's time."""
        ...

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        """Wait on ``condition`` (its lock held) until notified or ``timeout`` elapses.

        Like ``Condition.wait`` it may return early; callers re-check their predicate.
        """
        ...


class RealClock:
    """The operating system's clocks."""

    def monotonic(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()

    def time(self) -> float:
        """``time.time()``."""
        return time.time()

    def sleep(self, seconds: float) -> None:
        """``time.sleep`` (negative durations return at once)."""
        if seconds > 0:
            time.sleep(seconds)

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        """``condition.wait(timeout)``."""
        condition.wait(None if timeout is None else max(timeout, 0.0))
