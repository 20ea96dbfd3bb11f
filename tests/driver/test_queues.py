"""The work queue: deduplication, one key per worker, delays, backoff, rate limits, shutdown."""

from __future__ import annotations

import random
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from reconciler._workqueue.queues import (
    ExponentialBackoff,
    MaxOfRateLimiters,
    TokenBucket,
    WorkQueue,
)
from reconciler.testing import VirtualClock


def _queue(clock: VirtualClock) -> WorkQueue[str]:
    limiter = MaxOfRateLimiters(
        ExponentialBackoff(jitter=0.0), TokenBucket(rate=1000, burst=1000, clock=clock)
    )
    return WorkQueue(clock=clock, rate_limiter=limiter)


def test_a_burst_of_adds_for_one_key_is_handed_out_once() -> None:
    queue = _queue(VirtualClock())
    for _ in range(1000):
        queue.add("ns/a")
    assert queue.get(timeout=0) == "ns/a"
    assert queue.get(timeout=0) is None


def test_a_key_added_while_processing_is_not_handed_to_a_second_worker() -> None:
    queue = _queue(VirtualClock())
    queue.add("ns/a")
    assert queue.get(timeout=0) == "ns/a"
    queue.add("ns/a")
    queue.add("ns/a")
    assert queue.get(timeout=0) is None  # held by the first worker
    queue.done("ns/a")
    assert queue.get(timeout=0) == "ns/a"  # queued again, once
    queue.done("ns/a")
    assert queue.get(timeout=0) is None


def test_a_key_is_pending_while_ready_or_held_not_while_waiting_for_its_time() -> None:
    clock = VirtualClock()
    queue = _queue(clock)
    queue.add_after("a", 10.0)
    assert not queue.is_pending("a")  # due later: warming its caches is not left to a worker
    queue.add("b")
    assert queue.is_pending("b")
    assert queue.get(timeout=0) == "b"
    assert queue.is_pending("b")
    queue.done("b")
    assert not queue.is_pending("b")
    clock.advance(10.0)
    assert queue.get(timeout=0) == "a"
    assert queue.is_pending("a")


def test_keys_come_out_in_the_order_they_were_first_added() -> None:
    queue = _queue(VirtualClock())
    for key in ["b", "a", "b", "c", "a"]:
        queue.add(key)
    assert [queue.get(timeout=0) for _ in range(3)] == ["b", "a", "c"]


def test_add_after_waits_for_the_virtual_delay_and_the_earliest_time_wins() -> None:
    clock = VirtualClock()
    queue = _queue(clock)
    queue.add_after("a", 10.0)
    queue.add_after("a", 30.0)  # later: ignored
    clock.advance(9.9)
    assert queue.get(timeout=0) is None
    clock.advance(0.2)
    assert queue.get(timeout=0) == "a"
    queue.done("a")
    clock.advance(30)
    assert queue.get(timeout=0) is None  # the superseded entry does not fire


def test_backoff_doubles_from_5ms_to_a_5_minute_cap_and_resets_on_forget() -> None:
    backoff = ExponentialBackoff(jitter=0.0)
    delays = [backoff.when("k") for _ in range(20)]
    assert delays[:4] == pytest.approx([0.005, 0.01, 0.02, 0.04])
    assert max(delays) == 300.0
    assert delays[-1] == 300.0
    assert backoff.retries("k") == 20
    backoff.forget("k")
    assert backoff.when("k") == pytest.approx(0.005)


@given(failures=st.integers(min_value=0, max_value=200), seed=st.integers())
def test_jittered_backoff_stays_within_its_bounds(failures: int, seed: int) -> None:
    backoff = ExponentialBackoff(rng=random.Random(seed))
    for _ in range(failures):
        backoff.when("k")
    delay = backoff.when("k")
    nominal = min(300.0, 0.005 * 2.0 ** min(failures, 64))
    assert nominal <= delay <= min(300.0, nominal * 1.1)


def test_backoff_is_per_key() -> None:
    backoff = ExponentialBackoff(jitter=0.0)
    for _ in range(5):
        backoff.when("a")
    assert backoff.when("b") == pytest.approx(0.005)


def test_token_bucket_limits_retries_over_all_keys() -> None:
    clock = VirtualClock()
    bucket = TokenBucket(rate=10, burst=2, clock=clock)
    assert [bucket.when(k) for k in "ab"] == [0.0, 0.0]
    assert bucket.when("c") == pytest.approx(0.1)
    assert bucket.when("d") == pytest.approx(0.2)
    clock.advance(10)
    assert bucket.when("e") == 0.0


