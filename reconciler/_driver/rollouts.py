"""The gradual rollout's shell: the record in its Lease, the gate the workers ask, the batches.

With ``Operator(rollout=Rollout(...))``, a changed operator fingerprint
(``reconciler._driver.upgrades``) no longer reconciles every parent at once: ``RolloutRunner.run``
moves them to the new version batch by batch, as ``reconciler._driver.rollout_plan`` decides
(every rule is there, pure; this module reads, queues, waits and writes). Its progress lives
beside the heartbeat, in a sibling Lease ``<name>-rollout`` of the heartbeat's namespace
(``RolloutStore``: a few annotations, whatever the number of parents), so it survives restarts
and leader changes; ``optk rollout status|resume|abort`` (``reconciler._commands.rollouts``)
reads and writes the same record, and a write of theirs wins over the runner's (optimistic
concurrency: the runner reads it again on a conflict, and every ``Rollout.poll`` seconds).

``holds(parent)`` is what the workers ask before each reconcile: until ``run`` knows whether a
rollout is under way every parent is held (consent aside); a held parent is neither read nor
written, and its key is queued again when the gate opens or its batch comes. A pause reports
itself once: a ``RolloutPaused`` condition and a Warning Event on the failing parent, the
metrics ``optk_rollout_paused`` and ``optk_rollout_pauses_total``, and one log line.

Boundary: no decision here beyond "which rule applies now"; the parents are read from the
informer cache, the reconciles counted by ``RuntimeStats`` (as ``UpgradeCheck`` does).

What ``RolloutRunner`` receives (``rollout_runner`` builds it for the runtime, which never
hands it the runtime): the ``Rollout`` settings, this version's ``fingerprint``, the record's
``store``, the ``client`` that sets a pause's condition, the ``parents`` informer, the
``triggering`` (``Triggering``: the ``queue`` and ``schedule`` a batch goes through), the
``telemetry`` (``clock``, ``stats`` to count a batch's reconciles, ``metrics`` whose registry
takes the rollout's two), the ``recorder`` of a pause's Event (None: ``Operator(events=False)``)
and ``stopping()``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from prometheus_client import Counter, Gauge

from reconciler._base.clocks import Clock
from reconciler._base.errors import ApiError, ConflictError, LeadershipLostError, NotFoundError
from reconciler._base.times import format_time
from reconciler._cache.informers import Informer
from reconciler._client.protocol import ClusterClient, KubeObject
from reconciler._driver.parts import Telemetry, Triggering
from reconciler._driver.resync_loop import HeartbeatStore
from reconciler._driver.rollout_plan import (
    Phase,
    Rollout,
    RolloutState,
    admits,
    batch_members,
    consents,
    from_annotations,
    judge,
    next_batch,
    observe,
    start,
    to_annotations,
)
from reconciler._driver.triggers import ParentKey, meta_of
from reconciler._leadership.leases import LeaseWriter
from reconciler._reconcile.conditions import merge_conditions
from reconciler._reconcile.events import EventRecorder
from reconciler._workqueue.queues import WorkQueue

__all__ = ["PAUSED_CONDITION", "RolloutRunner", "RolloutStore", "rollout_lease",
           "rollout_runner"]

_log = logging.getLogger("optk.operator")

PAUSED_CONDITION = "RolloutPaused"
"""The condition a pause sets on the failing parent (``False`` again once resumed)."""

_STEP = 0.05
"""Seconds between two looks at the batch's parents in the cache (no request)."""


def rollout_lease(heartbeat_lease: tuple[str, str]) -> tuple[str, str]:
    """``(namespace, name)`` of the rollout record beside the heartbeat Lease ``<name>-resync``."""
    namespace, name = heartbeat_lease
    return namespace, name.removesuffix("-resync") + "-rollout"


class RolloutStore:
    """The rollout record: the annotations of a Lease (``rollout_plan.to_annotations``). Each
    write replaces the version last read or written: ``ConflictError`` when someone (the CLI)
    changed it meanwhile."""

    def __init__(self, client: ClusterClient, *, name: str, namespace: str) -> None:
        self.leases = LeaseWriter(client, name=name, namespace=namespace)
        self._lease: dict[str, Any] | None = None

    @property
    def where(self) -> str:
        """``namespace/name`` of the Lease."""
        return self.leases.where

    def read(self) -> RolloutState | None:
        """The recorded state (None: no rollout recorded, or unreadable)."""
        self._lease = self.leases.read()
        return None if self._lease is None else from_annotations(
            meta_of(self._lease).get("annotations"))

    def write(self, state: RolloutState) -> None:
        """Record ``state`` over the version last read or written."""
        self._lease = self.leases.put({}, annotations=to_annotations(state), over=self._lease)


