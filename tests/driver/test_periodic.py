"""Periodic resync in virtual time against the embedded server: fires at the interval and not
before, resets on any reconcile, survives a restart, follows the ConfigMap, backs off failures."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from reconciler import KubernetesClient
from reconciler._driver.resync_loop import HeartbeatStore
from reconciler._driver.resyncs import DEFAULT_RESYNC_INTERVAL, Heartbeat, ResyncPolicy
from reconciler._driver.runtime import OperatorRuntime
from reconciler.embedded import EmbeddedApiServer, Faults
from reconciler.testing import VirtualClock, wait_idle
from tests.driver.conftest import child_data, make_operator, running, thing, wait_until
from tests.driver.sample_operator import API_VERSION
from tests.driver.sample_operator import build as base

HOUR = 3600.0
MERGE = "application/merge-patch+json"


def _count(runtime: OperatorRuntime, ns: str, name: str) -> int:
    return runtime.stats.reconciles[(ns, name)]


def _quiet(runtime: OperatorRuntime) -> None:
    """Let every thread react to the last clock move, then check nothing is left running."""
    time.sleep(0.2)
    assert wait_idle(runtime, 5, settle=0.1)


def _created_and_due(client: KubernetesClient, runtime: OperatorRuntime, ns: str) -> float:
    """Create Thing ``a``, wait for its first reconcile; its next due time."""
    client.create(thing(ns, "a"))
    assert wait_until(lambda: _count(runtime, ns, "a") == 1)
    _quiet(runtime)
    due = runtime.schedule.due_at((ns, "a"))
    assert due is not None
    return due


@pytest.mark.both_servers
def test_resync_fires_at_the_interval_and_not_before(client: KubernetesClient, ns: str) -> None:
    clock = VirtualClock()
    operator = make_operator(ns, resync=ResyncPolicy(interval="2h"))
    with running(operator, client, clock=clock) as runtime:
        due = _created_and_due(client, runtime, ns)
        assert clock.time() + HOUR < due <= clock.time() + 2 * HOUR  # half to one interval
        clock.advance(due - clock.time() - 1)
        _quiet(runtime)
        assert _count(runtime, ns, "a") == 1
        clock.advance(1)
        assert wait_until(lambda: _count(runtime, ns, "a") == 2)
        assert runtime.triggers()["resync"] == 1


@pytest.mark.both_servers
def test_an_event_driven_reconcile_resets_the_timer(client: KubernetesClient, ns: str) -> None:
    clock = VirtualClock()
    operator = make_operator(ns, resync=ResyncPolicy(interval="2h"))
    with running(operator, client, clock=clock) as runtime:
        first_due = _created_and_due(client, runtime, ns)
        clock.advance(HOUR)
        client.delete("v1", "ConfigMap", "a-cfg", namespace=ns)  # drift: repaired by the watch
        assert wait_until(lambda: _count(runtime, ns, "a") == 2)
        _quiet(runtime)
        second_due = runtime.schedule.due_at((ns, "a"))
        assert second_due == first_due + HOUR
        clock.advance(first_due - clock.time() + 1)
        _quiet(runtime)
        assert _count(runtime, ns, "a") == 2  # the old due time no longer fires
        clock.advance(second_due - clock.time())
        assert wait_until(lambda: _count(runtime, ns, "a") == 3)


def _two_parents_and_their_dues(
    client: KubernetesClient, runtime: OperatorRuntime, ns: str
) -> tuple[tuple[str, float], tuple[str, float]]:
    """Create Things ``p`` and ``q``; (name, due) of the one due first, then the other."""
    for name in ("p", "q"):
        client.create(thing(ns, name))
    assert wait_until(lambda: _count(runtime, ns, "p") == _count(runtime, ns, "q") == 1)
    _quiet(runtime)
    dues = sorted((runtime.schedule.due_at((ns, n)) or 0.0, n) for n in ("p", "q"))
    assert dues[0][0] + 2 < dues[1][0]
    return (dues[0][1], dues[0][0]), (dues[1][1], dues[1][0])


@pytest.mark.both_servers
def test_a_restart_reconciles_the_parents_whose_time_passed_while_down_and_no_other(
    client: KubernetesClient, ns: str
) -> None:
    clock = VirtualClock()
    operator = make_operator(ns, resync=ResyncPolicy(interval="2h"))
    with running(operator, client, clock=clock) as runtime:
        (missed, missed_due), (kept, kept_due) = _two_parents_and_their_dues(client, runtime, ns)
    assert runtime.stats.heartbeats >= 1  # at least the last word at stop
    client.create(thing(ns, "new"))  # while the operator is down
    clock.advance(missed_due - clock.time() + 1)  # the downtime spans one parent's due time
    with running(operator, client, clock=clock) as restarted:
        ok = wait_until(lambda: _count(restarted, ns, missed) == 1
                        and _count(restarted, ns, "new") == 1)
        assert ok, (restarted.stats, restarted.triggers())
        _quiet(restarted)
        assert _count(restarted, ns, kept) == 0  # no herd at start
        assert restarted.schedule.due_at((ns, kept)) == kept_due  # its schedule kept
        clock.advance(kept_due - clock.time())
        assert wait_until(lambda: _count(restarted, ns, kept) == 1)


@pytest.mark.both_servers
def test_a_restart_with_no_missed_time_reconciles_nothing_and_keeps_every_schedule(
    client: KubernetesClient, ns: str
) -> None:
    clock = VirtualClock()
    operator = make_operator(ns, resync=ResyncPolicy(interval="2h"))
    with running(operator, client, clock=clock) as runtime:
        (first, first_due), (second, second_due) = _two_parents_and_their_dues(client, runtime, ns)
        clock.advance(first_due - clock.time())  # a zero-write periodic resync of the first
        assert wait_until(lambda: _count(runtime, ns, first) == 2)
        _quiet(runtime)
        first_next = runtime.schedule.due_at((ns, first))
        assert first_next is not None
        assert first_next > second_due
    clock.advance(second_due - clock.time() - 1)  # down until just before the next due time
    with running(operator, client, clock=clock) as restarted:
        _quiet(restarted)
        assert restarted.stats.total == 0
        assert restarted.schedule.due_at((ns, second)) == second_due
        due = restarted.schedule.due_at((ns, first))
        assert due is not None
        assert clock.time() < due <= first_next
        clock.advance(1)
        assert wait_until(lambda: _count(restarted, ns, second) == 1)


@pytest.mark.both_servers
def test_the_watched_configmap_changes_the_interval_without_a_restart(
    client: KubernetesClient, ns: str
) -> None:
    clock = VirtualClock()
    operator = make_operator(ns, resync=ResyncPolicy(config_map=f"{ns}/optk-config"))
    with running(operator, client, clock=clock) as runtime:
        assert runtime.schedule.policy.interval == 10 * HOUR
        client.create(thing(ns, "a"))
        assert wait_until(lambda: _count(runtime, ns, "a") == 1)
        client.create({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "optk-config", "namespace": ns},
                       "data": {"resyncInterval": "30m"}})
        assert wait_until(lambda: runtime.schedule.policy.interval == 1800)
        due = runtime.schedule.due_at((ns, "a"))
        assert due is not None
        assert due <= clock.time() + 1800
        client.patch("v1", "ConfigMap", "optk-config", {"data": {"resyncInterval": "bogus"}},
                     patch_type=MERGE, namespace=ns)
        client.patch("v1", "ConfigMap", "optk-config", {"data": {"resyncInterval": "1h"}},
                     patch_type=MERGE, namespace=ns)
        assert wait_until(lambda: runtime.schedule.policy.interval == HOUR)
        client.delete("v1", "ConfigMap", "optk-config", namespace=ns)
        assert wait_until(lambda: runtime.schedule.policy.interval == 10 * HOUR)


@pytest.mark.both_servers
def test_the_resync_annotation_sets_one_parents_interval_within_bounds(
    client: KubernetesClient, ns: str
) -> None:
    clock = VirtualClock()
    operator = make_operator(ns, resync=ResyncPolicy(min_interval=600))
    with running(operator, client, clock=clock) as runtime:
        client.create(thing(ns, "fast", annotations={"optk.dev/resync-interval": "1s"}))
        assert wait_until(lambda: _count(runtime, ns, "fast") == 1)
        _quiet(runtime)
        due = runtime.schedule.due_at((ns, "fast"))
        assert due is not None
        assert clock.time() + 300 < due <= clock.time() + 600


def _failing(parent: Any) -> Any:
    if (parent.get("spec") or {}).get("fail"):
        raise RuntimeError("this parent cannot be built")
    return base(parent)


@pytest.mark.both_servers
def test_a_failing_parent_is_retried_by_backoff_not_by_the_timer(
    client: KubernetesClient, ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="optk.operator")
    clock = VirtualClock()
    operator = make_operator(ns, build=_failing, resync=ResyncPolicy(interval="1h"))
    with running(operator, client, clock=clock) as runtime:
        parent = thing(ns, "bad")
        parent["spec"]["fail"] = True
        client.create(parent)
        assert wait_until(lambda: runtime.stats.failures[(ns, "bad")] == 1)
        assert runtime.schedule.due_at((ns, "bad")) is None  # off the timer
        for _ in range(20):  # one virtual second: retries at 5, 10, 20, 40 ... ms
            clock.advance(0.05)
            time.sleep(0.02)
        _quiet(runtime)
        failures = runtime.stats.failures[(ns, "bad")]
        assert 4 <= failures <= 12, failures
        assert runtime.queue.retries((ns, "bad")) == failures
        failed = [r for r in caplog.records if "reconcile failed" in r.getMessage()]
        assert failed
        assert all(getattr(r, "parent", None) == f"{ns}/bad" for r in failed)
        assert all(r.getMessage().startswith(f"[{ns}/bad]") for r in failed)
        client.patch(API_VERSION, "Thing", "bad", {"spec": {"fail": None}}, patch_type=MERGE,
                     namespace=ns)
        assert wait_until(lambda: child_data(client, ns, "bad") is not None)
        assert wait_until(lambda: runtime.schedule.due_at((ns, "bad")) is not None)
        assert runtime.queue.retries((ns, "bad")) == 0


@pytest.mark.both_servers
def test_failures_can_wait_for_the_timer_instead(client: KubernetesClient, ns: str) -> None:
    clock = VirtualClock()
    policy = ResyncPolicy(interval=HOUR, retry_failed_by_backoff=False)
    operator = make_operator(ns, build=_failing, resync=policy)
    with running(operator, client, clock=clock) as runtime:
        parent = thing(ns, "bad")
        parent["spec"]["fail"] = True
        client.create(parent)
        assert wait_until(lambda: runtime.stats.failures[(ns, "bad")] == 1)
        clock.advance(60)
        _quiet(runtime)
        assert runtime.stats.failures[(ns, "bad")] == 1
        due = runtime.schedule.due_at((ns, "bad"))
        assert due is not None
        clock.advance(due - clock.time())
        assert wait_until(lambda: runtime.stats.failures[(ns, "bad")] == 2)


# embedded server only: fault injection (Faults) is its hook; a real one has none
def test_a_throttled_reconcile_waits_for_retry_after(
    client: KubernetesClient, ns: str, kube_api: Any
) -> None:
    clock = VirtualClock()
    throttle = Faults(throttle_rate=1.0, retry_after=30, verbs={"create"},
                      resources={"configmaps"})
    with running(make_operator(ns), client, clock=clock) as runtime:
        with kube_api.faults(throttle):
            client.create(thing(ns, "a", "x"))
            assert wait_until(lambda: runtime.stats.failures[(ns, "a")] == 1)
            for _ in range(29):  # the backoff alone would have retried within milliseconds
                clock.advance(1)
                time.sleep(0.005)
            _quiet(runtime)
            assert runtime.stats.failures[(ns, "a")] == 1
        clock.advance(1.5)
        assert wait_until(lambda: child_data(client, ns, "a") == {"value": "x"})


WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


@pytest.mark.both_servers
def test_a_steady_state_resync_at_the_default_interval_writes_only_the_heartbeat(
    client: KubernetesClient, ns: str, kube_api: Any
) -> None:
    """Counted by the server (on the real one from its audit log): a full periodic pass at the
    default 10 h makes no write but the operator's heartbeat (one Lease update per period, not
    per parent), no LIST and no GET but the heartbeat's."""
    clock = VirtualClock()
    names = [f"s{i}" for i in range(5)]
    embedded = isinstance(kube_api, EmbeddedApiServer)
    with running(make_operator(ns), client, clock=clock) as runtime:
        assert runtime.schedule.policy.interval == DEFAULT_RESYNC_INTERVAL
        for name in names:
            client.create(thing(ns, name))
        assert wait_until(lambda: all(_count(runtime, ns, n) == 1 for n in names))
        _quiet(runtime)
        before, beats = kube_api.request_counts(), runtime.stats.heartbeats
        detail = kube_api.request_breakdown() if embedded else {}
        clock.advance(DEFAULT_RESYNC_INTERVAL + 1)  # every parent's grid time passes once
        assert wait_until(lambda: all(_count(runtime, ns, n) == 2 for n in names))
        _quiet(runtime)
        after, heartbeats = kube_api.request_counts(), runtime.stats.heartbeats - beats
        detail_after = kube_api.request_breakdown() if embedded else {}
    assert runtime.triggers()["resync"] == len(names)
    spent = {verb: after[verb] - before.get(verb, 0) for verb in after}
    assert 1 <= heartbeats <= 2  # one beat as the clock moved (plus the last word at stop)
    assert sum(spent.get(verb, 0) for verb in WRITE_VERBS) == heartbeats, spent
    assert spent.get("list", 0) == 0, spent
    assert spent.get("get", 0) <= heartbeats, spent  # a beat may read its Lease, nothing else
    # the embedded server also says which resources: the Lease alone
    delta = {key: n - detail.get(key, 0) for key, n in detail_after.items()
             if n > detail.get(key, 0)}
    assert {key.resource for key in delta if key.verb in WRITE_VERBS} <= {
        "leases.coordination.k8s.io"}
    assert not [k for k in delta if k.verb == "get" and k.resource != "leases.coordination.k8s.io"]


