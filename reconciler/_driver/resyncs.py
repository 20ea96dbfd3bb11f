"""The periodic resync: when each parent is next reconciled even if nothing happened.

DESIGN.md section 6 and issue 6: every parent is reconciled at least every interval (default
10 h). The interval is set per operator in code, overridden by the environment
(``OPTK_RESYNC_INTERVAL``), overridden again by a ConfigMap the operator watches (key
``resyncInterval``, effective without a restart), and per parent by the annotation
``optk.dev/resync-interval`` clamped into the policy's bounds.

Due times lie on a per-parent grid: ticks ``ticks`` times per interval (spacing ``s = interval /
ticks``), shifted by a stable offset in ``[0, s)`` hashed from the parent's uid so that parents
spread evenly. After a reconcile at ``t`` the parent is next due at the latest tick at or
before ``t + interval``: never later than the interval, and at least ``interval - s`` later, so
any reconcile resets the timer (to within one tick). Because due times are grid points, a
restart needs no per-parent record: the running driver writes one small ``Heartbeat`` (a Lease)
every few seconds saying up to which time ``covered`` every due parent was reconciled. After a
restart a parent is safe until its first tick at or after ``covered``; if that tick has passed
(the downtime spanned it) the parent is due at once, otherwise it waits for that tick. So a
steady-state resync writes nothing per parent (the heartbeat is one write per period for the
whole operator), a restart after a short downtime reconciles only the few parents whose ticks
fell into it, and none waits longer than its interval plus the heartbeat period. The
``status.lastReconcileTime`` a reconcile records when it writes the status anyway tightens
this: it is a second lower bound of the last reconcile, so a parent recently reconciled keeps
its exact schedule. A parent whose reconcile failed is, by default, left to the work queue's
backoff and taken off the timer until it succeeds; with ``retry_failed_by_backoff=False`` it is
not retried by backoff and waits for its next event or periodic resync instead.

This module holds the policy and the schedule; the threads that feed due keys to the work queue
and beat, and the heartbeat's storage (``HeartbeatStore``), live in
``reconciler._driver.resync_loop``.
"""

from __future__ import annotations

import hashlib
import heapq
import math
import re
import threading
from collections.abc import Hashable, Mapping
from typing import Any

import attrs

from reconciler._base.errors import ReconcilerUsageError
from reconciler._base.times import parse_time

