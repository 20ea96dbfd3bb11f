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
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from reconciler._base.errors import ApiError, LeadershipLostError
from reconciler._cache.informers import TypeKey
from reconciler._driver.triggers import ParentKey, meta_of, parent_needs_reconcile
from reconciler._reconcile.changelog import describe_changes
from reconciler._reconcile.finalizing import CLEANUP_FINALIZER
from reconciler._reconcile.parents import ParentResult

if TYPE_CHECKING:
    from reconciler._driver.runtime import OperatorRuntime

__all__ = ["ParentLog", "WorkerPool"]

_log = logging.getLogger("optk.operator")


class ParentLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """Puts the parent key on every line (as text and as the ``parent`` record field, which
    ``reconciler._driver.process.JsonLogFormatter`` writes out)."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        """Prefix the message with the parent key and add it to the record's extra fields."""
        extra = self.extra or {}
        kwargs.setdefault("extra", {}).update(extra)
        return f"[{extra.get('parent')}] {msg}", kwargs


class WorkerPool:
    """The runtime's reconciling threads; shares the runtime's lock for its counters."""

    def __init__(self, runtime: OperatorRuntime) -> None:
        self._runtime = runtime
        self._lock = runtime.lock
        self._threads: list[threading.Thread] = []
        self._active = 0
        self._last_started: dict[ParentKey, float] = {}
        self._fenced = False

    @property
    def started(self) -> bool:
        """Whether the workers were started (the runtime leads, or has led until stopping)."""
        with self._lock:
            return bool(self._threads)

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
            if self._runtime.stopping or self._threads:
                return False
            for index in range(count):
                worker = threading.Thread(target=self._work, name=f"optk-worker-{index}",
                                          daemon=True)
                self._threads.append(worker)
                worker.start()
            return True

    def join(self, deadline: float) -> bool:
        """Wait (real time, until ``deadline`` of ``time.monotonic``) for every worker to end;
        whether all did."""
        clean = True
        for worker in list(self._threads):
            worker.join(max(0.0, deadline - time.monotonic()))
            clean = clean and not worker.is_alive()
        return clean

    def _work(self) -> None:
        queue = self._runtime.queue
        metrics = self._runtime.metrics
        while (key := queue.get()) is not None:
            with self._lock:
                self._active += 1
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
                queue.done(key)

    def _fenced_out(self, key: ParentKey, lost: LeadershipLostError) -> None:
        """A write was refused by the fence: requeue nothing and step down (once)."""
        ParentLog(_log, {"parent": "/".join(key)}).error(
            "reconcile stopped, nothing requeued: %s", lost)
        with self._lock:
            first, self._fenced = not self._fenced, True
        if first:
            self._runtime.standby.lost_leadership()

    def _process(self, key: ParentKey) -> None:
        rt = self._runtime
        log = ParentLog(_log, {"parent": f"{key[0]}/{key[1]}" if key[0] else key[1]})
        parent = rt.parents.cache.get(*key)
        if parent is not None and rt.shards is not None and rt.shards.releasing(parent):
            if not rt.shards.acknowledge(parent):
                rt.queue.add_rate_limited(key)
                return
            parent = None  # no longer ours: forget it as if it were gone
        if parent is not None and rt.shards is not None and rt.shards.take_adoption(key):
            rt.informers.use(key, rt.shards.adopt(parent))
            now = rt.clock.time()
            if not parent_needs_reconcile(parent) and rt.schedule.observe(
                    key, parent, now=now) > now:
                # Its children may have drifted while no replica watched them (the owner
                # crashed): planned against the caches, no request.
                if not rt.standby.drifted(parent):
                    rt.resync.kick()
                    return  # adopted; its periodic resync comes when due
                rt.stats.triggers["drift-at-adoption"] += 1
            rt.schedule.take(key)
        if parent is not None and meta_of(parent).get("deletionTimestamp") and (
            CLEANUP_FINALIZER in (meta_of(parent).get("finalizers") or ())
        ):
            outcome = rt.reconciler.cleanup.finalize(parent)
            if not outcome.done:  # retried with backoff; the parent's Cleanup condition says why
                delay = rt.queue.add_rate_limited(key)
                log.warning("cleanup pending (%s); retrying in %.3fs", outcome.reason, delay)
                return
        if parent is None or meta_of(parent).get("deletionTimestamp"):
            log.info("parent %s; its children are collected by their owner references",
                     "is gone (or moved)" if parent is None else "is being deleted")
            rt.schedule.remove(key)
            rt.queue.forget(key)
            rt.informers.release(key)
            rt.reconciler.forget_builds(key)
            with self._lock:
                self._last_started.pop(key, None)
            return
        with self._lock:
            self._last_started[key] = rt.clock.monotonic()
        started = time.perf_counter()
        try:
            result: ParentResult | None = rt.reconciler.reconcile(parent)
            error: Exception | None = None
        except (ApiError, ValueError, TypeError) as exc:
            result, error = None, exc
        seconds = time.perf_counter() - started
        rt.stats.reconciles[key] += 1
        if result is not None and result.parent_gone:
            # It went away during the reconcile. A write answered 404 while the cache still
            # holds it: the cache missed (or has not yet seen) the deletion, so it is forgotten
            # now; a late answer, a relist or a child's event can no longer bring it back. The
            # key is looked at once more: gone (dropped) or being deleted (its cleanup).
            cached = rt.parents.cache.get(*key)
            uid = str(meta_of(parent).get("uid") or "")
            if cached is not None and str(meta_of(cached).get("uid") or "") == uid and not (
                    meta_of(cached).get("deletionTimestamp")):
                rt.parents.cache.forget(cached, uid=uid)
            rt.stats.triggers["parent-went-away"] += 1
            rt.queue.add(key)
            rt.metrics.observe_reconcile(result="success", seconds=seconds)
            log.info("the parent went away during its reconcile; nothing more is written for it")
            return
        if result is not None and result.namespace_terminating:
            # final: no retry, no resync; the parent goes with its namespace
            log.info("namespace is being deleted; the parent is left alone until it is gone")
            rt.queue.forget(key)
            rt.schedule.remove(key)
            rt.metrics.observe_reconcile(result="success", seconds=seconds)
            return
        if result is not None:
            rt.stats.writes += result.writes
            rt.informers.use(key, types_of(result))
        if result is not None and result.ok:
            rt.queue.forget(key)
            rt.schedule.reconciled(key, parent, at=rt.clock.time())
            rt.resync.kick()
            if result.requeue_after is not None:
                rt.queue.add_after(key, result.requeue_after)
                rt.metrics.observe_reconcile(result="requeue_after", seconds=seconds)
            else:
                rt.metrics.observe_reconcile(result="success", seconds=seconds)
            if (changes := describe_changes(result)) is not None:  # silent when nothing changed
                log.info("reconciled: %s", changes)
            log.debug("reconciled in %.3fs: %d writes", seconds, result.writes)
            return
        rt.stats.failures[key] += 1
        rt.metrics.observe_reconcile(result="error", seconds=seconds)
        retry_after = getattr(error, "retry_after", None) or 0.0
        if result is not None:
            retry_after = max([retry_after, *(e.retry_after or 0.0 for e in result.errors)])
        if rt.schedule.policy.retry_failed_by_backoff:
            delay = rt.queue.add_rate_limited(key, at_least=retry_after)
            rt.schedule.suspend(key)
        else:  # failures wait for the next event or the periodic resync
            rt.schedule.reconciled(key, parent, at=rt.clock.time())
            due = rt.schedule.due_at(key)
            delay = 0.0 if due is None else due - rt.clock.time()
            rt.resync.kick()
        reason = str(error) if error is not None else "; ".join(
            [f"{e.ref}: {e.message}" for e in (result.errors if result else ())]
            + ([result.status_error] if result is not None and result.status_error else [])
        )
        log.warning("reconcile failed (%s); retrying in %.3fs", reason, delay)


def types_of(result: ParentResult) -> set[TypeKey]:
    """The child types a reconcile declared (built, pruned or failed), for its informers."""
    types = {(r.ref.api_version, r.ref.kind) for r in (*result.children, *result.pruned)}
    types |= {(e.ref.api_version, e.ref.kind) for e in result.errors
              if e.ref.api_version and e.ref.kind != "builder"}
    return types