class RolloutRunner:
    """The rollout of one runtime: ``holds`` for the workers, ``run`` for ``UpgradeCheck``."""

    def __init__(
        self,
        rollout: Rollout,
        *,
        fingerprint: str,
        store: RolloutStore,
        client: ClusterClient,
        parents: Informer,
        triggering: Triggering,
        telemetry: Telemetry,
        recorder: EventRecorder | None,
        stopping: Callable[[], bool],
    ) -> None:
        self.rollout = rollout
        self.fingerprint = fingerprint
        self.store = store
        self._client = client
        self._parents = parents
        self._queue: WorkQueue[ParentKey] = triggering.queue
        self._schedule = triggering.schedule
        self._stats = telemetry.stats
        self._clock: Clock = telemetry.clock
        self._stopping = stopping
        self._recorder = recorder
        metrics = telemetry.metrics
        self._lock = threading.Condition()
        self._decided = False
        self.state: RolloutState | None = None
        """The rollout as this runtime last saw it (None: none under way)."""
        self._held: set[ParentKey] = set()
        self._paused = Gauge("optk_rollout_paused", "Whether the rollout of a new operator "
                             "version is paused (1) or not (0)", registry=metrics.registry)
        self._pauses = Counter("optk_rollout_pauses_total", "Pauses of the rollout of a new "
                               "operator version (a failure or a batch timeout)",
                               registry=metrics.registry)

    # --- the gate ------------------------------------------------------------------------------

    def holds(self, parent: KubeObject) -> bool:
        """Whether ``parent`` is left alone now: a rollout is under way (or not yet ruled out)
        and the parent is neither rolled nor in the batch in flight, nor consents."""
        meta = meta_of(parent)
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        with self._lock:
            if self._decided and admits(self.state, key):
                return False
            if consents(parent):
                return False
            self._held.add(key)
        self._stats.triggers["rollout-held"] += 1
        return True

    def _set(self, state: RolloutState | None) -> None:
        """Decide the gate: ``state`` (None or done: every parent passes); queue the held
        parents it now admits."""
        with self._lock:
            self._decided = True
            self.state = None if state is not None and state.phase is Phase.DONE else state
            admitted = {key for key in self._held if admits(self.state, key)}
            self._held -= admitted
        self._paused.set(1 if state is not None and state.phase is Phase.PAUSED else 0)
        for key in sorted(admitted):
            self._queue.add(key)

    # --- the rollout ---------------------------------------------------------------------------

    def run(self, source: str | None, changed: bool) -> bool:
        """Move every parent to this version (``changed``: the fingerprint differs from the
        recorded ``source``) and return whether all are; else open the gate at once."""
        if not changed:
            self._set(None)
            return True
        state = self._read()
        if state is None or state.target != self.fingerprint:
            state = self._write(start(target=self.fingerprint, source=source))
        _log.info("operator changed (fingerprint %s -> %s): rolling out to %d parents in batches "
                  "of %d (%s, after %s)", (source or "none")[:8], self.fingerprint[:8],
                  len(self._parents.cache.keys()), self.rollout.max_in_flight,
                  state.phase.value, state.cursor or "none")
        while not self._stopping():
            self._set(state)
            if state.phase is Phase.DONE:
                _log.info("rollout of operator %s done", self.fingerprint[:8])
                return True
            if state.phase is Phase.ROLLING and not state.in_flight:
                state = self._write(next_batch(
                    state, self._parents.cache.keys(), now=self._clock.time(),
                    max_in_flight=self.rollout.max_in_flight))
            elif state.phase is Phase.ROLLING:
                state = self._batch(state)
            else:  # paused or aborted: wait for the CLI's resume (an abort is final)
                state = self._idle(state)
        return False

    def _batch(self, state: RolloutState) -> RolloutState:
        """Queue the batch in flight and wait until it is judged (or the record changed)."""
        members = batch_members(state, self._parents.cache.keys())
        before = {key: self._stats.reconciles[key] for key in members}
        for key in members:
            self._stats.triggers["rollout-batch"] += 1
            self._schedule.take(key)
            self._queue.add(key)
        polled = self._clock.monotonic()
        while not self._stopping():
            cache = self._parents.cache
            seen = {key: observe(cache.get(*key), reconciled=self._stats.reconciles[key] > before[
                key]) for key in members}
            verdict = judge(state, seen, now=self._clock.time(), rollout=self.rollout)
            if verdict.changed:
                written = self._write(verdict.state)
                if verdict.paused is not None and written == verdict.state:
                    self._report_pause(written)
                return written
            if self._clock.monotonic() - polled >= self.rollout.poll:
                polled = self._clock.monotonic()
                recorded = self._read()
                if recorded is not None and recorded != state:
                    return recorded  # the CLI changed it: theirs wins
            self._wait(_STEP)
        return state

    def _idle(self, state: RolloutState) -> RolloutState:
        """A paused or aborted rollout: read the record again every ``poll`` seconds."""
        self._wait(self.rollout.poll)
        recorded = self._read()
        if recorded is None or recorded.target != self.fingerprint:
            return state
        if state.phase is Phase.PAUSED and recorded.phase is not Phase.PAUSED and state.failed:
            self._clear_pause(state.failed)
        return recorded

    def _wait(self, seconds: float) -> None:
        """Wait ``seconds`` of the clock in steps of ``_STEP``, so that a stop is seen soon."""
        end = self._clock.monotonic() + seconds
        with self._lock:
            while not self._stopping() and (left := end - self._clock.monotonic()) > 0:
                self._clock.wait(self._lock, min(left, _STEP))

    def _read(self) -> RolloutState | None:
        try:
            return self.store.read()
        except ApiError as error:
            _log.warning("reading the rollout record %s failed: %s", self.store.where, error)
            return None

    def _write(self, state: RolloutState) -> RolloutState:
        """Record ``state``; on a conflict (the CLI wrote) the recorded state instead."""
        try:
            self.store.write(state)
            return state
        except (ConflictError, NotFoundError):
            return self._read() or state
        except (ApiError, LeadershipLostError) as error:
            _log.warning("writing the rollout record %s failed: %s", self.store.where, error)
            self._wait(self.rollout.poll)
            return self._read() or state

    # --- reporting a pause ---------------------------------------------------------------------

    def _report_pause(self, state: RolloutState) -> None:
        """The one log line, the metric, the condition and the Event of a pause."""
        self._pauses.inc()
        self._paused.set(1)
        _log.warning("rollout of operator %s paused at batch %d by %s: %s (resume with `optk "
                     "rollout resume`)", self.fingerprint[:8], state.batch, state.failed,
                     state.reason)
        message = (f"rollout of operator version {self.fingerprint[:8]} paused at batch "
                   f"{state.batch}: {state.reason}")
        self._condition(state.failed, status="True", reason="RolloutPaused", message=message)
        parent = self._parents.cache.get(*_key(state.failed))
        if self._recorder is not None and parent is not None:
            self._recorder.record(parent, reason="RolloutPaused", message=message,
                                  type="Warning")

    def _clear_pause(self, name: str) -> None:
        self._condition(name, status="False", reason="RolloutResumed",
                        message="the rollout was resumed or aborted")

    def _condition(self, name: str, *, status: str, reason: str, message: str) -> None:
        """Set the ``RolloutPaused`` condition on parent ``namespace/name`` (best effort)."""
        parent = self._parents.cache.get(*_key(name))
        if parent is None:
            return
        existing = (parent.get("status") or {}).get("conditions")
        if status == "False" and not any(isinstance(c, dict) and c.get("type") == PAUSED_CONDITION
                                         for c in existing or ()):
            return
        wanted = [{"type": PAUSED_CONDITION, "status": status, "reason": reason,
                   "message": message, "observedGeneration": meta_of(parent).get("generation")}]
        conditions, changed = merge_conditions(existing, wanted, format_time(self._clock.time()))
        if not changed:
            return
        meta = meta_of(parent)
        api_version, kind = self._parents.type_key
        for subresource in ("status", None):
            try:
                self._client.patch(api_version, kind, str(meta.get("name")),
                                   {"status": {"conditions": conditions}},
                                   patch_type="application/merge-patch+json",
                                   namespace=meta.get("namespace") or None,
                                   subresource=subresource)
                return
            except NotFoundError:
                continue
            except (ApiError, LeadershipLostError) as error:
                _log.warning("setting %s on %s failed: %s", PAUSED_CONDITION, name, error)
                return


def rollout_runner(
    rollout: Rollout | None, *, operator_name: str, events: bool, fingerprint: str,
    heartbeats: HeartbeatStore | None, client: ClusterClient, parents: Informer,
    triggering: Triggering, telemetry: Telemetry, stopping: Callable[[], bool],
) -> RolloutRunner | None:
    """The runner of ``Operator.rollout`` (None without one, or without a heartbeat: nothing
    tells a new version then). Its record sits beside the heartbeat Lease (one per shard) and is
    written through the heartbeat's client (fenced when electing); the parents' condition and
    Event through ``client``."""
    if rollout is None or heartbeats is None:
        return None
    store = RolloutStore(heartbeats.client, namespace=heartbeats.namespace,
                         name=heartbeats.name.replace("-resync", "-rollout", 1))
    recorder = EventRecorder(client, component=operator_name, clock=telemetry.clock) if (
        events) else None
    return RolloutRunner(
        rollout, fingerprint=fingerprint, store=store, client=client, parents=parents,
        triggering=triggering, telemetry=telemetry, recorder=recorder, stopping=stopping)


def _key(name: str) -> ParentKey:
    namespace, _, rest = name.partition("/")
    return namespace, rest