__all__ = [
    "DEFAULT_RESYNC_INTERVAL",
    "RESYNC_ANNOTATION",
    "RESYNC_CONFIGMAP_KEY",
    "RESYNC_ENV",
    "Heartbeat",
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
            raise ReconcilerUsageError(
                f"not a duration: {text!r} (use e.g. '10h', '1h30m', '90s')"
            ) from None
    if not seconds > 0 or seconds != seconds or seconds == float("inf"):
        raise ReconcilerUsageError(f"a resync interval must be positive and finite, got {text!r}")
    return seconds


def last_reconcile_time(
    parent: Mapping[str, Any], *, field: str = "lastReconcileTime"
) -> float | None:
    """The time of the parent's last reconcile as its status records it, or ``None``.

    An absent or unreadable value means "never reconciled": the parent is due at once.
    """
    status = parent.get("status")
    return parse_time(status.get(field)) if isinstance(status, Mapping) else None


@attrs.frozen(kw_only=True)
class Heartbeat:
    """How far a running driver's periodic resync got, as it last recorded it.

    Every parent due before ``covered`` (wall-clock seconds) had been reconciled; ``interval``
    and ``ticks`` are the policy's grid at the time, so a restart under another policy can
    translate the promise.
    """

    covered: float
    interval: float
    ticks: int


def _seconds(value: float | str) -> float:
    """A duration given as seconds or as text such as ``"10h"`` (``parse_duration``)."""
    return parse_duration(value) if isinstance(value, str) else float(value)


@attrs.frozen(kw_only=True)
class ResyncPolicy:
    """How often parents are resynced, and from where the interval may be overridden.

    The one place an operator sets its periodic resync (``Operator(resync=ResyncPolicy(...))``).
    ``interval`` is seconds or a duration such as ``"10h"``; ``OPTK_RESYNC_INTERVAL`` overrides
    it, and the ConfigMap ``config_map`` (``"namespace/name"``, key ``resyncInterval``, watched:
    a change applies without a restart) overrides both. ``min_interval``/``max_interval`` bound
    every interval: one outside them is refused from code, the environment and the ConfigMap
    alike (a refused ConfigMap value is logged and ignored); per-parent annotations, set by
    users on their own objects, are clamped into them.

    ``ticks`` grid points per interval: 1 keeps every parent on a fixed grid (a reconcile does
    not move its next resync; a restart keeps every schedule exactly); the default 2 lets any
    reconcile push the next resync to between half and one interval later, at the price that a
    restart may resync a parent half an interval early once.

    ``heartbeat`` is the period (seconds) of the one write that makes the resync restart-proof
    (and tells ``optk uninstall`` that the operator runs): the leader records in the Lease
    ``<operator>-resync`` in ``heartbeat_namespace`` (default: the leader election's namespace,
    else ``"default"``) up to when every due parent was reconciled. ``None`` turns it off: a
    restart then trusts only the parents' ``status.lastReconcileTime``.
    """

    interval: float = attrs.field(default=DEFAULT_RESYNC_INTERVAL, converter=_seconds)
    min_interval: float = 60.0
    max_interval: float = 7 * 86400.0
    ticks: int = 2
    annotation: str = RESYNC_ANNOTATION
    status_field: str = "lastReconcileTime"
    retry_failed_by_backoff: bool = True
    heartbeat: float | None = 60.0
    heartbeat_namespace: str | None = None
    config_map: str | None = None

    def __attrs_post_init__(self) -> None:
        if not 0 < self.min_interval <= self.max_interval:
            raise ReconcilerUsageError(
                f"resync bounds need 0 < min_interval <= max_interval, got "
                f"{self.min_interval}..{self.max_interval}"
            )
        if not self.min_interval <= self.interval <= self.max_interval:
            raise ReconcilerUsageError(
                f"resync interval {self.interval}s is outside its bounds "
                f"{self.min_interval}..{self.max_interval}s"
            )
        if not 1 <= self.ticks <= 60:
            raise ReconcilerUsageError(
                f"resync ticks per interval must be in 1..60, got {self.ticks}"
            )
        if self.heartbeat is not None and not self.heartbeat > 0:
            raise ReconcilerUsageError(
                f"ResyncPolicy.heartbeat must be positive or None, got {self.heartbeat}"
            )
        if self.config_map is not None and self.config_map.count("/") != 1:
            raise ReconcilerUsageError(
                f"ResyncPolicy.config_map is 'namespace/name', got {self.config_map!r}"
            )

    @property
    def config_map_ref(self) -> tuple[str, str] | None:
        """``(namespace, name)`` of the overriding ConfigMap, if any."""
        if self.config_map is None:
            return None
        namespace, name = self.config_map.split("/")
        return namespace, name

    def with_interval_text(self, text: str | None, *, source: str) -> ResyncPolicy:
        """This policy with the interval from ``text``; unchanged when ``text`` is None.

        ``source`` names where the text came from, for the error when it is not a duration or
        lies outside ``[min_interval, max_interval]`` (refused exactly as an interval given in
        code is, never silently clamped: an operator told "10s" must not quietly run at 60 s).
        """
        if text is None or not text.strip():
            return self
        try:
            seconds = parse_duration(text)
        except ValueError as error:
            raise ReconcilerUsageError(f"{source}: {error}") from error
        if not self.min_interval <= seconds <= self.max_interval:
            raise ReconcilerUsageError(
                f"{source}: resync interval {text.strip()!r} ({seconds:g}s) is outside the "
                f"bounds {self.min_interval:g}..{self.max_interval:g}s (ResyncPolicy."
                f"min_interval/max_interval), as an interval given in code would be"
            )
        return attrs.evolve(self, interval=seconds)

    def with_environment(self, environ: Mapping[str, str]) -> ResyncPolicy:
        """Apply ``OPTK_RESYNC_INTERVAL`` when set."""
        return self.with_interval_text(environ.get(RESYNC_ENV), source=f"${RESYNC_ENV}")

    def with_configmap(self, configmap: Mapping[str, Any] | None) -> ResyncPolicy:
        """Apply the ConfigMap's ``resyncInterval`` key when present."""
        data = (configmap or {}).get("data") or {}
        meta = (configmap or {}).get("metadata") or {}
        where = f"ConfigMap {meta.get('namespace')}/{meta.get('name')} key {RESYNC_CONFIGMAP_KEY}"
        return self.with_interval_text(data.get(RESYNC_CONFIGMAP_KEY), source=where)

    def interval_for(self, parent: Mapping[str, Any], *, default: float | None = None) -> float:
        """The parent's interval: its annotation clamped into bounds, else the policy's.

        ``default`` replaces the policy's interval (a previous run's, from its heartbeat).
        """
        fallback = self.interval if default is None else default
        annotations = (parent.get("metadata") or {}).get("annotations") or {}
        text = annotations.get(self.annotation)
        if isinstance(text, str):
            try:
                return self._clamp(parse_duration(text))
            except ValueError:
                return fallback  # a bad annotation must not stop the parent's resync
        return fallback

    def offset_for(self, uid: str, interval: float, *, ticks: int | None = None) -> float:
        """The parent's stable grid offset in ``[0, interval / ticks)``, from its uid."""
        digest = hashlib.sha256(uid.encode()).digest()
        fraction = int.from_bytes(digest[:8], "big") / 2.0**64
        return fraction * interval / (self.ticks if ticks is None else ticks)

    def due_time(self, parent: Mapping[str, Any], last_reconciled: float) -> float:
        """When the parent is next due: its latest tick at or before its last reconcile plus
        its interval (so within ``(last + interval - interval / ticks, last + interval]``)."""
        interval = self.interval_for(parent)
        return _tick_at_or_before(
            last_reconciled + interval, interval / self.ticks, self._offset(parent, interval)
        )

    def last_reconcile_bound(
        self, parent: Mapping[str, Any], heartbeat: Heartbeat | None
    ) -> float | None:
        """A time the parent's last reconcile is known not to precede, or ``None`` (unknown).

        Two lower bounds, the later wins: the status' recorded time, and the previous run's
        heartbeat (on its grid the parent was reconciled at most one interval before its first
        tick at or after ``covered``).
        """
        bounds = [last_reconcile_time(parent, field=self.status_field)]
        if heartbeat is not None:
            interval = self.interval_for(parent, default=heartbeat.interval)
            spacing = interval / heartbeat.ticks
            offset = self.offset_for(_uid(parent), interval, ticks=heartbeat.ticks)
            bounds.append(_tick_at_or_after(heartbeat.covered, spacing, offset) - interval)
        known = [bound for bound in bounds if bound is not None]
        return max(known) if known else None

    def _offset(self, parent: Mapping[str, Any], interval: float) -> float:
        return self.offset_for(_uid(parent), interval)

    def _clamp(self, seconds: float) -> float:
        return min(self.max_interval, max(self.min_interval, seconds))


def _uid(parent: Mapping[str, Any]) -> str:
    return str((parent.get("metadata") or {}).get("uid", ""))


_SLACK = 1e-7  # of a tick: a moment computed as "on a tick" counts as on it despite rounding


def _tick_at_or_before(moment: float, spacing: float, offset: float) -> float:
    return offset + spacing * math.floor((moment - offset) / spacing + _SLACK)


def _tick_at_or_after(moment: float, spacing: float, offset: float) -> float:
    return offset + spacing * math.ceil((moment - offset) / spacing - _SLACK)


@attrs.frozen(kw_only=True)
class _Entry:
    parent: Mapping[str, Any]
    last: float
    due: float


class ResyncSchedule:
    """Due times per parent key, in wall-clock seconds; thread-safe.

    ``resume_from`` sets the previous run's heartbeat, ``observe`` schedules a parent first seen
    (from the heartbeat and its status), ``reconciled`` resets a parent's timer, ``suspend``
    takes a failing parent off the timer, ``pop_due`` and ``take`` hand out what is due (the
    parent stays "in flight" until reconciled), ``covered`` is what the heartbeat may promise.
    """

    def __init__(self, policy: ResyncPolicy) -> None:
        self._policy = policy
        self._heartbeat: Heartbeat | None = None
        self._lock = threading.Lock()
        self._entries: dict[Hashable, _Entry] = {}
        self._in_flight: dict[Hashable, _Entry] = {}
        self._heap: list[tuple[float, int, Hashable]] = []
        self._seq = 0

    @property
    def policy(self) -> ResyncPolicy:
        """The policy in force."""
        with self._lock:
            return self._policy

    def set_policy(self, policy: ResyncPolicy) -> None:
        """Switch policy (a ConfigMap changed): every due time moves to the new grid, computed
        from the parent's last reconcile (a shorter interval may make parents due at once)."""
        with self._lock:
            self._policy = policy
            for key, entry in list(self._entries.items()):
                self._put_locked(key, entry.parent, entry.last)
            for key, entry in list(self._in_flight.items()):
                self._in_flight[key] = self._entry_locked(entry.parent, entry.last)

    def resume_from(self, heartbeat: Heartbeat | None) -> None:
        """Use the previous run's heartbeat for the parents observed from now on."""
        with self._lock:
            self._heartbeat = heartbeat

    def observe(self, key: Hashable, parent: Mapping[str, Any], *, now: float) -> float:
        """Schedule a parent seen for the first time; returns its due time (``<= now``: due).

        A parent of which neither the heartbeat nor the status tells a last reconcile is due now
        and not put on the timer (its reconcile will).
        """
        with self._lock:
            last = self._policy.last_reconcile_bound(parent, self._heartbeat)
            if last is None:
                self._drop_locked(key)
                return now
            return self._put_locked(key, parent, last)

    def reconciled(self, key: Hashable, parent: Mapping[str, Any], *, at: float) -> float:
        """The parent was just reconciled at wall time ``at``: restart its timer."""
        with self._lock:
            self._in_flight.pop(key, None)
            return self._put_locked(key, parent, at)

    def take(self, key: Hashable) -> None:
        """Take a parent off the timer because it is queued now; it stays in flight (holding
        back ``covered``) until ``reconciled``, ``suspend`` or ``remove``."""
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is not None:
                self._in_flight[key] = entry

    def suspend(self, key: Hashable) -> None:
        """Take a parent off the timer (its retries are the work queue's backoff)."""
        self.remove(key)

    def remove(self, key: Hashable) -> None:
        """Forget a parent (deleted, or no longer ours)."""
        with self._lock:
            self._drop_locked(key)

    def due_at(self, key: Hashable) -> float | None:
        """The parent's due time, or ``None`` when it is not on the timer."""
        with self._lock:
            entry = self._entries.get(key)
            return None if entry is None else entry.due

    def next_due(self) -> float | None:
        """The earliest due time of any parent on the timer."""
        with self._lock:
            self._drop_stale_locked()
            return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> list[Hashable]:
        """Keys due at ``now``: off the timer and in flight until their next ``reconciled``."""
        due: list[Hashable] = []
        with self._lock:
            while True:
                self._drop_stale_locked()
                if not self._heap or self._heap[0][0] > now:
                    return due
                _, _, key = heapq.heappop(self._heap)
                self._in_flight[key] = self._entries.pop(key)
                due.append(key)

    def covered(self, now: float) -> float:
        """The time before which every due parent has been reconciled (what a heartbeat records):
        the earliest due time of a parent on the timer or in flight; ``now`` when there is none.

        It may lie in the future: parents' due times are grid points, so a parent due later was
        reconciled at most one interval before its first grid point at or after it.
        """
        with self._lock:
            self._drop_stale_locked()
            dues = [e.due for e in self._in_flight.values()]
            if self._heap:
                dues.append(self._heap[0][0])
            return min(dues) if dues else now

    def heartbeat(self, now: float) -> Heartbeat:
        """The heartbeat to record at ``now``."""
        policy = self.policy
        return Heartbeat(covered=self.covered(now), interval=policy.interval, ticks=policy.ticks)

    def __len__(self) -> int:
        """Parents on the timer."""
        with self._lock:
            return len(self._entries)

    def _entry_locked(self, parent: Mapping[str, Any], last: float) -> _Entry:
        return _Entry(parent=parent, last=last, due=self._policy.due_time(parent, last))

    def _put_locked(self, key: Hashable, parent: Mapping[str, Any], last: float) -> float:
        entry = self._entry_locked(parent, last)
        self._in_flight.pop(key, None)
        self._entries[key] = entry
        self._seq += 1
        heapq.heappush(self._heap, (entry.due, self._seq, key))
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._entries):
            self._heap = [(e.due, i, k) for i, (k, e) in enumerate(self._entries.items())]
            heapq.heapify(self._heap)
        return entry.due

    def _drop_locked(self, key: Hashable) -> None:
        self._entries.pop(key, None)
        self._in_flight.pop(key, None)

    def _drop_stale_locked(self) -> None:
        while self._heap:
            due, _, key = self._heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry.due == due:
                return
            heapq.heappop(self._heap)
