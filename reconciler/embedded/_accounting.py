"""Request accounting: how many requests the server answered, by verb, resource and status code.

Benchmarks and tests report API calls from these counts (``EmbeddedApiServer.request_counts()``
and ``request_breakdown()``, and the ``/debug/optk/requests`` endpoint). Counting happens once per
request in the HTTP layer, after the response code is known; faults injected by ``_faults`` are
counted too, with the code they answered. An opt-in, bounded request log
(``EmbeddedApiServer.enable_request_log()``, ``request_log()``) keeps each answered request's time,
verb, resource, namespace, name, user agent and code, so a test can tell which client wrote what
when (e.g. that two operator replicas never wrote the same object at once).
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import attrs

__all__ = ["VERBS", "RequestAccounting", "RequestKey", "RequestRecord"]

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
"""The Kubernetes verbs ``request_counts()`` always reports (zero when unused)."""


@attrs.frozen(kw_only=True, order=True)
class RequestKey:
    """One cell of the breakdown: verb, resource (``deployments.apps``, ``pods/status``), code."""

    verb: str
    resource: str
    code: int


@attrs.frozen(kw_only=True)
class RequestRecord:
    """One answered request in the opt-in request log (``at``: wall-clock seconds)."""

    at: float
    verb: str
    resource: str
    code: int
    namespace: str | None = None
    name: str | None = None
    user_agent: str | None = None


class RequestAccounting:
    """Thread-safe request counters, and the opt-in request log."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str, int]] = Counter()
        self._log: list[RequestRecord] | None = None
        self._log_limit = 0

    def record(
        self, *, verb: str, resource: str, code: int, namespace: str | None = None,
        name: str | None = None, user_agent: str | None = None,
    ) -> None:
        """Count one answered request (and log it when the log is on and not full)."""
        with self._lock:
            self._counts[(verb, resource, code)] += 1
            if self._log is not None and len(self._log) < self._log_limit:
                self._log.append(RequestRecord(
                    at=time.time(), verb=verb, resource=resource, code=code,
                    namespace=namespace, name=name, user_agent=user_agent,
                ))

    def enable_log(self, limit: int = 1_000_000) -> None:
        """Start logging requests (from now on, empty, at most ``limit`` records)."""
        with self._lock:
            self._log, self._log_limit = [], limit

    def log(self) -> list[RequestRecord]:
        """The logged requests so far (empty when the log is off)."""
        with self._lock:
            return list(self._log or ())

    def by_verb(self) -> dict[str, int]:
        """Cumulative requests per Kubernetes verb; every verb of ``VERBS`` is present."""
        totals = dict.fromkeys(VERBS, 0)
        with self._lock:
            for (verb, _, _), count in self._counts.items():
                if verb in totals:
                    totals[verb] += count
        return totals

    def breakdown(self) -> dict[RequestKey, int]:
        """Every (verb, resource, code) cell with its count."""
        with self._lock:
            return {
                RequestKey(verb=verb, resource=resource, code=code): count
                for (verb, resource, code), count in sorted(self._counts.items())
            }

    def reset(self) -> None:
        """Start counting from zero."""
        with self._lock:
            self._counts.clear()

    def as_json(self) -> dict[str, object]:
        """The counts as JSON-ready data (the debug endpoint's body)."""
        return {
            "byVerb": self.by_verb(),
            "breakdown": [
                {"verb": k.verb, "resource": k.resource, "code": k.code, "count": n}
                for k, n in self.breakdown().items()
            ],
        }
