"""Real-time waits on a running operator: synced, and idle (the toolkit's test helpers).

Boundary: polling the runtime's ``ready`` and ``idle`` flags within a timeout; what they mean is
the runtime's. Public through ``reconciler.testing``.
"""

from __future__ import annotations

import time
import typing

if typing.TYPE_CHECKING:
    from reconciler._driver.runtime import OperatorRuntime

__all__ = ["wait_idle", "wait_synced"]


def wait_synced(runtime: OperatorRuntime, timeout: float = 30.0) -> bool:
    """Block (real time) until ``runtime.ready``; whether it became ready within ``timeout``."""
    deadline = time.monotonic() + timeout
    while not runtime.ready:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


def wait_idle(runtime: OperatorRuntime, timeout: float = 30.0, *, settle: float = 0.05) -> bool:
    """Block (real time) until nothing is queued or running for ``settle`` seconds; whether
    that happened within ``timeout``."""
    deadline = time.monotonic() + timeout
    quiet_since: float | None = None
    while time.monotonic() < deadline:
        if not runtime.idle:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= settle:
            return True
        time.sleep(0.002)
    return False
