"""The runtime's health server: what ``Operator.start`` serves ``/metrics``, ``/healthz`` and
``/readyz`` from, and on which address.

Moved out of ``reconciler._driver.runtime`` (which stays the composition root, within 500
lines): this module only builds the deferred start of a ``HealthServer``
(``reconciler._base.metrics``) from what the runtime hands it; it decides nothing about
readiness or liveness (``reconciler._driver.liveness`` and the runtime's ``ready``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping

from reconciler._base.metrics import HealthServer, OperatorMetrics, default_bind_address
from reconciler._client.protocol import ClusterClient
from reconciler._client.reviews import MetricsAuthorizer
from reconciler._driver.liveness import ProgressWatch

__all__ = ["health_server"]

_log = logging.getLogger("optk.operator")


def health_server(
    *, metrics: OperatorMetrics, ready: Callable[[], bool], degraded: Callable[[], str],
    liveness: ProgressWatch, client: ClusterClient, port: int | None, host: str | None,
    environ: Mapping[str, str] | None, auth: bool,
) -> Callable[[], HealthServer] | None:
    """What ``start`` calls to serve ``/metrics``, ``/healthz`` and ``/readyz`` (None without a
    port): on ``host``, by default every interface inside a pod and loopback elsewhere; with
    ``auth``, ``/metrics`` only to a scraper the API server allows (reviews sent unfenced
    through ``client``: a standby serves its metrics too)."""
    if port is None:
        return None

    def serve() -> HealthServer:
        server = HealthServer(
            metrics, ready=ready, degraded=degraded, liveness=liveness, port=port,
            host=host or default_bind_address(os.environ if environ is None else environ),
            authorize=MetricsAuthorizer(client) if auth else None).start()
        _log.info("metrics and health on %s%s", server.url, " (/metrics authorized by the API "
                  "server)" if auth else "")
        return server

    return serve
