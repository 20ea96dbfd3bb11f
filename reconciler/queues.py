"""The work queue of the driver and its rate limiters (token bucket, exponential backoff).

The runtime builds these from ``Operator``; they are public for tools and tests that use the
queue on its own. This public module only re-exports (the implementation is private); see
``docs/driver.md``.
"""

from __future__ import annotations

from reconciler._workqueue.queues import ExponentialBackoff, TokenBucket, WorkQueue

__all__ = ["ExponentialBackoff", "TokenBucket", "WorkQueue"]
