"""The driver's work queue and rate limiters, modelled on client-go's ``workqueue``.

Every reason to reconcile a parent (an event, a due resync, a retry) becomes ``add`` of the parent's
key. The queue guarantees what DESIGN.md section 6 asks: a key waiting is queued once (bursts
coalesce); a key is never handed to two workers at once (a key added while processing is queued
again when its worker calls ``done``); delayed adds (``add_after``) keep the earliest time per key;
``add_rate_limited`` delays by the per-key exponential backoff (5 ms to 5 min, jittered), by the
global token bucket, and at least by a server's ``Retry-After``. All waiting goes through the
injected ``Clock``. Workers themselves live in ``reconciler._driver.workers``; this module only
queues.
"""

from __future__ import annotations

import heapq
import random
import threading
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from reconciler._base.clocks import Clock, RealClock
from reconciler._base.errors import ReconcilerUsageError

__all__ = [
    "ExponentialBackoff",
    "MaxOfRateLimiters",
    "QueueObserver",
    "RateLimiter",
    "TokenBucket",
    "WorkQueue",
    "default_rate_limiter",
]

K = TypeVar("K", bound=Hashable)


class RateLimiter(Protocol):
    """Decides how long a key waits before its next retry."""

    def when(self, key: Hashable) -> float:
        """The delay in seconds for this retry of ``key`` (and count the retry)."""
        ...

    def forget(self, key: Hashable) -> None:
        """``key`` succeeded: reset its history."""
        ...

    def retries(self, key: Hashable) -> int:
        """How many retries of ``key`` were counted since it last succeeded."""
        ...


class ExponentialBackoff:
    """Per-key delay ``base * 2**failures`` capped at ``cap``, with up to ``jitter`` extra.

    The defaults are DESIGN.md's: 5 ms to 5 min. Jitter only lengthens a delay (never past the
    cap), so parents failing together spread out instead of retrying in lockstep.
    """

    def __init__(
        self,
        *,
        base: float = 0.005,
        cap: float = 300.0,
        jitter: float = 0.1,
        rng: random.Random | None = None,
    ) -> None:
        if base <= 0 or cap < base:
            raise ReconcilerUsageError(f"backoff needs 0 < base <= cap, got base={base} cap={cap}")
        if not 0 <= jitter <= 1:
            raise ReconcilerUsageError(f"jitter is a fraction in [0, 1], got {jitter}")
        self.base = base
        self.cap = cap
        self.jitter = jitter
        self._rng = rng or random.Random()
        self._failures: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def when(self, key: Hashable) -> float:
        """``base * 2**n`` for the n-th retry, jittered, capped."""
        with self._lock:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
            raw = self.cap if failures >= 64 else min(self.cap, self.base * 2.0**failures)
            return min(self.cap, raw * (1.0 + self.jitter * self._rng.random()))

    def forget(self, key: Hashable) -> None:
        """Reset ``key`` to the base delay."""
        with self._lock:
            self._failures.pop(key, None)

    def retries(self, key: Hashable) -> int:
        """Failures counted for ``key``."""
        with self._lock:
            return self._failures.get(key, 0)


class TokenBucket:
    """A global limit: ``rate`` retries per second with bursts of ``burst``, over all keys.

    ``when`` reserves a token and returns how long the caller must wait for it, as
    ``golang.org/x/time/rate``'s ``Reserve().Delay()`` does for client-go's bucket limiter.
    """

    def __init__(self, *, rate: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        if rate <= 0 or burst < 1:
            raise ReconcilerUsageError(
                f"token bucket needs rate > 0 and burst >= 1, got {rate}, {burst}"
            )
        self.rate = rate
        self.burst = burst
        self._clock = clock or RealClock()
        self._tokens = float(burst)
        self._last = self._clock.monotonic()
        self._lock = threading.Lock()

    def when(self, key: Hashable) -> float:
        """Reserve one token; the wait until it is available (0 while the burst lasts)."""
        with self._lock:
            now = self._clock.monotonic()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.rate)
            self._last = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def forget(self, key: Hashable) -> None:
        """The bucket keeps no per-key state."""

    def retries(self, key: Hashable) -> int:
        """The bucket keeps no per-key state."""
        return 0


