"""Sharded replicas as separate processes against the embedded server (over HTTPS).

Three ``tests.sharding.sample`` processes and 45 parents converge, each replica caching only its
own parents and their children; ``kill -9`` of one: its parents are owned by the others within
about the lease duration and converge; a fourth process joins: about a quarter of the parents
move, each released by its old owner first; and over the whole run the server's request log
shows no parent whose children or status were written by two replicas interleaved.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler import KubernetesClient
from tests.sharding.conftest import child_value, converged, item, owners, wait_until
from tests.sharding.sample import API_VERSION, USER_AGENT_PREFIX
from tests.sharding.test_runtimes import child_writers, overlapping_writers

LEASE = 2.0
PARENTS = 45
ROOT = Path(__file__).resolve().parents[2]


class ReplicaProcess:
    """One replica process and the figures it writes."""

    def __init__(self, kube_api: Any, namespace: str, shard: str, directory: Path) -> None:
        self.shard = shard
        self.status_path = directory / f"{shard}.json"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.sharding.sample",
             "--kubeconfig", str(kube_api.kubeconfig_path), "--shard", shard,
             "--namespace", namespace, "--status", str(self.status_path),
             "--lease", str(LEASE), "--replicas-hint", "3"],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL, stderr=directory.joinpath(f"{shard}.log").open("w"),
        )

    def status(self) -> dict[str, Any]:
        """The replica's last figures (empty before the first)."""
        try:
            return dict(json.loads(self.status_path.read_text()))
        except (OSError, ValueError):
            return {}

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not end in time."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[dict[str, ReplicaProcess]]:
    """Replica processes by shard id, stopped after the test."""
    running: dict[str, ReplicaProcess] = {}
    try:
        yield running
    finally:
        for replica in running.values():
            replica.stop()


def test_replica_processes_converge_survive_a_kill_and_rebalance(
    kube_api: Any, kube_namespace: str, shard_client: KubernetesClient, tmp_path: Path,
    processes: dict[str, ReplicaProcess],
) -> None:
    ns, client = kube_namespace, shard_client
    kube_api.enable_request_log()
    for shard in ("a", "b", "c"):
        processes[shard] = ReplicaProcess(kube_api, ns, shard, tmp_path)
    for index in range(PARENTS):
        client.create(item(ns, f"p{index:03d}"))
    assert wait_until(lambda: converged(client, ns, live={"a", "b", "c"}), 60), owners(client, ns)

    by_shard = owners(client, ns)
    def caches_match() -> bool:
        for shard, replica in processes.items():
            mine = sum(s == shard for s in by_shard.values())
            figures = replica.status()
            if (figures.get("cached_parents"), figures.get("cached_children")) != (mine, mine):
                return False
        return True
    assert wait_until(caches_match, 10), {s: p.status() for s, p in processes.items()}

    # kill -9 a replica that does not run the assigner
    victim = next(s for s, p in processes.items() if not p.status().get("leading"))
    processes.pop(victim).process.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    live = {"a", "b", "c"} - {victim}
    assert wait_until(lambda: victim not in set(owners(client, ns).values()), 6 * LEASE)
    takeover = time.monotonic() - killed
    assert takeover < 3 * LEASE + 3.0, takeover  # room for a loaded machine
    # the children moved with their parents (relabelled by the assigner), no reconcile needed
    assert wait_until(lambda: converged(client, ns, live=live), 20), owners(client, ns)
    theirs = [n for n, s in by_shard.items() if s == victim]
    for name in theirs:
        client.patch(API_VERSION, "Item", name, {"spec": {"value": "2"}},
                     patch_type="application/merge-patch+json", namespace=ns)
    assert wait_until(lambda: all(child_value(client, ns, n) == "2" for n in theirs), 30)

    # a fourth replica joins: about a quarter move, each by a drain
    before = owners(client, ns)
    released_before = sum(p.status().get("releases", 0) for p in processes.values())
    processes["d"] = ReplicaProcess(kube_api, ns, "d", tmp_path)
    live = live | {"d"}
    assert wait_until(lambda: processes["d"].status().get("cached_parents", 0) > 0
                      and all(s in live for s in owners(client, ns).values()), 30)
    time.sleep(LEASE)  # let the last drains finish
    after = owners(client, ns)
    moved = {n for n in after if after[n] != before[n]}
    assert all(after[n] == "d" for n in moved)
    assert 0.1 * PARENTS <= len(moved) <= 0.6 * PARENTS, len(moved)
    assert wait_until(lambda: sum(p.status().get("releases", 0) for s, p in processes.items()
                                  if s != "d") - released_before == len(moved), 5)
    assert child_writers(kube_api.request_log()) >= {f"{USER_AGENT_PREFIX}{s}" for s in "abcd"}
    assert overlapping_writers(kube_api.request_log()) == {}
