"""What a test observes and injects on the embedded server: request counts, a request log, faults.

``ServerInstruments`` is the part of ``EmbeddedApiServer`` that is not about serving: the
cumulative request counts the HTTP face records (by verb, and by verb, resource and code), an opt-in
bounded log of each request (with its user agent, for "who wrote what, when" checks) and the
faults it injects (latency, errors, dropped watches), set from now on or for a ``with``
block. The server passes both objects to its HTTP application; this class only exposes them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from reconciler.embedded._accounting import RequestAccounting, RequestKey, RequestRecord
from reconciler.embedded._faults import FaultInjector, Faults

__all__ = ["ServerInstruments"]


class ServerInstruments:
    """Request counts and injected faults of one server (a base of ``EmbeddedApiServer``)."""

    def __init__(self) -> None:
        self._accounting = RequestAccounting()
        self._faults = FaultInjector()

    def request_counts(self) -> dict[str, int]:
        """Cumulative requests by verb: get list watch create update patch delete
        deletecollection."""
        return self._accounting.by_verb()

    def request_breakdown(self) -> dict[RequestKey, int]:
        """Cumulative requests by verb, resource and response code."""
        return self._accounting.breakdown()

    def enable_request_log(self, limit: int = 1_000_000) -> None:
        """Log every answered request from now on (bounded by ``limit`` records): time, verb,
        resource, namespace, name, user agent, code; read it with ``request_log()``."""
        self._accounting.enable_log(limit)

    def request_log(self) -> list[RequestRecord]:
        """The request log (empty unless ``enable_request_log`` was called)."""
        return self._accounting.log()

    def reset_request_counts(self) -> None:
        """Start counting requests from zero."""
        self._accounting.reset()

    @property
    def current_faults(self) -> Faults:
        """The faults in force (``Faults()`` when none)."""
        return self._faults.current

    def set_faults(self, faults: Faults | None) -> Faults:
        """Inject ``faults`` from now on (None clears them); returns the previous value."""
        return self._faults.set(faults or Faults())

    @contextlib.contextmanager
    def faults(self, faults: Faults) -> Iterator[Faults]:
        """Inject ``faults`` for the duration of a ``with`` block."""
        previous = self.set_faults(faults)
        try:
            yield faults
        finally:
            self.set_faults(previous)
