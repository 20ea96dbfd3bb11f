"""The resync loop: the timer that queues due parents, and the heartbeat that keeps it
restart-proof.

Two threads of the runtime, driven by the ``ResyncSchedule`` (``reconciler._driver.resyncs`` decides
when each parent is due; this module only waits and acts): the timer sleeps on the injected
clock until the next due time and queues every parent due by then; the heartbeat records every
``ResyncPolicy.heartbeat`` seconds, in a Lease, up to when every due parent was reconciled, and
``resume`` reads the previous run's record at start or takeover (``HeartbeatStore``: the Lease
that holds it). Each beat also stamps the Lease with the time of the write and the period (a
``Beat``), so that others can tell a running operator from a stopped one (``heartbeat_hold``:
``optk uninstall`` refuses while it is fresh); the last beat, at a clean stop, empties the
holder. Both run only while this runtime leads (a standby keeps its schedule and stays
silent).

The beat is also how a second instance of the same operator run without leader election is
seen (``HeartbeatStore.check_others``): at start, a fresh beat of another holder; while
running, a beat of another holder written between two of ours (our write conflicts). Either
is one WARNING naming the other instance (its identity, its last beat, the Lease), once per
other instance, and ``HeartbeatStore.contender`` (``/readyz`` reports it as degraded). It
warns and does not refuse, as kopf warns of peers of the same priority: refusing would break a
rolling update (the new pod starts while the old one runs) and delay a restart after a crash
(the dead instance's beat stays fresh for ``HEARTBEAT_GRACE`` periods); leader election
(``--leader-elect``) is how several instances run safely.

What ``ResyncLoop`` receives from the runtime (``reconciler._driver.runtime`` wires it; it never
sees the runtime): the ``schedule`` it follows, the ``queue`` it feeds, the ``heartbeats`` store
(None: no heartbeat), the beat ``period``, the ``clock`` and ``stats``, and ``stopping()``; the
runtime calls ``lead()`` once its workers run (a standby's loops wait until then).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, cast

import attrs

from reconciler._base.clocks import Clock
from reconciler._base.errors import ApiError, ConflictError, LeadershipLostError, NotFoundError
from reconciler._base.times import format_micro_time, parse_time
from reconciler._client.protocol import ClusterClient, KubeObject
from reconciler._driver.resyncs import Heartbeat, ResyncSchedule, parse_duration
from reconciler._driver.stats import RuntimeStats
from reconciler._driver.triggers import ParentKey
from reconciler._leadership.leases import LeaseHold, LeaseWriter, holder_record
from reconciler._workqueue.queues import WorkQueue

__all__ = ["HEARTBEAT_GRACE", "Beat", "HeartbeatStore", "ResyncLoop", "heartbeat_hold"]

_log = logging.getLogger("optk.operator")


class ResyncLoop:
    """The timer and heartbeat threads of one runtime.

    ``lead()`` says that the runtime's workers run; ``stopping()`` whether it stops.
    """

    def __init__(
        self,
        *,
        schedule: ResyncSchedule,
        queue: WorkQueue[ParentKey],
        heartbeats: HeartbeatStore | None,
        period: float | None,
        clock: Clock,
        stats: RuntimeStats,
        stopping: Callable[[], bool],
    ) -> None:
        self.schedule = schedule
        self.queue = queue
        self.heartbeats = heartbeats
        self.period = period or 60.0
        self.clock = clock
        self.stats = stats
        self._leading = False
        self._stopping = stopping
        self._timer_cond = threading.Condition()
        self._beat_cond = threading.Condition()

    def kick(self) -> None:
        """Wake the timer: the schedule changed."""
        with self._timer_cond:
            self._timer_cond.notify_all()

    def lead(self) -> None:
        """The runtime's workers run (it leads, or election is off): from now on the timer
        queues due parents and the heartbeat beats; both are woken."""
        with self._timer_cond:
            self._leading = True
            self._timer_cond.notify_all()
        self.beat_now()

    def beat_now(self) -> None:
        """Wake the heartbeat: a new leader records its heartbeat at once."""
        with self._beat_cond:
            self._beat_cond.notify_all()

    def wake_all(self) -> None:
        """Wake both threads so they see that the runtime stops."""
        self.kick()
        self.beat_now()

    def run_timer(self) -> None:
        """The timer thread: queue parents as they fall due, while leading."""
        with self._timer_cond:
            while True:
                if self._stopping():
                    return
                if not self._leading:  # a standby keeps its schedule; the leader's timer fires
                    self.clock.wait(self._timer_cond, None)
                    continue
                for key in self.schedule.pop_due(self.clock.time()):
                    self.stats.triggers["resync"] += 1
                    self.queue.add(cast(ParentKey, key))
                due = self.schedule.next_due()
                wait = None if due is None else max(0.0, due - self.clock.time())
                self.clock.wait(self._timer_cond, wait)

    def resume(self) -> None:
        """Read the previous run's heartbeat so first-seen parents keep their grid times."""
        if self.heartbeats is None:
            return
        try:
            heartbeat = self.heartbeats.read()
        except ApiError as error:
            _log.warning("reading the resync heartbeat failed (%s); restarting from the "
                         "parents' status alone", error)
            heartbeat = None
        if heartbeat is not None:
            _log.debug("resuming the periodic resync: covered until %.0f", heartbeat.covered)
        self.heartbeats.check_others(self.clock.time())  # a second run of the operator?
        self.schedule.resume_from(heartbeat)

    def run_beat(self) -> None:
        """The heartbeat thread: record what this run covered every period while leading."""
        next_beat = self.clock.monotonic()
        while True:
            if self._stopping():
                return
            leading = self._leading
            now = self.clock.monotonic()
            if leading and now >= next_beat:
                self.write_heartbeat()
                next_beat = now + self.period
            wait = next_beat - now if leading and now < next_beat else self.period
            with self._beat_cond:
                self.clock.wait(self._beat_cond, wait)

    def force_beat(self) -> None:
        """Write the heartbeat now, before its period is up (its fingerprint changed)."""
        self.write_heartbeat()

    def write_heartbeat(self, *, last: bool = False) -> None:
        """Record the schedule's heartbeat, stamped with the time of the write and the period:
        every beat writes, even when ``covered`` did not move, because the stamp is how others
        (``optk uninstall``) see that the operator runs. ``last``: the runtime stops, so the
        record is released (an empty holder) and nobody waits for it to go stale."""
        if self.heartbeats is None:
            return
        now = self.clock.time()
        try:
            self.heartbeats.write(self.schedule.heartbeat(now),
                                  beat=Beat(at=now, period=self.period, stopped=last))
            self.stats.heartbeats += 1
        except (ApiError, LeadershipLostError) as error:  # a missed beat only widens what a
            # restart re-checks; a fenced one (leadership lost) was never sent
            _log.warning("writing the resync heartbeat failed: %s", error)


