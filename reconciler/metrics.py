"""The operator's Prometheus metrics and its health/metrics HTTP server.

``Serving(metrics_port=...)`` starts them; they are public for tools and tests that read the
figures directly. This public module only re-exports (the implementation is private); see
``docs/driver.md``.
"""

from __future__ import annotations

from reconciler._base.metrics import HealthServer, OperatorMetrics

__all__ = ["HealthServer", "OperatorMetrics"]