class MaxOfRateLimiters:
    """The longest delay of several limiters (client-go's ``MaxOfRateLimiter``)."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ReconcilerUsageError("MaxOfRateLimiters needs at least one limiter")
        self._limiters = limiters

    def when(self, key: Hashable) -> float:
        """The maximum of every limiter's delay (each counts the retry)."""
        return max(limiter.when(key) for limiter in self._limiters)

    def forget(self, key: Hashable) -> None:
        """Forget ``key`` in every limiter."""
        for limiter in self._limiters:
            limiter.forget(key)

    def retries(self, key: Hashable) -> int:
        """The largest retry count any limiter keeps."""
        return max(limiter.retries(key) for limiter in self._limiters)


def default_rate_limiter(clock: Clock | None = None) -> RateLimiter:
    """Per-key backoff 5 ms..5 min together with a 10 qps / burst 100 global bucket."""
    return MaxOfRateLimiters(ExponentialBackoff(), TokenBucket(clock=clock))


class QueueObserver(Protocol):
    """What the queue reports for metrics (``reconciler._base.metrics`` implements it)."""

    def on_add(self) -> None:
        """A key was added (coalesced or not)."""
        ...

    def on_depth(self, depth: int) -> None:
        """Keys ready and waiting for a worker."""
        ...

    def on_dequeue(self, waited: float) -> None:
        """A key was handed to a worker after waiting ``waited`` seconds in the queue."""
        ...

    def on_done(self, worked: float) -> None:
        """A worker finished a key after ``worked`` seconds."""
        ...

    def on_retry(self) -> None:
        """A key was re-added through the rate limiter."""
        ...


