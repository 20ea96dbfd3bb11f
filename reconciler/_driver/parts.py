"""What the runtime hands its parts: small frozen values for what several parts share.

Issue 37 ("narrow hands"). The runtime (``reconciler._driver.runtime``) builds each part with
what that part uses; what several parts use together comes as one value rather than as loose
arguments, so that no constructor grows a long list (``tests/test_architecture.py`` fails past
ten parameters):

- ``Triggering``: how a part makes a parent be reconciled: the work ``queue``, the resync
  ``schedule`` and ``kick()`` (wake the resync timer: the schedule changed);
- ``Telemetry``: how a part tells time and says what it did: the ``clock``, the ``stats`` (the
  runtime's own counters) and the Prometheus ``metrics``.

The others sit lower, because parts of lower packages take them too: ``Caches`` (the parent
informer and the child informers, ``reconciler._cache.informers``) and ``Lifecycle``
(``stopping()``, ``stop()``, ``track(thread)``, ``reconciler._base.lifecycle``). A value holds
callables and shared objects, never the runtime.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from reconciler._base.clocks import Clock
from reconciler._base.metrics import OperatorMetrics
from reconciler._driver.resyncs import ResyncSchedule
from reconciler._driver.stats import RuntimeStats
from reconciler._driver.triggers import ParentKey
from reconciler._workqueue.queues import WorkQueue

__all__ = ["Telemetry", "Triggering"]


@attrs.frozen(kw_only=True)
class Triggering:
    """How a part makes a parent be reconciled: now, later, or when due."""

    queue: WorkQueue[ParentKey]
    schedule: ResyncSchedule
    kick: Callable[[], None]
    """Wake the resync timer (the schedule changed)."""


@attrs.frozen(kw_only=True)
class Telemetry:
    """How a part tells time and says what it did."""

    clock: Clock
    stats: RuntimeStats
    metrics: OperatorMetrics
