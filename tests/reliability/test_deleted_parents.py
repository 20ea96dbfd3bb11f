"""Parents deleted right after they were created: no write for any of them once it is gone.

Issue 21: 400 parents each deleted 0-60 ms after its creation made 5 of them loop for ever (their
children created about 20 times a second, collected, and created again) on the embedded server
and on the real control plane; a late write-through had put each back into the parent cache. Here
the example operator runs as a process behind a ``WriteLog`` proxy (every write it sends, with the
object written); three seeds of 400 parents are created and deleted 0-60 ms apart by eight
concurrent users, then, once the operator has written nothing for 3 s (at most 30 s after the
last deletion), it must write nothing for 10 s more (its heartbeat Lease aside), and it must
still serve: new parents converge.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from examples.thanos.crds import API_VERSION, KIND
from reconciler import ApiError, KubernetesClient
from reconciler.embedded import EmbeddedApiServer
from tests.reliability import _counts
from tests.reliability._harness import SOAK, Fleet, OperatorProcess, base_spec, eventually
from tests.reliability._proxy import WriteLog

PARENTS = 1000 if SOAK else 400
SEEDS = (1, 2, 3)
QUIET_AFTER = 30.0  # at most: see _settled
SETTLE = 3.0
WINDOW = 10.0


def _churn(client: KubernetesClient, namespace: str, seed: int) -> float:
    """Create ``PARENTS`` parents, each deleted 0-60 ms after its creation; the monotonic time
    of the last deletion."""
    rng = random.Random(seed)
    delays = [rng.uniform(0.0, 0.06) for _ in range(PARENTS)]
    last = [0.0]
    lock = threading.Lock()

    def one(index: int) -> None:
        name = f"s{seed}-{index}"
        client.create({"apiVersion": API_VERSION, "kind": KIND,
                       "metadata": {"name": name, "namespace": namespace},
                       "spec": base_spec(index)})
        time.sleep(delays[index])
        client.delete(API_VERSION, KIND, name, namespace=namespace)
        with lock:
            last[0] = max(last[0], time.monotonic())

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(PARENTS)))
    return last[0]


def _settled(proxy: WriteLog, last: float) -> None:
    """Wait until the operator has written nothing (its Lease aside) for ``SETTLE`` seconds,
    at most until ``QUIET_AFTER`` seconds after the ``last`` deletion: an operator working off
    its backlog settles in seconds, one that loops never does (the window then shows it)."""
    while time.monotonic() < last + QUIET_AFTER:
        recent = [w for w in proxy.writes
                  if w.at >= time.monotonic() - SETTLE and "/leases/" not in w.path]
        if not recent and time.monotonic() >= last + SETTLE:
            return
        time.sleep(0.25)


def test_parents_deleted_right_after_creation_get_no_writes_once_gone(
    server: EmbeddedApiServer, client: KubernetesClient,
    operators: Callable[..., OperatorProcess], tmp_path: Path,
) -> None:
    proxy = WriteLog(who="operator", upstream=server.url, ca_path=server.ca_cert_path,
                     token=server.token).start()
    try:
        replica = operators(proxy.kubeconfig(tmp_path / "proxy.kubeconfig")).start()
        eventually(lambda: client.is_served(API_VERSION, KIND), "the Thanos CRD", 60)
        eventually(replica.ready, "the operator ready", 60)
        fleet = Fleet(client, "churn")
        fleet.create_namespace()
        last = max(_churn(client, "churn", seed) for seed in SEEDS)
        _settled(proxy, last)
        start = time.monotonic()
        time.sleep(WINDOW)
        late = [f"{w.method} {w.path} {w.name} -> {w.status}" for w in proxy.writes
                if w.at >= start and "/leases/" not in w.path]
        assert late == [], (len(late), late[:20])
        assert replica.alive(), replica.output()[-3000:]
        gone = [w for w in proxy.writes if w.at >= last and "/leases/" not in w.path]
        # It still serves: a few new parents converge.
        fleet.create_parents(5, prefix="after")
        seconds = fleet.wait_converged(60)
    finally:
        proxy.stop()
    try:
        left = client.list(API_VERSION, KIND, namespace="churn")["items"]
    except ApiError:
        left = []
    assert {p["metadata"]["name"] for p in left} == {f"after{i}" for i in range(5)}
    _counts.add("deleted-parents", {"parents.created_and_deleted": PARENTS * len(SEEDS),
                                    "writes.after_quiet": len(late)})
    _counts.figure("deleted_parents.writes_after_last_delete", len(gone))
    _counts.figure("deleted_parents.converge_after_seconds", round(seconds, 2))
