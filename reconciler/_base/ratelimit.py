"""One WARNING per cause per interval: the limiter of log lines that one cause repeats.

Why it exists: one cause can fail many parents at every retry (a kind the operator may not
list fails every parent that builds it, at each backoff try, and is listed again by its
informer at each reconnect). A WARNING per parent per retry buried everything else: 374 lines
in two minutes for one missing RBAC rule (issue 35). :class:`CauseLimiter` lets the first line
of a cause through at WARNING and the following ones of the same cause at DEBUG for
``interval`` seconds, then counts how many it lowered, so the next WARNING says so.

Boundary: a pure decision on an injected clock (virtual in tests); the callers log.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable

from reconciler._base.clocks import Clock

__all__ = ["WARNING_INTERVAL", "CauseLimiter"]

WARNING_INTERVAL = 60.0
"""Seconds between two WARNING lines of one cause."""

_KEPT = 1024  # causes remembered (the oldest forgotten first)


class CauseLimiter:
    """Whether a line of one cause may be a WARNING now (thread-safe)."""

    def __init__(self, clock: Clock, *, interval: float = WARNING_INTERVAL) -> None:
        self._clock = clock
        self.interval = interval
        self._last: dict[Hashable, tuple[float, int]] = {}  # cause: (last warned, lowered since)
        self._lock = threading.Lock()

    def level(self, cause: Hashable) -> tuple[int, str]:
        """The level of a line of ``cause`` now: ``(logging.WARNING, suffix)`` for the first
        in ``interval`` (the suffix says how many were lowered since the last one, else ""),
        ``(logging.DEBUG, "")`` for the others."""
        now = self._clock.monotonic()
        with self._lock:
            last, lowered = self._last.get(cause, (None, 0))
            if last is not None and now - last < self.interval:
                self._last[cause] = (last, lowered + 1)
                return logging.DEBUG, ""
            self._last.pop(cause, None)
            if len(self._last) >= _KEPT:
                self._last.pop(next(iter(self._last)))
            self._last[cause] = (now, 0)
        return logging.WARNING, (
            f" ({lowered} more like it since the last WARNING were logged at DEBUG: one "
            f"WARNING per {self.interval:g}s)" if lowered else "")
