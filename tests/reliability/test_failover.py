"""Failover: two replicas of the example operator with leader election, each behind its own
write-logging proxy so that every write is attributed to a replica with a timestamp.

- The leader SIGKILLed: the standby takes over within the lease duration plus one reconcile
  (measured from the kill to a parent changed right after it being converged again).
- The leader SIGSTOPped past its lease, parents changed meanwhile (the standby took over and
  reconciled them), then SIGCONT: never two writers, i.e. the old leader writes nothing once
  the other replica holds the lease (election Lease updates aside: candidates may try those).
  This fails until a worker checks its lease before writing (issue 12, defect 1).
- The leader suspended (issue 31, finding 3): ``suspend_operator.py`` makes a SIGSTOP look like
  a system suspend from inside the process (``CLOCK_MONOTONIC`` leaves the stop out,
  ``CLOCK_BOOTTIME`` counts it). Stopped 12 s (three lease durations), resumed after the standby
  holds the lease and has done the work meanwhile: 0 writes from it after the standby took the
  lease. Before the fence measured on ``CLOCK_BOOTTIME``, 5, 11 and 1 writes in three tries.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reconciler import KubernetesClient
from reconciler.embedded import EmbeddedApiServer
from tests.reliability import _counts
from tests.reliability._harness import Fleet, OperatorProcess, eventually
from tests.reliability._proxy import LoggedWrite, WriteLog
from tests.reliability.leader_operator import LEADER_LEASE, LEASE_SECONDS

TARGET = "tests.reliability.leader_operator:operator"
SUSPENDING = "tests.reliability.suspend_operator:operator"
SUSPEND_SECONDS = 12.0
RETRY = LEASE_SECONDS / 8
PARENTS = 10


def _holder(client: KubernetesClient) -> str:
    lease = client.get("coordination.k8s.io/v1", "Lease", LEADER_LEASE, namespace="default")
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def _counted(write: LoggedWrite) -> bool:
    """Every write but the election Lease's own (a standby's attempts are no reconcile)."""
    return not write.path.endswith(f"/leases/{LEADER_LEASE}")


@pytest.fixture
def proxies(server: EmbeddedApiServer) -> Iterator[tuple[WriteLog, WriteLog]]:
    logs = tuple(WriteLog(who=who, upstream=server.url, ca_path=server.ca_cert_path,
                          token=server.token).start() for who in ("a", "b"))
    try:
        yield logs  # type: ignore[misc]
    finally:
        for log in logs:
            log.stop()


def _two_replicas(
    server: EmbeddedApiServer, client: KubernetesClient, tmp_path: Path,
    operators: Callable[..., OperatorProcess], proxies: tuple[WriteLog, WriteLog],
    namespace: str, *, leader_target: str = TARGET,
) -> tuple[OperatorProcess, OperatorProcess, Fleet, str]:
    env = {"OPTK_TEST_LEASE_SECONDS": str(LEASE_SECONDS)}
    leader = operators(proxies[0].kubeconfig(tmp_path / "a.kubeconfig"), target=leader_target,
                       environ=env).start()
    eventually(lambda: client.is_served("monitoring.optk.dev/v1alpha1", "Thanos"),
               "the Thanos CRD", 60)
    eventually(lambda: bool(_holder(client)), "replica a to lead", 60)
    identity = _holder(client)
    standby = operators(proxies[1].kubeconfig(tmp_path / "b.kubeconfig"), target=TARGET,
                        environ=env).start()
    fleet = Fleet(client, namespace)
    fleet.create_namespace()
    fleet.create_parents(PARENTS)
    fleet.wait_converged(60)
    eventually(standby.ready, "replica b's caches", 60)
    assert _holder(client) == identity
    return leader, standby, fleet, identity


def test_standby_takes_over_within_the_lease_when_the_leader_is_killed(
    server: EmbeddedApiServer, client: KubernetesClient, tmp_path: Path,
    operators: Callable[..., OperatorProcess], proxies: tuple[WriteLog, WriteLog],
) -> None:
    leader, _standby, fleet, identity = _two_replicas(
        server, client, tmp_path, operators, proxies, "failover-kill")
    killed = time.monotonic()
    leader.signal(signal.SIGKILL)
    fleet.patch_parent("p1", {"spec": {"query": {"replicas": 7}}})
    takeover = eventually(lambda: fleet.pending("p1") == [], "p1 reconciled by replica b",
                          LEASE_SECONDS * 4 + 30)
    bound = LEASE_SECONDS + RETRY + 5.0  # one reconcile, with room for a loaded machine
    assert _holder(client) not in ("", identity)
    assert takeover <= bound, f"takeover took {takeover:.1f} s (bound {bound:.1f} s)"
    writes_b = [w for w in proxies[1].writes if _counted(w) and w.at >= killed]
    assert writes_b, "replica b wrote nothing after the takeover"
    late_a = [w for w in proxies[0].writes if _counted(w) and w.at > killed]
    assert late_a == []
    duplicated, lost = fleet.census()
    assert (duplicated, lost) == (0, 0)
    _counts.add("failover:kill", {"failovers": 1, "writers.overlapping": len(late_a),
                                  "objects.duplicated": duplicated, "objects.lost": lost})
    _counts.figure("failover.takeover_seconds", round(takeover, 2))


def test_a_leader_paused_past_its_lease_never_writes_beside_the_new_leader(
    server: EmbeddedApiServer, client: KubernetesClient, tmp_path: Path,
    operators: Callable[..., OperatorProcess], proxies: tuple[WriteLog, WriteLog],
) -> None:
    leader, _standby, fleet, identity = _two_replicas(
        server, client, tmp_path, operators, proxies, "failover-pause")
    leader.signal(signal.SIGSTOP)
    eventually(lambda: _holder(client) not in ("", identity), "replica b to take the lease",
               LEASE_SECONDS * 4 + 30)
    took_over = time.monotonic()
    for name in fleet.names:  # work the paused leader will find in its socket when it resumes
        fleet.patch_parent(name, {"spec": {"query": {"replicas": 5}}})
    fleet.wait_converged(60)
    leader.signal(signal.SIGCONT)
    time.sleep(LEASE_SECONDS + 2.0)  # time for the old leader to notice, or to misbehave
    fleet.wait_converged(60)
    late_a = [w for w in proxies[0].writes if _counted(w) and w.at > took_over]
    writes_b = [w for w in proxies[1].writes if _counted(w) and w.at > took_over]
    _counts.add("failover:pause", {"failovers": 1, "writers.overlapping": len(late_a)})
    assert writes_b, "replica b wrote nothing after the takeover"
    assert late_a == [], (
        f"replica a wrote {len(late_a)} times after replica b took the lease: "
        + ", ".join(f"{w.method} {w.path}" for w in late_a[:8]))


def test_a_suspended_leader_writes_nothing_once_the_standby_holds_the_lease(
    server: EmbeddedApiServer, client: KubernetesClient, tmp_path: Path,
    operators: Callable[..., OperatorProcess], proxies: tuple[WriteLog, WriteLog],
) -> None:
    leader, _standby, fleet, identity = _two_replicas(
        server, client, tmp_path, operators, proxies, "failover-suspend",
        leader_target=SUSPENDING)
    leader.signal(signal.SIGSTOP)  # a suspend, as the leader's clocks will tell it
    stopped = time.monotonic()
    eventually(lambda: _holder(client) not in ("", identity), "replica b to take the lease",
               LEASE_SECONDS * 4 + 30)
    took_over = time.monotonic()
    for name in fleet.names:  # work the suspended leader will find in its socket on resume
        fleet.patch_parent(name, {"spec": {"query": {"replicas": 6}}})
    fleet.wait_converged(60)
    time.sleep(max(0.0, SUSPEND_SECONDS - (time.monotonic() - stopped)))
    leader.signal(signal.SIGCONT)
    time.sleep(LEASE_SECONDS + 2.0)  # time for the old leader to notice, or to misbehave
    fleet.wait_converged(60)
    late_a = [w for w in proxies[0].writes if _counted(w) and w.at > took_over]
    writes_b = [w for w in proxies[1].writes if _counted(w) and w.at > took_over]
    _counts.add("failover:suspend", {"failovers": 1, "writers.overlapping": len(late_a),
                                     "suspend.writes_after_takeover": len(late_a)})
    assert writes_b, "replica b wrote nothing after the takeover"
    assert late_a == [], (
        f"the suspended leader wrote {len(late_a)} times after replica b took the lease: "
        + ", ".join(f"{w.method} {w.path}" for w in late_a[:8]))