@pytest.mark.both_servers
def test_after_a_restart_drift_of_a_parent_not_yet_due_is_repaired_at_once(
    client: KubernetesClient, ns: str
) -> None:
    clock = VirtualClock()
    operator = make_operator(ns)
    with running(operator, client, clock=clock) as runtime:
        client.create(thing(ns, "a", "v"))
        assert wait_until(lambda: child_data(client, ns, "a") == {"value": "v"})
        _quiet(runtime)
    with running(operator, client, clock=clock) as restarted:
        _quiet(restarted)
        assert restarted.stats.total == 0  # not due: no reconcile at start
        client.delete("v1", "ConfigMap", "a-cfg", namespace=ns)  # yet its child is watched
        assert wait_until(lambda: child_data(client, ns, "a") == {"value": "v"})


@pytest.mark.both_servers
def test_the_heartbeat_lease_round_trips_and_survives_a_concurrent_writer(
    client: KubernetesClient, ns: str
) -> None:
    store = HeartbeatStore(client, name="hb", namespace=ns, identity="me")
    assert store.read() is None  # no Lease yet: no promise
    first = Heartbeat(covered=1_700_000_123.456789, interval=7200.0, ticks=2)
    store.write(first)
    assert HeartbeatStore(client, name="hb", namespace=ns, identity="other").read() == first
    other = HeartbeatStore(client, name="hb", namespace=ns, identity="other")
    other.write(Heartbeat(covered=1_700_000_200.0, interval=7200.0, ticks=2))
    second = Heartbeat(covered=1_700_000_300.0, interval=36000.0, ticks=1)
    store.write(second)  # its cached version is stale: 409, read afresh, written
    assert other.read() == second


@pytest.mark.both_servers
def test_an_unreadable_heartbeat_promises_nothing(client: KubernetesClient, ns: str) -> None:
    client.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                   "metadata": {"name": "hb", "namespace": ns,
                                "annotations": {"optk.dev/resync-ticks": "two"}},
                   "spec": {"renewTime": "2026-01-01T00:00:00.000000Z"}})
    assert HeartbeatStore(client, name="hb", namespace=ns, identity="me").read() is None


@pytest.mark.both_servers
def test_the_heartbeat_period_must_be_positive(ns: str) -> None:
    with pytest.raises(ValueError, match="heartbeat must be positive"):
        make_operator(ns, resync=ResyncPolicy(heartbeat=0))
    assert make_operator(ns, resync=ResyncPolicy(heartbeat=None)).heartbeat_lease is None
