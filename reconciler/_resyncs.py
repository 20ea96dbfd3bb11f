"""The periodic resync: when each parent is next reconciled even if nothing happened.

DESIGN.md section 6 and issue 6: every parent is reconciled at least every interval (default
10 h). The interval is set per operator in code, overridden by the environment
(``OPTK_RESYNC_INTERVAL``), overridden again by a ConfigMap the operator watches (key
``resyncInterval``, effective without a restart), and per parent by the annotation
``optk.dev/resync-interval`` clamped into the policy's bounds. A stable per-object offset (a hash
of the parent's uid, up to ``spread`` of the interval) makes each parent due a little *earlier*
than its interval, never later, so parents reconciled together drift apart. Any reconcile resets
the parent's timer. Due times are computed from the wall-clock time of the last reconcile, which
the parent's status records, so after a restart parents that are due are queued at once and the
others keep their schedule. A parent whose reconcile failed is, by default, left to the work
queue's backoff and taken off the timer until it succeeds; with ``retry_failed_by_backoff=False``
it is not retried by backoff and waits for its next event or periodic resync instead.

This module holds the policy and the schedule; the thread that feeds due keys to the work queue
lives in ``reconciler._operators``.
"""

from __future__ import annotations

import hashlib
import heapq
import re
import threading
from collections.abc import Hashable, Mapping
from typing import Any

import attrs

from reconciler._events import parse_rfc3339

__all__ = [
    "DEFAULT_RESYNC_INTERVAL",
    "RESYNC_ANNOTATION",
    "RESYNC_CONFIGMAP_KEY",
    "RESYNC_ENV",
    "ResyncPolicy",
    "ResyncSchedule",
    "last_reconcile_time",
    "parse_duration",
]

DEFAULT_RESYNC_INTERVAL = 10 * 3600.0
RESYNC_ANNOTATION = "optk.dev/resync-interval"
RESYNC_ENV = "OPTK_RESYNC_INTERVAL"
RESYNC_CONFIGMAP_KEY = "resyncInterval"

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_duration(text: str) -> float:
    """Seconds in ``"10h"``, ``"1h30m"``, ``"45s"``, ``"250ms"`` or a plain number of seconds.

    Raises ``ValueError`` naming the text when it is not a positive duration.
    """
    value = text.strip()
    try:
        seconds = float(value)
    except ValueError:
        pos = 0
        seconds = 0.0
        for match in _DURATION.finditer(value):
            if match.start() != pos:
                break
            seconds += float(match.group(1)) * _UNITS[match.group(2)]
            pos = match.end()
        if pos != len(value) or not value:
            raise ValueError(f"not a duration: {text!r} (use e.g. '10h', '1h30m', '90s')") from None
    if not seconds > 0 or seconds != seconds or seconds == float("inf"):
        raise ValueError(f"a resync interval must be positive and finite, got {text!r}")
    return seconds


def last_reconcile_time(
    parent: Mapping[str, Any], *, field: str = "lastReconcileTime"
) -> float | None:
    """The time of the parent's last reconcile as its status records it, or ``None``.

    An absent or unreadable value means "never reconciled": the parent is due at once.
    """
    status = parent.get("status")
    return parse_rfc3339(status.get(field)) if isinstance(status, Mapping) else None


@attrs.frozen(kw_only=True)
class ResyncPolicy:
    """How often parents are resynced, and from where the interval may be overridden."""

    interval: float = DEFAULT_RESYNC_INTERVAL
    min_interval: float = 60.0
    max_interval: float = 7 * 86400.0
    spread: float = 0.1
    annotation: str = RESYNC_ANNOTATION
    status_field: str = "lastReconcileTime"
    retry_failed_by_backoff: bool = True

    def __attrs_post_init__(self) -> None:
        if not 0 < self.min_interval <= self.max_interval:
            raise ValueError(
                f"resync bounds need 0 < min_interval <= max_interval, got "
                f"{self.min_interval}..{self.max_interval}"
            )
        if not self.min_interval <= self.interval <= self.max_interval:
            raise ValueError(
                f"resync interval {self.interval}s is outside its bounds "
                f"{self.min_interval}..{self.max_interval}s"
            )
        if not 0 <= self.spread < 1:
            raise ValueError(f"spread is a fraction in [0, 1), got {self.spread}")

    def with_interval_text(self, text: str | None, *, source: str) -> ResyncPolicy:
        """This policy with the interval from ``text`` (clamped); unchanged when ``text`` is None.

        ``source`` names where the text came from, for the error when it is not a duration.
        """
        if text is None or not text.strip():
            return self
        try:
            seconds = parse_duration(text)
        except ValueError as error:
            raise ValueError(f"{source}: {error}") from error
        return attrs.evolve(self, interval=self._clamp(seconds))

    def with_environment(self, environ: Mapping[str, str]) -> ResyncPolicy:
        """Apply ``OPTK_RESYNC_INTERVAL`` when set."""
        return self.with_interval_text(environ.get(RESYNC_ENV), source=f"${RESYNC_ENV}")

    def with_configmap(self, configmap: Mapping[str, Any] | None) -> ResyncPolicy:
        """Apply the ConfigMap's ``resyncInterval`` key when present."""
        data = (configmap or {}).get("data") or {}
        meta = (configmap or {}).get("metadata") or {}
        where = f"ConfigMap {meta.get('namespace')}/{meta.get('name')} key {RESYNC_CONFIGMAP_KEY}"
        return self.with_interval_text(data.get(RESYNC_CONFIGMAP_KEY), source=where)

    def interval_for(self, parent: Mapping[str, Any]) -> float:
        """The parent's interval: its annotation clamped into bounds, else the policy's."""
        annotations = (parent.get("metadata") or {}).get("annotations") or {}
        text = annotations.get(self.annotation)
        if isinstance(text, str):
            try:
                return self._clamp(parse_duration(text))
            except ValueError:
                return self.interval  # a bad annotation must not stop the parent's resync
        return self.interval

    def offset_for(self, uid: str, interval: float) -> float:
        """A stable offset in ``[0, spread * interval)`` from the parent's uid."""
        digest = hashlib.sha256(uid.encode()).digest()
        fraction = int.from_bytes(digest[:8], "big") / 2.0**64
        return fraction * self.spread * interval

    def due_time(self, parent: Mapping[str, Any], last_reconciled: float) -> float:
        """When the parent is next due, given the wall time of its last reconcile."""
        interval = self.interval_for(parent)
        uid = str((parent.get("metadata") or {}).get("uid", ""))
        return last_reconciled + interval - self.offset_for(uid, interval)

    def _clamp(self, seconds: float) -> float:
        return min(self.max_interval, max(self.min_interval, seconds))


