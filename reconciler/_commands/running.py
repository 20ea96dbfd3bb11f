"""``optk run MODULE[:ATTR]`` (or ``FILE.py[:ATTR]``), plain or as deployed.

``run_command`` sets up logging (text, or one JSON object per line with ``JsonLogFormatter``; the
level of ``--log-level``/``-v``/``-q``; the official client's loggers kept at INFO or above), loads
the operator (``reconciler._commands.loading``), lets
``reconciler._driver.deployed.deployed_operator`` adapt it to ``--leader-elect``/
``--lease-namespace``/``--watch-namespace``/``--paused`` (the value only: nothing else differs
between the two forms), turns the ``--metrics-*`` flags into its ``Serving`` and runs it with
``Operator.run`` (``reconciler._driver.process``, the process shell). Boundary: the command's
flags and logging; running is the driver's.
"""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Sequence
from typing import Any

import attrs

from reconciler._commands.loading import load_operator

__all__ = ["JsonLogFormatter", "run_command"]

_log = logging.getLogger("optk.operator")


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the ``parent`` key if any.

    ``ts`` is RFC 3339 in UTC with milliseconds (``2026-11-26T15:04:05.123Z``): ordered across
    replicas and nodes in whatever time zone they run, as log pipelines parse it."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line."""
        line: dict[str, Any] = {
            "ts": _rfc3339(record.created),
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


def _rfc3339(created: float) -> str:
    """``created`` (seconds since the epoch) as ``YYYY-MM-DDTHH:MM:SS.mmmZ``."""
    moment = datetime.datetime.fromtimestamp(created, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def run_command(
    target: str,
    *,
    kubeconfig: str | None = None,
    embedded: bool = False,
    metrics_port: int | None = None,
    metrics_bind_address: str | None = None,
    metrics_auth: bool = False,
    log_format: str = "text",
    log_level: str = "INFO",
    leader_elect: bool = False,
    lease_namespace: str | None = None,
    watch_namespace: str | None = None,
    paused: bool = False,
    pause_namespaces: Sequence[str] = (),
) -> int:
    """``optk run MODULE[:ATTR]``, both forms: set up logging, load the operator, adapt it to
    the deployed flags (``deployed_operator``), run it until SIGTERM; the process exit code.

    Raises ``ValueError`` (a ``KubeconfigError`` for a cluster that cannot be reached) with one
    line for the command line to print."""
    from reconciler._driver.deployed import deployed_operator

    _configure_logging(log_format=log_format, log_level=log_level)
    operator = deployed_operator(load_operator(target), leader_elect=leader_elect,
                                 lease_namespace=lease_namespace,
                                 watch_namespace=watch_namespace, paused=paused,
                                 pause_namespaces=pause_namespaces)
    _log.info("running operator %s for %s.%s", operator.name, operator.kind, operator.api_version)
    if (pauses := operator.pauses()).everything or pauses.namespaces:
        _log.warning("paused for maintenance: %s; nothing is written there until restarted "
                     "without it", "every parent" if pauses.everything
                     else "namespaces " + ", ".join(sorted(pauses.namespaces)))
    serving = operator.serving  # a flag not given leaves the operator's setting
    if metrics_port is not None:
        serving = attrs.evolve(serving, metrics_port=metrics_port)
    if metrics_bind_address is not None:
        serving = attrs.evolve(serving, bind_address=metrics_bind_address)
    if metrics_auth:
        serving = attrs.evolve(serving, auth=True)
    return operator.run(kubeconfig=kubeconfig, embedded=embedded, serving=serving)


def _configure_logging(*, log_format: str, log_level: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLogFormatter() if log_format == "json" else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s"
    ))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(log_level.upper())
    for noisy in ("kubernetes", "urllib3"):  # their DEBUG shows request bodies (Secret data)
        logging.getLogger(noisy).setLevel(max(logging.INFO, root.level))