_INTERVAL_ANNOTATION = "optk.dev/resync-interval-seconds"
_TICKS_ANNOTATION = "optk.dev/resync-ticks"
_FINGERPRINT_ANNOTATION = "optk.dev/operator-fingerprint"
_BEAT_ANNOTATION = "optk.dev/heartbeat-time"
_PERIOD_ANNOTATION = "optk.dev/heartbeat-period-seconds"

HEARTBEAT_GRACE = 2.0
"""A heartbeat counts as fresh for this many periods after its last write: one beat may be
missed or late (a slow API server, a long pause) before a running operator looks stopped."""


@attrs.frozen(kw_only=True)
class Beat:
    """One write of the heartbeat as a sign of life: when (epoch seconds, the runtime's clock),
    the period of the writes, and whether the runtime is stopping (the record is released)."""

    at: float
    period: float
    stopped: bool = False


def heartbeat_hold(lease: KubeObject) -> LeaseHold | None:
    """Whether the heartbeat Lease's writer runs, as a ``LeaseHold``: its holder (empty once
    it stopped cleanly), the time of its last beat and ``HEARTBEAT_GRACE`` periods of
    validity. ``None`` for a Lease without a beat's stamp (written by a toolkit before the
    stamp, or no heartbeat at all): its ``renewTime`` is what the resync covered, not a time
    of writing, and tells nothing of whether its writer runs."""
    meta = lease.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    at = parse_time(annotations.get(_BEAT_ANNOTATION))
    try:
        period = float(str(annotations.get(_PERIOD_ANNOTATION)))
    except ValueError:
        return None
    if at is None or not period > 0:
        return None
    return LeaseHold(where=f"{meta.get('namespace')}/{meta.get('name')}",
                     holder=str((lease.get("spec") or {}).get("holderIdentity") or ""),
                     renewed=at, valid_for=HEARTBEAT_GRACE * period)


