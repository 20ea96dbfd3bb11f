"""The worker pool: threads that take parents off the work queue and reconcile them.

A bounded pool (``Operator.workers``) of threads, started when the runtime leads. Each takes a
key from the ``WorkQueue`` (which never hands one key to two workers), reads the parent from the
informer cache, calls ``ParentReconciler.reconcile`` and turns its result into what happens next:
success forgets the backoff and sets the next resync time (or a requested ``requeue_after``); a
failure backs off (honouring ``Retry-After``) or, with ``retry_failed_by_backoff=False``, waits
for the next resync. With sharding, a parent its shard must release (the drain mark) is
acknowledged instead of reconciled, and one moved in has its children adopted first (and is
reconciled only when due or when a child drifted while no replica watched it, planned against
the caches) (``reconciler._sharding.shards``). A parent being deleted that carries the
toolkit's cleanup finalizer gets its cleanup (``ParentCleanup.finalize``), retried with backoff
until done. A write refused by the fence (``LeadershipLostError``: the lease may have expired) ends
the reconcile with nothing requeued, and the runtime steps down; a parent whose namespace is
being deleted (``ParentResult.namespace_terminating``) is neither retried nor resynced. A parent
gone or being deleted is then dropped from the schedule and its child
informers released. Deciding when to queue is not here (``reconciler._driver.routing``,
``reconciler._driver.resync_loop``).

A worker waiting on one key for longer than ``STALL`` seconds (an answer lost or late: the
request waits up to its timeout) does not hold up other parents: a spare worker is started for
each such worker, so the keys that are not stuck always have ``workers`` threads (at most one
spare per worker: when spares are stuck too, as against a server that answers nothing, the pool
stops at twice ``workers`` threads and the rest wait, as before); a spare ends
after its key once the workers it stood in for are free again (the supervisor thread looks
every ``STALL / 2`` seconds while a reconcile runs, in real time: request timeouts are real).

A turn on a key has two steps: ``_reconcile`` does the I/O and describes what came of it as an
``Outcome``; the pure ``settle`` (``reconciler._driver.settling``) turns that into a ``Settlement``,
which ``_execute`` carries out. What follows a reconcile is decided there, not here.

What it receives from the runtime (``reconciler._driver.runtime`` wires it; it never sees the
runtime): the runtime's ``lock`` (the runtime asks under it whether the workers started and it
is not stopping), the ``triggering`` (``Triggering``: the ``queue`` it drains, the resync
``schedule``, ``kick()`` to wake the resync timer), the ``caches`` (``Caches``: the ``parents``
informer, from whose cache the parent is read and where one that went away is forgotten, and the
child ``informers``, used and released per parent), the parent ``reconciler`` (and through it
the drift look of an adopted parent, ``reconciler._driver.drift``), ``shards`` (drain and
adoption; None without sharding), the ``telemetry`` (``clock``, ``stats``, ``metrics``); and
callables: ``step_down()`` (the leader gate's stop on a lost lease), ``stopping()`` and
``held(parent)``: whether a gradual rollout leaves it alone now (``reconciler._driver.rollouts``).
It calls neither the router nor the standby: they ask it (``last_started``, ``started``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from reconciler._base.clocks import Clock
from reconciler._base.errors import ApiError, KindUnlistableError, LeadershipLostError
from reconciler._base.metrics import OperatorMetrics
from reconciler._base.text import bounded
from reconciler._cache.children import Caches
from reconciler._cache.informers import TypeKey
from reconciler._client.protocol import KubeObject
from reconciler._driver.drift import drifted
from reconciler._driver.parts import Telemetry, Triggering
from reconciler._driver.settling import Outcome, Settlement, settle
from reconciler._driver.triggers import ParentKey, meta_of, parent_needs_reconcile
from reconciler._reconcile.changelog import describe_changes
from reconciler._reconcile.conditions import caused_by, described
from reconciler._reconcile.finalizing import CLEANUP_FINALIZER
from reconciler._reconcile.parents import ParentReconciler, ParentResult, unlisted_cause
from reconciler._sharding.shards import Shards
from reconciler._workqueue.queues import WorkQueue

__all__ = ["ParentLog", "WorkerPool"]

_log = logging.getLogger("optk.operator")

STALL = 0.1
"""Seconds on one key after which a worker counts as stuck and a spare takes the next keys."""
SPARE_IDLE = 1.0
"""Seconds (of the injected clock) a spare waits for a key before it looks whether it is still
needed."""


class ParentLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """Puts the parent key on every line (as text and as the ``parent`` record field, which
    ``reconciler._commands.running.JsonLogFormatter`` writes out)."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        """Prefix the message with the parent key and add it to the record's extra fields."""
        extra = self.extra or {}
        kwargs.setdefault("extra", {}).update(extra)
        return f"[{extra.get('parent')}] {msg}", kwargs


