"""What a running operator did, counted: the runtime's own record for tests, logs and benchmarks.

``RuntimeStats`` is plain counters the runtime's loops (``reconciler._driver.workers``,
``reconciler._driver.routing``, ``reconciler._driver.resync_loop``) increment; the Prometheus view
of the same activity is ``reconciler._base.metrics``.
"""

from __future__ import annotations

from collections import Counter

import attrs

from reconciler._driver.triggers import ParentKey

__all__ = ["RuntimeStats"]


@attrs.define
class RuntimeStats:
    """What the runtime did, for tests, logs and benchmarks."""

    reconciles: Counter[ParentKey] = attrs.field(factory=Counter)
    failures: Counter[ParentKey] = attrs.field(factory=Counter)
    writes: int = 0
    heartbeats: int = 0
    triggers: Counter[str] = attrs.field(factory=Counter)

    @property
    def total(self) -> int:
        """Reconciles of all parents."""
        return sum(self.reconciles.values())