class HeartbeatStore:
    """The heartbeat as a ``coordination.k8s.io/v1`` Lease: ``spec.renewTime`` is ``covered``,
    two annotations hold the grid. One write (a PUT, through ``reconciler._leadership.leases``) per
    beat; a GET only on a conflict.

    API errors propagate (``reconciler.ApiError``); the caller decides whether a missed beat
    matters (it does not: the next restart merely treats more parents as possibly missed).
    """

    def __init__(
        self, client: ClusterClient, *, name: str, namespace: str, identity: str,
        watch_others: bool = False,
    ) -> None:
        self.client = client
        self.watch_others = watch_others
        """Whether another holder's fresh beat means a second instance (no leader election:
        with it, a new leader finds its predecessor's beat, which is no contender)."""
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.leases = LeaseWriter(client, name=name, namespace=namespace)
        self._lease: dict[str, Any] | None = None
        self.fingerprint: str | None = None
        """The operator fingerprint written with each beat (None: leave the recorded one);
        ``reconciler._driver.upgrades`` sets it once every parent was reconciled under it."""
        self.recorded_fingerprint: str | None = None
        """The fingerprint ``read`` found (None: none recorded)."""
        self.lease_found = False
        """Whether ``read`` found the Lease (a previous run recorded a heartbeat)."""
        self.contender: LeaseHold | None = None
        """The last fresh beat of another instance seen on the Lease (None: none): a second
        run of the operator without leader election, both writing."""
        self._named: set[str] = set()  # the other instances already warned of

    def read(self) -> Heartbeat | None:
        """The recorded heartbeat, or ``None`` when there is none (or it is unreadable)."""
        lease = self.leases.read()
        if lease is None:
            self.lease_found, self.recorded_fingerprint = False, None
            return None
        self._lease = lease
        annotations = (lease.get("metadata") or {}).get("annotations") or {}
        self.lease_found = True
        recorded = annotations.get(_FINGERPRINT_ANNOTATION)
        self.recorded_fingerprint = recorded if isinstance(recorded, str) else None
        covered = parse_time((lease.get("spec") or {}).get("renewTime"))
        try:
            interval = parse_duration(str(annotations.get(_INTERVAL_ANNOTATION)))
            ticks = int(str(annotations.get(_TICKS_ANNOTATION)))
        except ValueError:
            return None
        if covered is None or ticks < 1:
            return None
        return Heartbeat(covered=covered, interval=interval, ticks=ticks)

    def check_others(self, now: float) -> LeaseHold | None:
        """Whether the Lease as last read or written carries another instance's fresh beat
        (``contender``); the first time for that instance, one WARNING naming it."""
        hold = None if self._lease is None or not self.watch_others else heartbeat_hold(
            self._lease)
        if hold is None or hold.holder == self.identity or not hold.fresh(now):
            return None
        self.contender = hold
        if hold.holder not in self._named:
            self._named.add(hold.holder)
            _log.warning(
                "another instance of this operator, %s, writes its heartbeat Lease %s (its last "
                "beat %.0fs ago): both reconcile and write the same parents. Stop one, or run "
                "every instance with leader election (optk run --leader-elect); if it has "
                "crashed, its beat goes stale within %.0fs", hold.holder, hold.where,
                max(0.0, hold.age(now)), max(0.0, hold.valid_for - hold.age(now)))
        return hold

    def write(self, heartbeat: Heartbeat, *, beat: Beat | None = None) -> None:
        """Record ``heartbeat`` (creating the Lease the first time), with ``beat``'s stamp and
        period when given (a beat that stops empties the holder)."""
        annotations = {_INTERVAL_ANNOTATION: repr(heartbeat.interval),
                       _TICKS_ANNOTATION: str(heartbeat.ticks)}
        if self.fingerprint is not None:
            annotations[_FINGERPRINT_ANNOTATION] = self.fingerprint
        if beat is not None:
            annotations[_BEAT_ANNOTATION] = format_micro_time(beat.at)
            annotations[_PERIOD_ANNOTATION] = repr(beat.period)
        holder = "" if beat is not None and beat.stopped else self.identity
        spec = holder_record(holder, heartbeat.covered)
        for _ in range(3):
            try:  # over the version last written or read: one PUT, no GET
                self._lease = self.leases.put(spec, annotations=annotations, over=self._lease)
                return
            except (ConflictError, NotFoundError):
                # someone else wrote it (or deleted it): read afresh, and see who
                self._lease = self.leases.read()
                if beat is not None:
                    self.check_others(beat.at)
        raise ConflictError(
            f"heartbeat Lease {self.namespace}/{self.name} kept changing under the writer"
        )