class WorkerPool:
    """The runtime's reconciling threads; shares the runtime's lock for its counters."""

    def __init__(
        self,
        *,
        lock: threading.Condition,
        triggering: Triggering,
        caches: Caches,
        reconciler: ParentReconciler,
        shards: Shards | None,
        telemetry: Telemetry,
        step_down: Callable[[], None],
        stopping: Callable[[], bool],
        held: Callable[[KubeObject], bool] | None = None,
    ) -> None:
        self._lock = lock
        self._held = held
        self._queue: WorkQueue[ParentKey] = triggering.queue
        self._schedule = triggering.schedule
        self._kick = triggering.kick
        self._parents = caches.parents
        self._informers = caches.informers
        self._reconciler = reconciler
        self._shards = shards
        self._clock: Clock = telemetry.clock
        self._stats = telemetry.stats
        self._metrics: OperatorMetrics = telemetry.metrics
        self._step_down = step_down
        self._stopping = stopping
        self._threads: list[threading.Thread] = []
        self._spares: list[threading.Thread] = []
        self._busy_since: dict[int, float] = {}  # worker thread id -> when it took its key
        self._active = 0
        self._last_started: dict[ParentKey, float] = {}
        self._fenced = False

    @property
    def started(self) -> bool:
        """Whether the workers were started (the runtime leads, or has led until stopping)."""
        with self._lock:
            return bool(self._threads)

    @property
    def threads(self) -> tuple[threading.Thread, ...]:
        """The worker threads (none before ``start``)."""
        with self._lock:
            return tuple(self._threads)

    @property
    def busy(self) -> bool:
        """Whether a reconcile is running now."""
        with self._lock:
            return self._active > 0

    def last_started(self, key: ParentKey) -> float | None:
        """When (clock monotonic) the last reconcile of ``key`` started, if any."""
        with self._lock:
            return self._last_started.get(key)

    def start(self, count: int) -> bool:
        """Start ``count`` workers unless started already or stopping; whether it started them."""
        with self._lock:
            if self._stopping() or self._threads:
                return False
            for index in range(count):
                worker = threading.Thread(target=self._work, name=f"optk-worker-{index}",
                                          daemon=True)
                self._threads.append(worker)
                worker.start()
            supervisor = threading.Thread(target=self._supervise, name="optk-worker-spares",
                                          daemon=True)
            self._spares.append(supervisor)
            supervisor.start()
            return True

    def _supervise(self) -> None:
        """Start a spare worker for each worker stuck on one key (see the module)."""
        while not self._queue.shutting_down:
            with self._lock:
                if not self._busy_since:
                    self._lock.wait(0.5)  # woken when a worker takes a key
                    continue
                now = time.monotonic()
                stuck = sum(1 for since in self._busy_since.values() if now - since >= STALL)
                spares = sum(1 for t in self._spares if t.name != "optk-worker-spares"
                             and t.is_alive())
                # at most one spare per worker: a server that holds every answer cannot grow
                # the threads beyond twice ``workers``
                for _ in range(min(stuck - spares, len(self._threads) - spares)):
                    spare = threading.Thread(target=self._work, args=(True,),
                                             name=f"optk-worker-spare-{len(self._spares)}",
                                             daemon=True)
                    self._spares.append(spare)
                    spare.start()
                self._spares = [t for t in self._spares if t.is_alive() or not t.ident]
            time.sleep(STALL / 2)

    def _needed(self) -> bool:
        """Whether a spare is still needed: as many workers are stuck as spares run (lock
        held by the caller)."""
        now = time.monotonic()
        stuck = sum(1 for since in self._busy_since.values() if now - since >= STALL)
        spares = sum(1 for t in self._spares if t.name != "optk-worker-spares" and t.is_alive())
        return stuck >= spares

    def join(self, deadline: float) -> bool:
        """Wait (real time, until ``deadline`` of ``time.monotonic``) for every worker to end;
        whether all did."""
        clean = True
        with self._lock:
            threads = [*self._threads, *self._spares]
            self._lock.notify_all()  # the supervisor sees the queue shut down at once
        for worker in threads:
            worker.join(max(0.0, deadline - time.monotonic()))
            clean = clean and not worker.is_alive()
        return clean

    def _work(self, spare: bool = False) -> None:
        queue = self._queue
        metrics = self._metrics
        me = threading.get_ident()
        while True:
            key = queue.get(timeout=SPARE_IDLE if spare else None)
            if key is None:
                with self._lock:
                    if spare and not queue.shutting_down and self._needed():
                        continue  # still standing in for a stuck worker
                return
            with self._lock:
                self._active += 1
                self._busy_since[me] = time.monotonic()
                if len(self._busy_since) == 1:
                    self._lock.notify_all()  # the supervisor looks while a reconcile runs
            metrics.worker_started()
            try:
                self._process(key)
            except LeadershipLostError as lost:  # a fenced write: reconcile or cleanup
                self._fenced_out(key, lost)
            except Exception:  # never lose a worker to a bug: back off and keep going
                ParentLog(_log, {"parent": "/".join(key)}).exception("reconcile crashed")
                queue.add_rate_limited(key)
            finally:
                metrics.worker_finished()
                with self._lock:
                    self._active -= 1
                    del self._busy_since[me]
                    leave = spare and not self._needed()
                queue.done(key)
            if leave:
                return

    def _fenced_out(self, key: ParentKey, lost: LeadershipLostError) -> None:
        """A write was refused by the fence: requeue nothing and step down (once)."""
        ParentLog(_log, {"parent": "/".join(key)}).error(
            "reconcile stopped, nothing requeued: %s", lost)
        with self._lock:
            first, self._fenced = not self._fenced, True
        if first:
            self._step_down()

    def _process(self, key: ParentKey) -> None:
        """One turn on ``key``: reconcile (the I/O), then settle (``reconciler._driver.settling``
        decides, this executes)."""
        outcome, parent = self._reconcile(key)
        self._execute(key, parent, settle(outcome))

    def _reconcile(self, key: ParentKey) -> tuple[Outcome, KubeObject | None]:
        """The drain acknowledgement, adoption, cleanup or reconcile of ``key``: what came of
        it, and the parent it was about (None: gone)."""
        parent = self._parents.cache.get(*key)
        shards = self._shards
        if parent is not None and shards is not None and shards.releasing(parent):
            if not shards.acknowledge(parent):
                return Outcome(drain_refused=True), parent
            parent = None  # no longer ours: forget it as if it were gone
        if parent is not None and shards is not None and shards.take_adoption(key):
            # a paused parent's children are not relabelled: a pause writes nothing
            self._informers.use(key, shards.adopt(
                parent, write=self._reconciler.paused(parent) is None))
            now = self._clock.time()
            if not parent_needs_reconcile(parent) and self._schedule.observe(
                    key, parent, now=now) > now:
                # Its children may have drifted while no replica watched them (the owner
                # crashed): planned against the caches, no request.
                if not drifted(self._reconciler, parent):
                    return Outcome(adopted=True), parent
                self._stats.triggers["drift-at-adoption"] += 1
            self._schedule.take(key)
        if parent is None:
            return Outcome(gone=True), None
        meta = meta_of(parent)
        if meta.get("deletionTimestamp"):
            if CLEANUP_FINALIZER in (meta.get("finalizers") or ()) and (
                    self._reconciler.paused(parent) is None):  # a pause holds the cleanup too
                cleanup = self._reconciler.cleanup.finalize(parent)
                if not cleanup.done:  # retried with backoff
                    return Outcome(cleanup_pending=cleanup.reason,
                                   cleanup_alarming=cleanup.alarming), parent
            return Outcome(deleting=True), parent
        if self._held is not None and self._held(parent):  # a gradual rollout's later batch
            return Outcome(held=True), parent
        with self._lock:
            self._last_started[key] = self._clock.monotonic()
        started = time.perf_counter()
        try:
            result: ParentResult | None = self._reconciler.reconcile(parent)
            error: Exception | None = None
        except (ApiError, ValueError, TypeError) as exc:
            result, error = None, exc
        seconds = time.perf_counter() - started
        self._stats.reconciles[key] += 1
        return outcome_of(
            result, error, seconds=seconds,
            retry_failed_by_backoff=self._schedule.policy.retry_failed_by_backoff,
        ), parent

    def _execute(self, key: ParentKey, parent: KubeObject | None, plan: Settlement) -> None:
        """Carry ``plan`` out, in ``Settlement``'s order."""
        self._stats.writes += plan.writes
        if plan.use_types is not None:
            self._informers.use(key, plan.use_types)
        if plan.count_failure:
            self._stats.failures[key] += 1
        if plan.trigger is not None:
            self._stats.triggers[plan.trigger] += 1
        if plan.forget_cached and parent is not None:
            self._forget_cached(key, parent)
        if plan.forget_backoff:
            self._queue.forget(key)
        if plan.unschedule:
            self._schedule.remove(key)
        if plan.reschedule and parent is not None:
            self._schedule.reconciled(key, parent, at=self._clock.time())
        if plan.suspend:
            self._schedule.suspend(key)
        if plan.release:
            self._informers.release(key)
            self._reconciler.forget_builds(key)
            self._reconciler.waits.replace(key, ())  # gone or moved: it waits on nothing here
            with self._lock:
                self._last_started.pop(key, None)
        if plan.requeue_now:
            self._queue.add(key)
        if plan.requeue_after is not None:
            self._queue.add_after(key, plan.requeue_after)
        delay = 0.0
        if plan.backoff:
            delay = self._queue.add_rate_limited(key, at_least=plan.backoff_at_least)
        elif plan.report_delay:  # left to the resync: looked at when due
            due = self._schedule.due_at(key)
            delay = 0.0 if due is None else due - self._clock.time()
        if plan.kick:
            self._kick()
        if plan.metric is not None:
            self._metrics.observe_reconcile(result=plan.metric, seconds=plan.seconds)
        if plan.message is None and plan.detail is None:
            return
        log = ParentLog(_log, {"parent": f"{key[0]}/{key[1]}" if key[0] else key[1]})
        level, more = plan.level, ""
        if plan.cause is not None and level >= logging.WARNING:  # said by another parent?
            level, more = self._reconciler.warnings.level(plan.cause)
        if plan.message is not None and plan.report_delay:
            log.log(level, "%s; retrying in %.3fs%s", plan.message, delay, more)
        elif plan.message is not None:
            log.log(level, "%s%s", plan.message, more)
        if plan.detail is not None:
            log.debug("%s", plan.detail)

    def _forget_cached(self, key: ParentKey, parent: KubeObject) -> None:
        """Drop ``parent`` (which went away during its reconcile: a write answered 404) from
        the parent cache, unless the cache holds another one by now or sees its deletion."""
        cached = self._parents.cache.get(*key)
        uid = str(meta_of(parent).get("uid") or "")
        if cached is not None and str(meta_of(cached).get("uid") or "") == uid and not (
                meta_of(cached).get("deletionTimestamp")):
            self._parents.cache.forget(cached, uid=uid)