@attrs.frozen(kw_only=True)
class _Entry:
    parent: Mapping[str, Any]
    last: float
    due: float


class ResyncSchedule:
    """Due times per parent key, in wall-clock seconds; thread-safe.

    ``reconciled`` resets a parent's timer, ``observe`` schedules a parent first seen (from its
    status), ``suspend`` takes a failing parent off the timer, ``pop_due`` hands out what is due.
    """

    def __init__(self, policy: ResyncPolicy) -> None:
        self._policy = policy
        self._lock = threading.Lock()
        self._entries: dict[Hashable, _Entry] = {}
        self._heap: list[tuple[float, int, Hashable]] = []
        self._seq = 0

    @property
    def policy(self) -> ResyncPolicy:
        """The policy in force."""
        with self._lock:
            return self._policy

    def set_policy(self, policy: ResyncPolicy) -> None:
        """Switch policy (a ConfigMap changed); every parent's due time is recomputed."""
        with self._lock:
            self._policy = policy
            for key, entry in list(self._entries.items()):
                self._put_locked(key, entry.parent, entry.last)

    def observe(self, key: Hashable, parent: Mapping[str, Any], *, now: float) -> float:
        """Schedule a parent seen for the first time; returns its due time (``<= now``: due).

        The last reconcile time comes from the parent's status; a parent without one is due now.
        """
        with self._lock:
            last = last_reconcile_time(parent, field=self._policy.status_field)
            if last is None:
                return now
            return self._put_locked(key, parent, last)

    def reconciled(self, key: Hashable, parent: Mapping[str, Any], *, at: float) -> float:
        """The parent was just reconciled at wall time ``at``: restart its timer."""
        with self._lock:
            return self._put_locked(key, parent, at)

    def suspend(self, key: Hashable) -> None:
        """Take a parent off the timer (its retries are the work queue's backoff)."""
        self.remove(key)

    def remove(self, key: Hashable) -> None:
        """Forget a parent (deleted, or no longer ours)."""
        with self._lock:
            self._entries.pop(key, None)

    def due_at(self, key: Hashable) -> float | None:
        """The parent's due time, or ``None`` when it is not on the timer."""
        with self._lock:
            entry = self._entries.get(key)
            return None if entry is None else entry.due

    def next_due(self) -> float | None:
        """The earliest due time of any parent."""
        with self._lock:
            self._drop_stale_locked()
            return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> list[Hashable]:
        """Keys due at ``now``, removed from the timer until their next ``reconciled``."""
        due: list[Hashable] = []
        with self._lock:
            while True:
                self._drop_stale_locked()
                if not self._heap or self._heap[0][0] > now:
                    return due
                _, _, key = heapq.heappop(self._heap)
                del self._entries[key]
                due.append(key)

    def __len__(self) -> int:
        """Parents on the timer."""
        with self._lock:
            return len(self._entries)

    def _put_locked(self, key: Hashable, parent: Mapping[str, Any], last: float) -> float:
        due = self._policy.due_time(parent, last)
        self._entries[key] = _Entry(parent=parent, last=last, due=due)
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, key))
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._entries):
            self._heap = [(e.due, i, k) for i, (k, e) in enumerate(self._entries.items())]
            heapq.heapify(self._heap)
        return due

    def _drop_stale_locked(self) -> None:
        while self._heap:
            due, _, key = self._heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry.due == due:
                return
            heapq.heappop(self._heap)
