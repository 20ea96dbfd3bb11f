"""Settling: what happens to a parent's key after a worker's turn on it, as a pure function.

A worker's turn on a key (``reconciler._driver.workers``) has two steps. The reconcile step does the
I/O (drain acknowledgement, adoption, cleanup, the reconcile itself) and describes what came of
it as an ``Outcome``, a frozen value; ``settle(outcome)`` turns that into a ``Settlement``: the
queue (forget the backoff, add now, after a delay, or rate-limited), the resync schedule
(reconciled, suspended, removed), the child informers (used, released), the counters, the
metric and the log line. The worker executes the settlement and decides nothing.

The policy, which ``tests/driver/test_settling.py`` checks as properties:

- success forgets the backoff and reschedules the parent (plus a requested ``requeue_after``);
- a failure is counted and never forgotten silently: it is retried by backoff (at least its
  ``Retry-After``) or, with ``retry_failed_by_backoff=False``, left to the resync, and the log
  says when it is looked at next;
- a parent gone or being deleted is dropped from the schedule, the queue's backoff and the
  informers; one that went away *during* its reconcile is dropped from the parent cache and
  looked at once more (then it is gone, or its cleanup runs);
- a parent whose namespace is being deleted is neither retried nor resynced;
- a pending cleanup is retried with backoff; its line is a WARNING only when the cleanup failed
  or is stuck (``CleanupOutcome.alarming``), DEBUG while it merely waits;
- a permanent failure (``PermanentError``, ``InvalidSpecError``, a missing input: its
  ``Stalled`` condition says why) is not retried: it waits for the parent's next change (or
  resync), logged at WARNING once, when its status changed, and at DEBUG after that; what the
  rest of the reconcile asked to be looked at later (a repair held back by contention, a child
  not ready yet) is still looked at when due (``requeue_after``: the failure was dropping it,
  and a contested child beside a missing input was never repaired; issue 38's machine).

It receives only the outcome (plain values: no client, no parent object, no runtime), so that
the policy can be tested on its own; it imports nothing of the reconciler.
"""

from __future__ import annotations

import logging

import attrs

__all__ = ["Outcome", "Settlement", "settle"]

_TypeKey = tuple[str, str]


@attrs.frozen(kw_only=True)
class Outcome:
    """What a worker's turn on one key came to.

    Either no reconcile ran, for exactly one of these reasons: ``drain_refused`` (acknowledging
    the shard's drain mark failed), ``adopted`` (a moved-in parent's children were adopted and
    it is not due: its periodic resync comes when due), ``cleanup_pending`` (the cleanup
    finalizer's work is not done; why), ``gone`` (not in the parent cache, or just released to
    another shard), ``deleting`` (being deleted, its cleanup done); or ``reconciled``, with the
    reconcile's facts below (``types`` is ``None`` when the reconcile raised).
    """

    drain_refused: bool = False
    adopted: bool = False
    cleanup_pending: str | None = None
    cleanup_alarming: bool = False
    """The pending cleanup failed, or has waited past its bound (a WARNING; else DEBUG)."""
    gone: bool = False
    deleting: bool = False
    held: bool = False
    """Left alone by a gradual rollout (``reconciler._driver.rollouts``): queued again later."""
    reconciled: bool = False
    ok: bool = False
    went_away: bool = False
    """The parent went away during its reconcile (a write answered 404)."""
    namespace_terminating: bool = False
    requeue_after: float | None = None
    retry_after: float = 0.0
    """The longest ``Retry-After`` the failures carried (0: none)."""
    retry_failed_by_backoff: bool = True
    """The resync policy's choice for failures (else they wait for the resync)."""
    reason: str = ""
    """Why the reconcile failed."""
    permanent: bool = False
    """It failed only for permanent errors: no retry helps until the parent changes."""
    cause: tuple[str, ...] | None = None
    """The one cause every failure shares (a kind that cannot be listed), whose WARNING
    lines are rate-limited across parents (``reconciler._base.ratelimit``); None: its own."""
    status_written: bool = False
    """The reconcile wrote the parent's status (it changed)."""
    types: frozenset[_TypeKey] | None = None
    """The child types the reconcile declared (None: it raised, nothing declared)."""
    writes: int = 0
    changes: str | None = None
    """What a successful reconcile changed, for the log (None: nothing)."""
    seconds: float = 0.0

    def __attrs_post_init__(self) -> None:
        reasons = (self.drain_refused, self.adopted, self.cleanup_pending is not None,
                   self.gone, self.deleting, self.held)
        if sum(reasons) != (0 if self.reconciled else 1):
            raise ValueError("an outcome either reconciled or did not for exactly one reason "
                             "(drain refused, adopted, cleanup pending, gone, deleting)")


