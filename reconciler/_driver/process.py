"""The one process shell of ``optk run`` (both forms) and ``Operator.run``.

``run_operator`` is ``Operator.run``'s body: it connects (a kubeconfig, the in-cluster config or a
fresh embedded API server) through ``reconciler._client.connect.connect``, whose ``/version``
probe turns an unreachable server into one ``KubeconfigError`` naming the URL; starts the runtime
(with its ``Serving``); freezes the long-lived heap (``reconciler._driver.heap``); waits for
SIGTERM/SIGINT (or lost leadership) and shuts down gracefully: in-flight reconciles finish within
the operator's ``shutdown_timeout``, then everything stops and the Lease is released. Nothing here
decides what to reconcile; this is the outermost shell of the driver. The command line (``optk
run``'s flags, logging, loading the operator) is ``reconciler._commands``' (``running``,
``loading``).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any

from reconciler._driver.operators import Operator
from reconciler._driver.settings import Serving

__all__ = ["load_api_client", "run_operator"]

_log = logging.getLogger("optk.operator")


def run_operator(
    operator: Operator,
    *,
    kubeconfig: str | None = None,
    embedded: bool = False,
    serving: Serving | None = None,
) -> int:
    """Run ``operator`` until SIGTERM/SIGINT (or lost leadership); the process exit code.
    ``serving``: where health and metrics are served (default: ``operator.serving``)."""
    serving = operator.serving if serving is None else serving
    stop = _StopFlag()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, stop.on_signal)
    if embedded:
        from reconciler.embedded import EmbeddedApiServer

        with EmbeddedApiServer() as server:
            _log.info("embedded API server at %s (kubeconfig %s)", server.url,
                      server.kubeconfig_path)
            return _run_with(operator, server.api_client(), stop, serving)
    from reconciler._client.connect import connect

    return _run_with(operator, connect(kubeconfig), stop, serving)


def load_api_client(kubeconfig: str | None = None) -> Any:
    """An official ``ApiClient`` from ``kubeconfig``; when None, the in-cluster service account
    (when running in a pod) or the default kubeconfig (``KUBECONFIG``, ``~/.kube/config``). Wrap
    it in a ``KubernetesClient``. Raises ``KubeconfigError`` (a ``ValueError``) naming the path."""
    from reconciler._client.connect import load_client

    return load_client(kubeconfig)


def _run_with(operator: Operator, api_client: Any, stop: _StopFlag, serving: Serving) -> int:
    from reconciler._client.kubernetes import KubernetesClient
    from reconciler._driver.deployed import local_webhooks
    from reconciler._driver.heap import HeapSettler

    operator = local_webhooks(operator, str(api_client.configuration.host))
    client = KubernetesClient(api_client, operator_name=operator.name)
    runtime = operator.start(client, serving=serving)
    _log.info("operator %s started (identity %s)", operator.name, runtime.identity)
    heap = HeapSettler()  # this process runs one operator: freeze its long-lived heap
    heap.started()
    try:
        while not stop.requested and not runtime.finished:
            time.sleep(0.2)  # a signal interrupts the sleep and runs its handler
            heap.poll(runtime)
    finally:
        clean = runtime.stop(timeout=operator.shutdown_timeout)
    lost = not stop.requested
    _log.info("operator %s stopped%s", operator.name, " (leadership lost)" if lost else "")
    return 1 if lost or not clean else 0


class _StopFlag:
    """Set by SIGTERM/SIGINT. A plain attribute: a handler must take no lock the interrupted
    main thread may hold (``Event.set`` could deadlock against ``Event.wait``)."""

    def __init__(self) -> None:
        self.requested = False

    def on_signal(self, signum: int, frame: Any) -> None:
        """The signal handler."""
        self.requested = True


