"""The clock the driver reads: the ``Clock`` protocol and the real clock.

Every timer of the driver (resync grid, backoff, leases, event coalescing) reads an injected
``Clock``; tests pass ``reconciler.testing.VirtualClock``. This public module only re-exports
(the implementation is private); see ``docs/driver.md``.
"""

from __future__ import annotations

from reconciler._base.clocks import Clock, RealClock

__all__ = ["Clock", "RealClock"]
