"""Request counts from the API server's audit log (JSON lines), read incrementally.

The pure part, ``count_events``, turns audit lines into per-user, per-verb counts: each request
counts once (by ``auditID``; a watch logs ``ResponseStarted`` then ``ResponseComplete``), for
the verbs ``EmbeddedApiServer.request_counts()`` reports. ``AuditLog`` keeps the file offset and
the running totals; the control plane decides when the log is complete (its marker request).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

__all__ = ["VERBS", "AuditLog", "count_events"]

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
"""The verbs ``request_counts()`` always reports (zero when unused)."""


def count_events(
    lines: Iterable[str], *, seen: set[str]
) -> tuple[Counter[tuple[str, str]], list[str]]:
    """Counts by (user, verb) of the requests in ``lines`` not yet in ``seen`` (updated), and
    the ``requestURI`` of every event (for marker lookups). Lines that are not JSON are skipped."""
    counts: Counter[tuple[str, str]] = Counter()
    uris: list[str] = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        uris.append(str(event.get("requestURI", "")))
        audit_id = str(event.get("auditID", ""))
        if not audit_id or audit_id in seen:
            continue
        seen.add(audit_id)
        user = str((event.get("user") or {}).get("username", ""))
        counts[(user, str(event.get("verb", "")))] += 1
    return counts, uris


class AuditLog:
    """The running totals of one audit log file, read from where the last read stopped."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._offset = 0
        self._partial = ""
        self._seen: set[str] = set()
        self._counts: Counter[tuple[str, str]] = Counter()

    def read_new(self) -> list[str]:
        """Read the complete lines written since the last call; returns their request URIs."""
        with self._lock:
            try:
                with self._path.open("r", encoding="utf-8", errors="replace") as handle:
                    handle.seek(self._offset)
                    data = handle.read()
                    self._offset = handle.tell()
            except FileNotFoundError:
                return []
            text = self._partial + data
            lines = text.split("\n")
            self._partial = lines.pop()
            counts, uris = count_events(lines, seen=self._seen)
            self._counts.update(counts)
            return uris

    def by_verb(self, *, users: frozenset[str] | None, excluded: frozenset[str]) -> dict[str, int]:
        """Totals per verb for ``users`` (all users when None) minus the ``excluded`` ones."""
        totals = dict.fromkeys(VERBS, 0)
        with self._lock:
            for (user, verb), count in self._counts.items():
                if verb not in totals or user in excluded:
                    continue
                if users is None or user in users:
                    totals[verb] += count
        return totals

    def reset(self) -> None:
        """Forget the totals read so far (later lines count from zero)."""
        with self._lock:
            self._counts.clear()
