"""Fencing after a lost lease (issue 12, defect 1): no write once the lease may have expired.

A leader whose renews stop (the Lease taken over by another identity, or its Lease requests
failing as in a partition) while a reconcile is in flight, and whose clock then jumps past the
lease (a SIGSTOP or a long GC pause), must send no further write: no child, no status, no
Event, no heartbeat rewrite and no lease release on its way out. The writes are counted by the
embedded server itself; the clock is a ``VirtualClock``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from builders import ResourceBuilder
from reconciler import KubernetesClient, Reporting
from reconciler._base.clocks import RealClock
from reconciler._base.errors import LeadershipLostError, ReconcilerError
from reconciler._driver.operators import Operator
from reconciler._driver.runtime import OperatorRuntime
from reconciler._leadership.election import LeaderElection
from reconciler._leadership.fencing import WriteFence
from reconciler.embedded import Faults
from reconciler.testing import VirtualClock, wait_synced
from tests.driver.conftest import child_data, thing, wait_until
from tests.driver.sample_operator import API_VERSION
from tests.driver.sample_operator import build as base

WRITES = ("create", "update", "patch", "delete", "deletecollection")
LEASE = "coordination.k8s.io/v1"


def writes(kube_api: Any) -> int:
    """Writes the server has answered so far (every client of the session's server)."""
    counts = kube_api.request_counts()
    return sum(counts.get(verb, 0) for verb in WRITES)


class Gate:
    """Holds a reconcile inside its builder until the test opens it."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.open = threading.Event()

    def build(self, parent: Any) -> Sequence[ResourceBuilder]:
        """The sample builder, after waiting (real time) for the gate to open."""
        if (parent.get("spec") or {}).get("value") == "hold":
            self.entered.set()
            self.open.wait(30)
        return base(parent)


@pytest.fixture
def gate() -> Iterator[Gate]:
    """A gate that is opened at the end of the test whatever happened."""
    value = Gate()
    yield value
    value.open.set()


def start_leader(client: KubernetesClient, ns: str, gate: Gate,
                 clock: VirtualClock) -> OperatorRuntime:
    """A leading Thing operator with Events on, on ``clock``."""
    operator = Operator(
        api_version=API_VERSION, kind="Thing", namespace=ns, build=gate.build, name="fenced",
        leader_election=LeaderElection(namespace=ns), reporting=Reporting(events=True),
    )
    runtime = operator.start(client, clock=clock, identity="one")
    assert wait_synced(runtime, 10)
    assert wait_until(lambda: runtime.leading)
    return runtime


def hold_a_reconcile(client: KubernetesClient, ns: str, gate: Gate,
                     runtime: OperatorRuntime) -> None:
    """Converge one parent, then start a reconcile of a second and hold it in its builder."""
    client.create(thing(ns, "a", "first"))
    assert wait_until(lambda: child_data(client, ns, "a") == {"value": "first"})
    assert wait_until(lambda: runtime.idle, 5)
    client.create(thing(ns, "b", "hold"))
    assert gate.entered.wait(10)


def test_a_leader_whose_lease_was_taken_writes_nothing_after_the_fence(
    client: KubernetesClient, ns: str, gate: Gate, kube_api: Any
) -> None:
    clock = VirtualClock()
    runtime = start_leader(client, ns, gate, clock)
    try:
        hold_a_reconcile(client, ns, gate, runtime)
        lease = client.get(LEASE, "Lease", "fenced-leader", namespace=ns)
        assert lease["spec"]["holderIdentity"] == "one"
        taken = {**lease["spec"], "holderIdentity": "two"}
        client.replace({**lease, "spec": taken})  # another replica took it over
        before = writes(kube_api)
        clock.advance(16)  # the leader was paused past its 15 s lease
        gate.open.set()
        assert wait_until(lambda: runtime.finished, 10)  # it stepped down by itself
        assert writes(kube_api) == before  # no child, status, Event, heartbeat or release
        assert child_data(client, ns, "b") is None
        lease = client.get(LEASE, "Lease", "fenced-leader", namespace=ns)
        assert lease["spec"]["holderIdentity"] == "two"
        assert runtime.stats.failures[(ns, "b")] == 0  # stopped, not failed and backed off
        assert len(runtime.queue) == 0  # nothing requeued
    finally:
        runtime.stop(5)
    assert writes(kube_api) == before


def test_a_paused_leader_whose_renews_fail_writes_nothing_once_its_fence_is_past(
    client: KubernetesClient, ns: str, gate: Gate, kube_api: Any
) -> None:
    clock = VirtualClock()
    runtime = start_leader(client, ns, gate, clock)
    try:
        hold_a_reconcile(client, ns, gate, runtime)
        partition = Faults(error_rate=1.0, error_code=503,
                           resources={"leases.coordination.k8s.io"})
        with kube_api.faults(partition):
            before = writes(kube_api)
            clock.advance(16)  # paused past the 15 s lease; its renews fail meanwhile
            gate.open.set()
            assert wait_until(lambda: runtime.finished, 10)
            assert writes(kube_api) == before
        assert child_data(client, ns, "b") is None
        assert len(runtime.queue) == 0
    finally:
        runtime.stop(5)


def test_the_fence_opens_for_the_renew_deadline_from_when_the_renew_was_sent() -> None:
    clock = VirtualClock()
    fence = WriteFence(clock=clock, validity=10, identity="one")
    with pytest.raises(LeadershipLostError, match=r"one: refusing to patch x: .*never renewed"):
        fence.check("patch x")
    clock.advance(5)
    fence.renewed(sent_at=clock.monotonic() - 2)  # the answer came 2 s after the request
    assert fence.valid()
    clock.advance(7.9)
    fence.check("patch x")
    clock.advance(0.2)
    assert not fence.valid()
    with pytest.raises(LeadershipLostError, match=r"last renewed 10\.1s ago") as caught:
        fence.check("patch x")
    assert isinstance(caught.value, ReconcilerError)
    fence.renewed(sent_at=clock.monotonic())
    assert fence.valid()
    fence.revoke()
    assert not fence.valid()


def test_a_suspend_closes_the_fence_as_the_time_it_lasted_passes() -> None:
    """Issue 31, finding 3: the fence's clock must count a suspend. On a clock that jumps
    forward across it (as ``CLOCK_BOOTTIME`` does after a resume) the fence is closed at once."""
    clock = VirtualClock()
    fence = WriteFence(clock=clock, validity=10, identity="one")
    fence.renewed(sent_at=clock.monotonic())
    clock.advance(1)
    assert fence.valid()
    clock.advance(60)  # suspended for a minute: the clock jumps past the validity in one step
    assert not fence.valid()
    with pytest.raises(LeadershipLostError, match=r"last renewed 61\.0s ago"):
        fence.check("patch x")


@pytest.mark.skipif(not hasattr(time, "CLOCK_BOOTTIME"), reason="CLOCK_BOOTTIME is Linux's")
def test_the_real_clock_counts_a_suspend_that_clock_monotonic_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A suspend is simulated by the kernel's answer: ``CLOCK_BOOTTIME`` moves an hour ahead
    while ``CLOCK_MONOTONIC`` (stopped during a suspend) does not. The real clock's fence closes."""
    clock = RealClock()
    fence = WriteFence(clock=clock, validity=10, identity="one")
    fence.renewed(sent_at=clock.monotonic())
    assert fence.valid()
    real = time.clock_gettime

    def suspended(clock_id: int) -> float:
        return real(clock_id) + (3600.0 if clock_id == time.CLOCK_BOOTTIME else 0.0)

    monkeypatch.setattr(time, "clock_gettime", suspended)
    assert not fence.valid()