def test_retry_after_is_honoured_over_a_shorter_backoff() -> None:
    clock = VirtualClock()
    queue = _queue(clock)
    delay = queue.add_rate_limited("a", at_least=7.0)
    assert delay == 7.0
    clock.advance(6.9)
    assert queue.get(timeout=0) is None
    clock.advance(0.2)
    assert queue.get(timeout=0) == "a"


def test_rate_limited_retries_back_off_until_forgotten() -> None:
    clock = VirtualClock()
    queue = _queue(clock)
    delays = [queue.add_rate_limited("a") for _ in range(3)]
    assert delays == pytest.approx([0.005, 0.01, 0.02])
    assert queue.retries("a") == 3
    queue.forget("a")
    assert queue.retries("a") == 0


def test_a_blocked_get_wakes_when_virtual_time_reaches_a_delayed_key() -> None:
    clock = VirtualClock()
    queue = _queue(clock)
    queue.add_after("a", 60.0)
    got: list[str | None] = []
    worker = threading.Thread(target=lambda: got.append(queue.get()))
    worker.start()
    assert clock.wait_for_waiters(1)
    clock.advance(60.0)
    worker.join(timeout=5)
    assert got == ["a"]


def test_shutdown_releases_blocked_workers_and_drops_later_adds() -> None:
    queue = WorkQueue[str]()
    results: list[str | None] = []
    workers = [threading.Thread(target=lambda: results.append(queue.get())) for _ in range(3)]
    for worker in workers:
        worker.start()
    time.sleep(0.05)
    queue.shutdown()
    for worker in workers:
        worker.join(timeout=5)
    assert results == [None, None, None]
    queue.add("late")
    assert queue.get(timeout=0) is None


def test_concurrent_workers_never_hold_the_same_key() -> None:
    queue = WorkQueue[int]()
    holders: dict[int, int] = {}
    overlap: list[int] = []
    processed = [0]
    lock = threading.Lock()

    def work() -> None:
        while (key := queue.get()) is not None:
            with lock:
                holders[key] = holders.get(key, 0) + 1
                if holders[key] > 1:
                    overlap.append(key)
            time.sleep(0.0005)
            with lock:
                holders[key] -= 1
                processed[0] += 1
            queue.done(key)

    workers = [threading.Thread(target=work) for _ in range(4)]
    for worker in workers:
        worker.start()
    for i in range(2000):
        queue.add(i % 5)
    deadline = time.monotonic() + 5
    while (len(queue) or queue.processing) and time.monotonic() < deadline:
        time.sleep(0.01)
    queue.shutdown()
    for worker in workers:
        worker.join(timeout=5)
    assert overlap == []
    assert 5 <= processed[0] < 2000  # bursts coalesced


class QueueMachine(RuleBasedStateMachine):
    """Random adds, delays, takes, completions and clock moves against a model of the queue."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = VirtualClock()
        self.queue = _queue(self.clock)
        self.held: set[str] = set()
        self.owed: set[str] = set()  # keys added (and due) since they were last handed out
        self.delayed: dict[str, float] = {}  # key -> earliest due time (virtual)

    keys = st.sampled_from(["a", "b", "c", "d"])

    @rule(key=keys)
    def add(self, key: str) -> None:
        self.queue.add(key)
        self.owed.add(key)

    @rule(key=keys, delay=st.floats(0.001, 5.0))
    def add_after(self, key: str, delay: float) -> None:
        self.queue.add_after(key, delay)
        due = self.clock.monotonic() + delay
        self.delayed[key] = min(due, self.delayed.get(key, due))

    @rule(seconds=st.floats(0.0, 3.0))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        now = self.clock.monotonic()
        for key, due in list(self.delayed.items()):
            if due <= now:
                self.owed.add(key)
                del self.delayed[key]

    @rule()
    def take(self) -> None:
        key = self.queue.get(timeout=0)
        if key is None:
            assert self.owed <= self.held  # nothing owed is left waiting for a free worker
            return
        assert key not in self.held  # never two workers on one key
        assert key in self.owed  # nothing is handed out that was not asked for
        self.held.add(key)
        self.owed.discard(key)

    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        if self.held:
            key = data.draw(st.sampled_from(sorted(self.held)))
            self.held.discard(key)
            self.queue.done(key)

    @invariant()
    def ready_keys_are_owed_and_unique(self) -> None:
        assert len(self.queue) <= len(self.owed - self.held)


TestQueueMachine = QueueMachine.TestCase
