"""Fault injection for reliability tests: latency, 5xx, 403, 429 with Retry-After, lost answers,
cut watches, 410.

A ``Faults`` value describes what to inject; ``EmbeddedApiServer.set_faults()`` swaps it at run
time (from any thread) and ``EmbeddedApiServer.faults(...)`` does so for a ``with`` block. The HTTP
layer asks ``FaultInjector`` once per request what to do; decisions use a seeded random generator
so a test run is reproducible. Faults only apply to resource requests (never to discovery,
``/openapi`` or the debug endpoints) and can be limited to some verbs or resources.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import attrs

__all__ = ["FaultDecision", "FaultInjector", "Faults"]


def _rate(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"Faults.{attribute.name} must be within [0, 1], got {value!r}")


def _non_negative(_instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if value < 0:
        raise ValueError(f"Faults.{attribute.name} must not be negative, got {value!r}")


@attrs.frozen(kw_only=True)
class Faults:
    """What to inject. The default value injects nothing.

    - ``latency``: seconds added before answering each request.
    - ``error_rate``: share of requests answered with ``error_code`` (500 or 503; or 403, as a
      role without the rule answers: with ``error_rate=1`` and ``verbs``/``resources``, a
      permission revoked).
    - ``throttle_rate``: share of requests answered 429 with ``Retry-After: retry_after``.
    - ``lose_rate``: share of writes (create, update, patch, delete) carried out and then not
      answered: the connection is closed with no response, as a network cut or a restarting
      load balancer loses an answer (the client cannot tell whether the write happened).
    - ``watch_max_events`` / ``watch_max_seconds``: watch streams end after that many events or
      seconds (as a load balancer or a restarting apiserver would cut them).
    - ``watch_gone``: every new watch gets one ERROR event with a 410 Expired Status.
    - ``verbs`` / ``resources``: restrict the faults to these verbs (``get``, ``patch``, ...) or
      resources (``configmaps``, ``deployments.apps``); empty means all.
    - ``seed``: seed of the random decisions.
    """

    latency: float = attrs.field(default=0.0, validator=_non_negative)
    error_rate: float = attrs.field(default=0.0, validator=_rate)
    error_code: int = attrs.field(default=500, validator=attrs.validators.in_((403, 500, 503)))
    throttle_rate: float = attrs.field(default=0.0, validator=_rate)
    retry_after: int = attrs.field(default=1, validator=_non_negative)
    lose_rate: float = attrs.field(default=0.0, validator=_rate)
    watch_max_events: int | None = None
    watch_max_seconds: float | None = None
    watch_gone: bool = False
    verbs: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset)
    resources: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset)
    seed: int = 0


@attrs.frozen(kw_only=True)
class FaultDecision:
    """What the HTTP layer must do for one request."""

    delay: float = 0.0
    error_code: int | None = None
    retry_after: int | None = None
    lose: bool = False
    """Carry the request out, then close the connection without answering."""


_WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})
_NO_FAULTS = Faults()
_NO_DECISION = FaultDecision()


class FaultInjector:
    """Holds the current ``Faults`` and draws decisions from it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults = _NO_FAULTS
        self._random = random.Random(0)

    @property
    def current(self) -> Faults:
        """The faults in force."""
        return self._faults

    def set(self, faults: Faults) -> Faults:
        """Install ``faults``; returns the previous value."""
        with self._lock:
            previous = self._faults
            self._faults = _NO_FAULTS if faults == _NO_FAULTS else faults
            self._random = random.Random(faults.seed)
            return previous

    def applies(self, verb: str, resource: str) -> bool:
        """Whether the current faults cover this verb and resource."""
        faults = self._faults
        return (not faults.verbs or verb in faults.verbs) and (
            not faults.resources or resource in faults.resources
        )

    def decide(self, verb: str, resource: str) -> FaultDecision:
        """Draw the fault (if any) for one request."""
        faults = self._faults
        if faults is _NO_FAULTS or not self.applies(verb, resource):
            return _NO_DECISION
        with self._lock:
            draw = self._random.random()
        if draw < faults.error_rate:
            return FaultDecision(delay=faults.latency, error_code=faults.error_code)
        if draw < faults.error_rate + faults.throttle_rate:
            return FaultDecision(
                delay=faults.latency, error_code=429, retry_after=faults.retry_after
            )
        if verb in _WRITES and draw < faults.error_rate + faults.throttle_rate + faults.lose_rate:
            return FaultDecision(delay=faults.latency, lose=True)
        return FaultDecision(delay=faults.latency)
