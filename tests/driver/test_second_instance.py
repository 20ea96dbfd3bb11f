"""A second run of the same operator without leader election (issue 36): both would reconcile
and write the same parents. Each instance sees the other through the heartbeat Lease it keeps
anyway: the one that starts second at once (a fresh beat of another holder), the one already
running at its next beat (its write conflicts with the other's), each one WARNING naming the
other instance, and ``/readyz``'s degraded reason. A clean stop releases the Lease, so an
ordinary restart warns of nothing; with leader election a new leader's predecessor is no
contender, nor is a stale beat. On the embedded server."""

from __future__ import annotations

import logging
import time

import pytest

from reconciler import KubernetesClient, NotFoundError
from reconciler._driver.resync_loop import HEARTBEAT_GRACE, Beat, HeartbeatStore
from reconciler._driver.resyncs import Heartbeat, ResyncPolicy
from tests.driver.conftest import make_operator, running, wait_until

_LEASE = "coordination.k8s.io/v1"


def _holder(client: KubernetesClient, ns: str, name: str) -> str:
    try:
        lease = client.get(_LEASE, "Lease", f"{name}-resync", namespace=ns)
    except NotFoundError:
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and "another instance" in r.getMessage()]


def test_a_second_instance_is_named_by_both(
    client: KubernetesClient, ns: str, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    operator = make_operator(ns, resync=ResyncPolicy(heartbeat=60, heartbeat_namespace=ns))
    with running(operator, client) as first:
        assert wait_until(lambda: _holder(client, ns, operator.name) == first.identity)
        assert not _warnings(caplog)
        with running(operator, client) as second:
            # The second one sees the first's fresh beat at its start.
            [started] = _warnings(caplog)
            assert first.identity in started, started
            assert f"{ns}/{operator.name}-resync" in started, started
            assert "--leader-elect" in started, started
            assert first.identity in second.degraded()
            assert wait_until(lambda: _holder(client, ns, operator.name) == second.identity)
            # The first one's next beat conflicts with the second's: it names the second.
            first.resync.force_beat()
            seen = _warnings(caplog)
            assert len(seen) == 2, seen
            assert second.identity in seen[1], seen
            assert second.identity in first.degraded()
            first.resync.force_beat()  # and says it once
            second.resync.force_beat()
            assert len(_warnings(caplog)) == 2, _warnings(caplog)
    caplog.clear()
    with running(operator, client):  # both stopped cleanly: the Lease is released
        pass
    assert not _warnings(caplog)


def test_only_a_fresh_beat_of_another_holder_without_election_is_a_contender(
    client: KubernetesClient, ns: str,
) -> None:
    """With leader election a new leader finds its predecessor's beat (``watch_others``
    off): no contender; a released beat (a clean stop) or a stale one is none either."""
    beat = Heartbeat(covered=1_700_000_000.0, interval=36000.0, ticks=1)
    now = time.time()
    HeartbeatStore(client, name="hb", namespace=ns, identity="a").write(
        beat, beat=Beat(at=now, period=60.0))
    for watch, at, found in ((True, now + 1, "a"), (False, now + 1, None),
                             (True, now + 60 * HEARTBEAT_GRACE + 1, None)):
        store = HeartbeatStore(client, name="hb", namespace=ns, identity="b",
                               watch_others=watch)
        store.read()
        hold = store.check_others(at)
        assert (hold.holder if hold else None) == found, (watch, at)
    HeartbeatStore(client, name="hb", namespace=ns, identity="a").write(
        beat, beat=Beat(at=now, period=60.0, stopped=True))
    store = HeartbeatStore(client, name="hb", namespace=ns, identity="b", watch_others=True)
    store.read()
    assert store.check_others(now + 1) is None