class WorkQueue(Generic[K]):
    """A deduplicating, delaying, rate-limited queue of keys for a bounded pool of workers.

    ``get`` hands a key to one worker; that worker must call ``done(key)``. Until then the key is
    not handed out again: adds meanwhile mark it dirty and it is re-queued by ``done``.
    """

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        rate_limiter: RateLimiter | None = None,
        observer: QueueObserver | None = None,
    ) -> None:
        self._clock = clock or RealClock()
        self._limiter = rate_limiter or default_rate_limiter(self._clock)
        self._observer = observer
        self._cond = threading.Condition()
        self._ready: list[K] = []  # FIFO of dirty keys not being processed
        self._ready_head = 0
        self._dirty: dict[K, float] = {}  # key -> time it was queued
        self._processing: dict[K, float] = {}  # key -> time a worker took it
        self._waiting: list[tuple[float, int, K]] = []  # heap of (ready_at, seq, key)
        self._waiting_at: dict[K, float] = {}  # earliest ready_at per delayed key
        self._seq = 0
        self._shutting_down = False

    # --- adding -------------------------------------------------------------------------------

    def add(self, key: K) -> None:
        """Queue ``key`` now; a no-op if it is already queued (bursts coalesce)."""
        with self._cond:
            self._add_locked(key)

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds; an earlier pending time for it wins."""
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutting_down:
                return
            ready_at = self._clock.monotonic() + delay
            current = self._waiting_at.get(key)
            if current is not None and current <= ready_at:
                return
            self._waiting_at[key] = ready_at
            self._seq += 1
            heapq.heappush(self._waiting, (ready_at, self._seq, key))
            self._cond.notify_all()

    def add_rate_limited(self, key: K, *, at_least: float = 0.0) -> float:
        """Retry ``key`` after its backoff (and at least ``at_least``, e.g. Retry-After).

        Returns the delay chosen.
        """
        delay = max(self._limiter.when(key), at_least)
        if self._observer is not None:
            self._observer.on_retry()
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """``key`` succeeded: its next failure starts again at the base backoff."""
        self._limiter.forget(key)

    def retries(self, key: K) -> int:
        """Retries counted for ``key`` since it last succeeded."""
        return self._limiter.retries(key)

    # --- taking -------------------------------------------------------------------------------

    def get(self, timeout: float | None = None) -> K | None:
        """The next ready key, blocking up to ``timeout``; ``None`` on timeout or shutdown."""
        with self._cond:
            deadline = None if timeout is None else self._clock.monotonic() + timeout
            while True:
                self._promote_due_locked()
                if self._ready_head < len(self._ready):
                    return self._take_locked()
                if self._shutting_down:
                    return None
                now = self._clock.monotonic()
                if deadline is not None and now >= deadline:
                    return None
                wake = self._waiting[0][0] - now if self._waiting else None
                if deadline is not None:
                    wake = deadline - now if wake is None else min(wake, deadline - now)
                self._clock.wait(self._cond, wake)

    def done(self, key: K) -> None:
        """The worker holding ``key`` finished; a key re-added meanwhile is queued again."""
        with self._cond:
            started = self._processing.pop(key, None)
            if started is not None and self._observer is not None:
                self._observer.on_done(self._clock.monotonic() - started)
            if key in self._dirty:
                self._ready.append(key)
                self._report_depth_locked()
                self._cond.notify()

    # --- lifecycle and introspection ----------------------------------------------------------

    def shutdown(self) -> None:
        """Stop handing out keys: ``get`` returns ``None`` once the ready keys are drained."""
        with self._cond:
            self._shutting_down = True
            self._cond.notify_all()

    @property
    def shutting_down(self) -> bool:
        """Whether ``shutdown`` was called."""
        with self._cond:
            return self._shutting_down

    def __len__(self) -> int:
        """Keys ready for a worker (not delayed, not being processed)."""
        with self._cond:
            self._promote_due_locked()
            return len(self._ready) - self._ready_head

    @property
    def delayed(self) -> int:
        """Keys waiting for their delay to pass."""
        with self._cond:
            return len(self._waiting_at)

    @property
    def next_due(self) -> float | None:
        """Seconds (on the queue's clock) until the earliest delayed key is due, 0 when one is
        overdue; None when no key waits (a test's quiet point waits out a retry due soon)."""
        with self._cond:
            if not self._waiting_at:
                return None
            return max(0.0, min(self._waiting_at.values()) - self._clock.monotonic())

    @property
    def processing(self) -> int:
        """Keys currently held by workers."""
        with self._cond:
            return len(self._processing)

    def is_processing(self, key: K) -> bool:
        """Whether a worker currently holds ``key``."""
        with self._cond:
            return key in self._processing

    def is_pending(self, key: K) -> bool:
        """Whether ``key`` is ready to be taken or a worker holds it (not: waiting for a time)."""
        with self._cond:
            return key in self._dirty or key in self._processing

    # --- internals ----------------------------------------------------------------------------

    def _add_locked(self, key: K) -> None:
        if self._shutting_down:
            return
        if self._observer is not None:
            self._observer.on_add()
        if key in self._dirty:
            return
        self._dirty[key] = self._clock.monotonic()
        if key in self._processing:
            return  # queued again by done()
        self._ready.append(key)
        self._report_depth_locked()
        self._cond.notify()

    def _promote_due_locked(self) -> None:
        now = self._clock.monotonic()
        while self._waiting and self._waiting[0][0] <= now:
            ready_at, _, key = heapq.heappop(self._waiting)
            if self._waiting_at.get(key) != ready_at:
                continue  # superseded by an earlier time
            del self._waiting_at[key]
            self._add_locked(key)

    def _take_locked(self) -> K:
        key = self._ready[self._ready_head]
        self._ready_head += 1
        if self._ready_head > 1024 and self._ready_head * 2 > len(self._ready):
            del self._ready[: self._ready_head]
            self._ready_head = 0
        queued = self._dirty.pop(key)
        now = self._clock.monotonic()
        self._processing[key] = now
        if self._observer is not None:
            self._observer.on_dequeue(now - queued)
        self._report_depth_locked()
        return key

    def _report_depth_locked(self) -> None:
        if self._observer is not None:
            self._observer.on_depth(len(self._ready) - self._ready_head)
