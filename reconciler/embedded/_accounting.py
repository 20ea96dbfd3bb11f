"""Request accounting: how many requests the server answered, by verb, resource and status code.

Benchmarks and tests report API calls from these counts (``EmbeddedApiServer.request_counts()``
and ``request_breakdown()``, and the ``/debug/optk/requests`` endpoint). Counting happens once per
request in the HTTP layer, after the response code is known; faults injected by ``_faults`` are
counted too, with the code they answered.
"""

from __future__ import annotations

import threading
from collections import Counter

import attrs

__all__ = ["VERBS", "RequestAccounting", "RequestKey"]

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
"""The Kubernetes verbs ``request_counts()`` always reports (zero when unused)."""


@attrs.frozen(kw_only=True, order=True)
class RequestKey:
    """One cell of the breakdown: verb, resource (``deployments.apps``, ``pods/status``), code."""

    verb: str
    resource: str
    code: int


class RequestAccounting:
    """Thread-safe request counters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str, int]] = Counter()

    def record(self, *, verb: str, resource: str, code: int) -> None:
        """Count one answered request."""
        with self._lock:
            self._counts[(verb, resource, code)] += 1

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
