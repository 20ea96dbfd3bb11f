"""Time as the driver sees it: one ``Clock`` injected everywhere the driver reads time or waits.

The driver is thread-based (the official client is synchronous), so a clock must do three things:
tell the time (``monotonic`` for intervals, ``time`` for timestamps written to status), sleep, and
wait on a ``threading.Condition`` with a timeout. ``RealClock`` maps these onto the OS;
``reconciler.testing.VirtualClock`` keeps its own time that only ``advance()`` moves, so tests
of periodic behaviour (resync every 10 h, 5-minute backoff caps, 15 s leases) run in
milliseconds and deterministically.
Nothing outside this module calls ``time.sleep`` or ``time.monotonic`` in the driver.

``RealClock.monotonic`` is ``CLOCK_BOOTTIME`` on Linux, not ``CLOCK_MONOTONIC`` (issue 31,
finding 3): ``CLOCK_MONOTONIC`` stands still while the machine is suspended, so a leader suspended
past its lease resumed with its write fence (``reconciler._leadership.fencing``) still open by its
own reckoning and wrote beside the new leader. ``CLOCK_BOOTTIME`` is as monotonic and counts the
time suspended. Where it does not exist (macOS, Windows) ``time.monotonic`` is used.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "RealClock"]


@runtime_checkable
class Clock(Protocol):
    """The driver's source of time and its only way to wait.

    What may step and what may not: ``time()`` is the wall clock and may step either way (NTP,
    an administrator, a VM restored); it is only written into objects (status, Lease
    ``renewTime``), never used to measure an interval. ``monotonic()`` may not step backwards,
    and may not stand still while time passes elsewhere: it must count time the process was
    stopped or the machine suspended, because lease validity and the write fence are measured on
    it (a clock frozen across a suspend would keep a fence open past the lease). It may jump
    forward (after a suspend): everything measured on it then expires, which is safe.
    """

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards and counts suspended time (intervals,
        deadlines, lease validity)."""
        ...

    def time(self) -> float:
        """Seconds since the epoch, which may step (for timestamps written to objects)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for ``seconds`` of this clock's time."""
        ...

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        """Wait on ``condition`` (its lock held) until notified or ``timeout`` elapses.

        Like ``Condition.wait`` it may return early; callers re-check their predicate.
        """
        ...


_BOOTTIME: int | None = getattr(time, "CLOCK_BOOTTIME", None)


def _boottime() -> float:
    """``CLOCK_BOOTTIME`` where there is one (Linux), else ``time.monotonic()``."""
    if _BOOTTIME is not None:
        try:
            return time.clock_gettime(_BOOTTIME)
        except OSError:  # a kernel without it (before 2.6.39)
            pass
    return time.monotonic()


class RealClock:
    """The operating system's clocks."""

    def monotonic(self) -> float:
        """``CLOCK_BOOTTIME`` on Linux (it counts suspended time), else ``time.monotonic()``."""
        return _boottime()

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
