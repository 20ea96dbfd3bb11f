"""Kubernetes timestamps in the embedded server: the one place it formats and parses ``Time``.

The server writes ``metav1.Time`` (``creationTimestamp``, ``deletionTimestamp``, managed-fields
``time``, CRD condition times): RFC 3339 in UTC at second precision, ``2024-01-02T03:04:05Z``.
It parses what clients wrote leniently (any RFC 3339 date-time; a missing zone means UTC) and
answers ``None`` for anything else.

The boundary: pure conversions plus the wall-clock read of :func:`now_timestamp`. The reconciler
has its own ``reconciler._base.times`` (with an injected clock); the embedded server may not import
it (it is independent of the rest of ``reconciler`` by an import-linter contract), hence this
module.
"""

from __future__ import annotations

import datetime
from typing import Final

__all__ = ["format_time", "now_timestamp", "parse_time"]

_TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%SZ"


def format_time(epoch: float) -> str:
    """``epoch`` seconds as a Kubernetes ``Time`` (UTC, whole seconds)."""
    return datetime.datetime.fromtimestamp(int(epoch), datetime.UTC).strftime(_TIME_FORMAT)


def now_timestamp() -> str:
    """The current time as Kubernetes writes it (RFC 3339, seconds, ``Z``)."""
    return datetime.datetime.now(datetime.UTC).strftime(_TIME_FORMAT)


def parse_time(value: object) -> datetime.datetime | None:
    """The aware UTC moment of an RFC 3339 string, or ``None`` for anything else."""
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=datetime.UTC)
