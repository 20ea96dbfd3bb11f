"""Running an operator as a process: signals, kubeconfig, logging and ``optk run``.

``run_operator`` is ``Operator.run``'s body: it connects (a kubeconfig, the in-cluster config
or a fresh embedded API server), starts the runtime, waits for SIGTERM/SIGINT (or lost
leadership) and shuts down gracefully: in-flight reconciles finish within the operator's
``shutdown_timeout``, then everything stops and the Lease is released. ``run_command`` is
``optk run MODULE[:ATTR]``: it sets up logging (text, or one JSON object per line with
``JsonLogFormatter``), loads the operator with ``load_operator`` and runs it. Nothing here
decides what to reconcile; this is the outermost shell of the driver.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from reconciler._errors import ReconcilerUsageError
from reconciler._operators import Operator

__all__ = ["JsonLogFormatter", "load_api_client", "load_operator", "run_command", "run_operator"]

_log = logging.getLogger("optk.operator")


def run_operator(
    operator: Operator,
    *,
    kubeconfig: str | None = None,
    embedded: bool = False,
    metrics_port: int | None = None,
) -> int:
    """Run ``operator`` until SIGTERM/SIGINT (or lost leadership); the process exit code."""
    stop = _StopFlag()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, stop.on_signal)
    if embedded:
        from reconciler.embedded import EmbeddedApiServer

        with EmbeddedApiServer() as server:
            _log.info("embedded API server at %s (kubeconfig %s)", server.url,
                      server.kubeconfig_path)
            return _run_with(operator, server.api_client(), stop, metrics_port)
    return _run_with(operator, load_api_client(kubeconfig), stop, metrics_port)


def load_api_client(kubeconfig: str | None = None) -> Any:
    """An official ``ApiClient`` from ``kubeconfig``; when None, the default kubeconfig
    (``KUBECONFIG``, ``~/.kube/config``), else the in-cluster service account. Wrap it in a
    ``KubernetesClient``."""
    from kubernetes import config as kube_config

    try:
        return kube_config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig
        )
    except kube_config.ConfigException:
        if kubeconfig is not None:
            raise
        kube_config.load_incluster_config()  # type: ignore[no-untyped-call]
        from kubernetes import client as kube_client

        return kube_client.ApiClient()


def _run_with(operator: Operator, api_client: Any, stop: _StopFlag,
              metrics_port: int | None) -> int:
    from reconciler._kubernetes import KubernetesClient

    runtime = operator.start(KubernetesClient(api_client), metrics_port=metrics_port)
    _log.info("operator %s started (identity %s)", operator.name, runtime.identity)
    try:
        while not stop.requested and not runtime.finished:
            time.sleep(0.2)  # a signal interrupts the sleep and runs its handler
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


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the ``parent`` key if any."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line."""
        line: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        parent = getattr(record, "parent", None)
        if parent is not None:
            line["parent"] = parent
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line)


def load_operator(target: str) -> Operator:
    """The ``Operator`` named by ``MODULE[:ATTR]`` (``ATTR`` defaults to ``operator``).

    Raises ``ValueError`` naming the target when it cannot be imported or is no ``Operator``.
    """
    module_name, _, attr = target.partition(":")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)  # as `python -m` and `kopf run -m` find the user's modules
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ReconcilerUsageError(
            f"cannot import operator module {module_name!r}: {error}"
        ) from error
    value = getattr(module, attr or "operator", None)
    if not isinstance(value, Operator):
        raise ReconcilerUsageError(
            f"{module_name}:{attr or 'operator'} is not an Operator (got {type(value).__name__})"
        )
    return value


def run_command(
    target: str,
    *,
    kubeconfig: str | None = None,
    embedded: bool = False,
    metrics_port: int | None = None,
    log_format: str = "text",
    log_level: str = "INFO",
) -> int:
    """``optk run MODULE[:ATTR]``: load the operator, set up logging, run until SIGTERM."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLogFormatter() if log_format == "json" else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s"
    ))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(log_level.upper())
    operator = load_operator(target)
    _log.info("running operator %s for %s.%s", operator.name, operator.kind, operator.api_version)
    return operator.run(kubeconfig=kubeconfig, embedded=embedded, metrics_port=metrics_port)
