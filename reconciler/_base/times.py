"""Kubernetes timestamps: the one place the reconciler formats and parses Time and MicroTime.

Kubernetes writes two timestamp types, both RFC 3339 in UTC:

- ``metav1.Time`` (``creationTimestamp``, condition ``lastTransitionTime``, Event
  ``firstTimestamp``/``lastTimestamp``, our ``status.lastReconcileTime``): second precision,
  ``2024-01-02T03:04:05Z``;
- ``metav1.MicroTime`` (Lease ``acquireTime``/``renewTime``, ``events.k8s.io`` ``eventTime``):
  microsecond precision, ``2024-01-02T03:04:05.123456Z``.

The driver keeps time as epoch seconds from its injected :class:`~reconciler._base.clocks.Clock`;
this module converts between those floats and the strings on the wire. Formatting truncates to the
type's precision (as the Go ``Time.Format`` does); parsing accepts either type, an offset instead of
``Z`` and up to nine fractional digits (what ``RFC3339Nano`` writes), and answers ``None`` for
anything else, because a timestamp in an object someone else wrote is data, not a contract.

The boundary: pure conversions; the only clock read is the one passed in (``RealClock`` when
omitted). The embedded server has its own ``reconciler.embedded._times`` (it is independent of
the reconciler by an import-linter contract).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

from reconciler._base.clocks import Clock, RealClock

__all__ = [
    "format_micro_time",
    "format_time",
    "now_micro_time",
    "now_time",
    "parse_time",
]

_TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%SZ"
_MICRO_TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%S.%fZ"
_RFC3339: Final = re.compile(
    r"(?P<seconds>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})"
    r"(?:\.(?P<fraction>\d{1,9}))?"
    r"(?P<zone>Z|[+-]\d{2}:\d{2})",
    re.IGNORECASE,
)


def format_time(epoch: float) -> str:
    """``epoch`` seconds as a Kubernetes ``Time`` (UTC, whole seconds: the fraction is dropped)."""
    return datetime.fromtimestamp(int(epoch), tz=UTC).strftime(_TIME_FORMAT)


def format_micro_time(epoch: float) -> str:
    """``epoch`` seconds as a Kubernetes ``MicroTime`` (UTC, six fractional digits)."""
    return datetime.fromtimestamp(epoch, tz=UTC).strftime(_MICRO_TIME_FORMAT)


def parse_time(value: object) -> float | None:
    """Epoch seconds of a Kubernetes ``Time`` or ``MicroTime`` string, or ``None``.

    ``None`` for a non-string, an empty string or anything that is not an RFC 3339 date-time
    with a zone (``Z`` or ``+hh:mm``); digits past microseconds are dropped.
    """
    if not isinstance(value, str):
        return None
    match = _RFC3339.fullmatch(value.strip())
    if match is None:
        return None
    try:
        moment = datetime.strptime(match["seconds"], "%Y-%m-%dT%H:%M:%S")
    except ValueError:  # month 13, second 61, ...
        return None
    zone = match["zone"].upper()
    offset = timedelta(0) if zone == "Z" else timedelta(
        hours=int(zone[1:3]), minutes=int(zone[4:6])
    ) * (1 if zone[0] == "+" else -1)
    micros = int((match["fraction"] or "0")[:6].ljust(6, "0"))
    moment = (moment - offset).replace(tzinfo=UTC, microsecond=micros)
    return moment.timestamp()


def now_time(clock: Clock | None = None) -> str:
    """The current time of ``clock`` (the real clock when omitted) as a Kubernetes ``Time``."""
    return format_time((clock or RealClock()).time())


def now_micro_time(clock: Clock | None = None) -> str:
    """The current time of ``clock`` (the real clock when omitted) as a ``MicroTime``."""
    return format_micro_time((clock or RealClock()).time())
