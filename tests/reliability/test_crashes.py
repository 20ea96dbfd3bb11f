"""Crashes: the example operator SIGKILLed at random points of a storm of parent changes.

Each round changes parents, kills the process at a random moment (mid-reconcile or not),
changes more parents while it is dead and starts it again. After the rounds: every parent
converged, no child duplicated or lost. Then the herd check: a converged fleet, one more kill
and restart; the new process reconciles only what was due (nothing: the resync interval is the
default 10 h) and writes no child, counted from its own metrics and the server's accounting.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Callable

from reconciler import KubernetesClient
from reconciler.embedded import EmbeddedApiServer
from tests.reliability import _counts
from tests.reliability._harness import SOAK, Fleet, OperatorProcess, eventually

PARENTS = 50 if SOAK else 20
CRASHES = 20 if SOAK else 5
CHILD_RESOURCES = (
    "deployments.apps", "statefulsets.apps", "services", "ingresses.networking.k8s.io",
)


def _child_writes(server: EmbeddedApiServer) -> int:
    return sum(n for key, n in server.request_breakdown().items()
               if key.resource in CHILD_RESOURCES
               and key.verb in ("create", "update", "patch", "delete"))


def test_operator_survives_sigkill_during_a_storm_and_restarts_without_a_herd(
    server: EmbeddedApiServer, client: KubernetesClient,
    operators: Callable[..., OperatorProcess],
) -> None:
    rng = random.Random(20)
    replica = operators(server.kubeconfig_path).start()
    eventually(lambda: client.is_served("monitoring.optk.dev/v1alpha1", "Thanos"),
               "the Thanos CRD", 60)
    fleet = Fleet(client, "crashes")
    fleet.create_namespace()
    seeds = fleet.seed_unowned(3)
    fleet.create_parents(PARENTS)
    fleet.wait_converged(60)
    changes = 0
    for _round in range(CRASHES):
        stop = threading.Event()

        def storm(stop: threading.Event = stop) -> None:
            nonlocal changes
            for _ in range(100):  # bounded: at most 100 changes per round
                if stop.is_set():
                    return
                fleet.random_change(rng)
                changes += 1
                time.sleep(0.02)

        writer = threading.Thread(target=storm, daemon=True)
        writer.start()
        time.sleep(rng.uniform(0.2, 1.5))
        replica.signal(signal.SIGKILL)
        assert replica.process is not None
        replica.process.wait(10)
        time.sleep(rng.uniform(0.0, 0.5))
        stop.set()
        writer.join(10)
        # at least one change while it is dead (the storm's may all land before the kill, or
        # set a value the parent already has): the next start always has something to repair
        fleet.patch_parent(fleet.names[_round % len(fleet.names)],
                           {"spec": {"query": {"replicas": 7 + _round}}})
        changes += 1
        replica.start()
        eventually(replica.ready, "the restarted operator's /readyz", 60)
    fleet.wait_converged(90)
    # The last start repaired what changed while it was dead: its metrics count reconciles
    # (so the zero of the herd check below is a measurement, not a parse failure).
    assert replica.reconciles() > 0, replica.metrics()[:2000]
    duplicated, lost = fleet.census()
    assert (duplicated, lost) == (0, 0)
    assert fleet.written_seeds(seeds) == []

    # The herd check: nothing is due, so a restart reconciles and writes nothing.
    time.sleep(1.0)
    replica.kill()
    server.reset_request_counts()
    replica.start()
    eventually(replica.ready, "the restarted operator's /readyz", 60)
    time.sleep(3.0)
    reconciles, writes = replica.reconciles(), _child_writes(server)
    assert fleet.unconverged() == {}
    assert writes == 0, server.request_breakdown()
    assert reconciles == 0, f"{reconciles} reconciles right after a restart with nothing due"
    _counts.add("crashes", {"crashes.survived": CRASHES + 1, "crashes.parent_changes": changes,
                            "objects.duplicated": duplicated, "objects.lost": lost,
                            "restart.reconciles": reconciles, "restart.child_writes": writes})