def outcome_of(result: ParentResult | None, error: Exception | None, *, seconds: float,
               retry_failed_by_backoff: bool) -> Outcome:
    """The ``Outcome`` of a reconcile that returned ``result`` or raised ``error``."""
    retry_after = getattr(error, "retry_after", None) or 0.0
    if result is None:
        return Outcome(reconciled=True, reason=bounded(error), retry_after=retry_after,
                       retry_failed_by_backoff=retry_failed_by_backoff, seconds=seconds)
    reason = bounded("; ".join([described(e) for e in result.errors]
                               + ([result.status_error] if result.status_error else [])))
    return Outcome(
        reconciled=True, ok=result.ok, went_away=result.parent_gone,
        namespace_terminating=result.namespace_terminating, requeue_after=result.requeue_after,
        retry_after=max([retry_after, *(e.retry_after or 0.0 for e in result.errors)]),
        retry_failed_by_backoff=retry_failed_by_backoff, reason=reason,
        permanent=result.permanent, status_written=result.status_written,
        cause=shared_cause(result),
        types=None if result.paused else frozenset(types_of(result)),  # paused: keep watching
        writes=result.writes,
        changes=describe_changes(result) if result.ok else None, seconds=seconds,
    )


def shared_cause(result: ParentResult) -> tuple[str, ...] | None:
    """The cause key of a failure other parents share: every error is one kind that cannot
    be listed (``KindUnlistableError``); None otherwise."""
    kinds = set()
    for error in result.errors:
        cause = caused_by(error.error, KindUnlistableError)
        if not isinstance(cause, KindUnlistableError) or result.status_error:
            return None
        kinds.add((cause.api_version, cause.kind))
    return unlisted_cause(*kinds.pop()) if len(kinds) == 1 else None


def types_of(result: ParentResult) -> set[TypeKey]:
    """The child types a reconcile declared (built, pruned, failed, waiting on their
    dependencies: a waiting child that exists is still observed, or whose pruning is blocked:
    its informer is kept, so the parent is looked at again when it lists), for its informers."""
    types = {(r.ref.api_version, r.ref.kind) for r in (*result.children, *result.pruned)
             if r.cluster is None}  # a child placed in another cluster is not watched here
    home = {r.ref for r in result.children if r.cluster is None}
    types |= {(w.ref.api_version, w.ref.kind) for w in result.waiting
              if w.ref not in result.placed or w.ref in home}
    types |= {(e.ref.api_version, e.ref.kind) for e in (*result.errors, *result.prune_blocked)
              if e.ref.api_version and e.ref.kind != "builder"
              and (e.ref not in result.placed or e.ref in home)}
    return types