@attrs.frozen(kw_only=True)
class Settlement:
    """What the worker does with the key after its turn, in this order: counters, informers
    used, the parent cache, the queue's backoff, the schedule, the informers released, the
    queue, the resync timer, the metric, the log."""

    writes: int = 0
    """Added to the runtime's write count."""
    use_types: frozenset[_TypeKey] | None = None
    """The child types the parent needs now (None: leave its informers as they are)."""
    count_failure: bool = False
    trigger: str | None = None
    """A cause counted in the runtime's triggers."""
    forget_cached: bool = False
    """Drop the parent from the parent cache (same uid, not being deleted)."""
    forget_backoff: bool = False
    unschedule: bool = False
    reschedule: bool = False
    """Record a reconcile now: the next periodic resync moves to its grid point."""
    suspend: bool = False
    """Off the resync timer while the backoff retries it."""
    release: bool = False
    """Release its child informers, its reused builds and its last start."""
    requeue_now: bool = False
    requeue_after: float | None = None
    backoff: bool = False
    """Add it rate-limited (exponential backoff), after at least ``backoff_at_least``."""
    backoff_at_least: float = 0.0
    kick: bool = False
    """Wake the resync timer (the schedule changed)."""
    metric: str | None = None
    """The reconcile's result for ``observe_reconcile`` (None: no reconcile ran)."""
    seconds: float = 0.0
    level: int = logging.INFO
    message: str | None = None
    report_delay: bool = False
    """The message ends with when the key is looked at next."""
    detail: str | None = None
    """A debug line after the message."""
    cause: tuple[str, ...] | None = None
    """A WARNING message's cause, shared by other parents: one WARNING per cause per interval
    (the worker lowers the others to DEBUG)."""


def settle(outcome: Outcome) -> Settlement:
    """The policy: what the worker does with the key after a turn that came to ``outcome``."""
    if not outcome.reconciled:
        return _without_reconcile(outcome)
    seconds = outcome.seconds
    if outcome.went_away:
        # The cache missed (or has not yet seen) the deletion: forgotten now, so that a late
        # answer, a relist or a child's event cannot bring it back; the key is looked at once
        # more: gone (dropped) or being deleted (its cleanup).
        return Settlement(
            forget_cached=True, trigger="parent-went-away", requeue_now=True,
            metric="success", seconds=seconds,
            message="the parent went away during its reconcile; nothing more is written for it",
        )
    if outcome.namespace_terminating:  # final: no retry, no resync; it goes with its namespace
        return Settlement(
            forget_backoff=True, unschedule=True, metric="success", seconds=seconds,
            message="namespace is being deleted; the parent is left alone until it is gone",
        )
    if outcome.ok:
        return Settlement(
            writes=outcome.writes, use_types=outcome.types,
            forget_backoff=True, reschedule=True, kick=True, requeue_after=outcome.requeue_after,
            metric="success" if outcome.requeue_after is None else "requeue_after",
            seconds=seconds,
            message=None if outcome.changes is None else f"reconciled: {outcome.changes}",
            detail=f"reconciled in {seconds:.3f}s: {outcome.writes} writes",
        )
    if outcome.permanent:
        return Settlement(
            writes=outcome.writes, use_types=outcome.types, count_failure=True,
            forget_backoff=True, reschedule=True, kick=True, metric="error", seconds=seconds,
            requeue_after=outcome.requeue_after,  # the other children's timers, not a retry
            level=logging.WARNING if outcome.status_written else logging.DEBUG,
            message=f"reconcile stalled, not retried until the parent changes ({outcome.reason})",
        )
    # A failure: retried by backoff (suspended from the timer meanwhile), or it waits for the
    # next event or the periodic resync.
    by_backoff = outcome.retry_failed_by_backoff
    return Settlement(
        writes=outcome.writes, use_types=outcome.types, count_failure=True,
        backoff=by_backoff, backoff_at_least=outcome.retry_after if by_backoff else 0.0,
        suspend=by_backoff, reschedule=not by_backoff, kick=not by_backoff,
        metric="error", seconds=seconds, level=logging.WARNING,
        message=f"reconcile failed ({outcome.reason})", report_delay=True, cause=outcome.cause,
    )


def _without_reconcile(outcome: Outcome) -> Settlement:
    if outcome.drain_refused:  # the next event (or this retry) tries the acknowledgement again
        return Settlement(backoff=True)
    if outcome.held:  # the rollout queues it again when its batch comes (or the gate opens)
        return Settlement()
    if outcome.adopted:  # adopted; its periodic resync comes when due
        return Settlement(kick=True)
    if outcome.cleanup_pending is not None:  # the parent's Cleanup condition says why
        # Waiting (dependents first, children's own finalizers) is no failure: DEBUG (the
        # cleanup logged its reason at INFO when it changed); WARNING when it failed or stuck.
        level = logging.WARNING if outcome.cleanup_alarming else logging.DEBUG
        return Settlement(backoff=True, level=level, report_delay=True,
                          message=f"cleanup pending ({outcome.cleanup_pending})")
    state = "is being deleted" if outcome.deleting else "is gone (or moved)"
    return Settlement(
        unschedule=True, forget_backoff=True, release=True,
        message=f"parent {state}; its children are collected by their owner references",
    )
