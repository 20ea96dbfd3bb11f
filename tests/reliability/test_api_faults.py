"""API faults from the embedded server's injector, the example operator as a separate process.

Phases: 5% 500s, 5% 503s, 429 with Retry-After, latency spikes, watches cut every second, and
the server stopped and restarted with its state; forced 410 on every new watch is its own test
(it found the informer backoff and relist defects of docs/reliability.md, "Findings"). Watch
faults apply to watches opened after them, so those phases start with a quick server bounce. In
each phase the parents change while the fault is on; after it, within a bound: every parent
converged, no duplicate or lost child, and the seeded objects that are not ours never written.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from reconciler import KubernetesClient
from reconciler.embedded import EmbeddedApiServer, Faults
from tests.reliability import _counts
from tests.reliability._harness import SOAK, Fleet, OperatorProcess, eventually

PARENTS = 50 if SOAK else 20
PHASE_SECONDS = 8.0 if SOAK else 2.5
OUTAGE_SECONDS = 10.0 if SOAK else 3.0
CONVERGE_SECONDS = 60.0

PHASES: dict[str, Faults] = {
    "http_500": Faults(error_rate=0.05, error_code=500, seed=1),
    "http_503": Faults(error_rate=0.05, error_code=503, seed=2),
    "http_429": Faults(throttle_rate=0.05, retry_after=1, seed=3),
    "latency": Faults(latency=0.3, verbs=frozenset({"get", "patch", "create", "update"}), seed=4),
    "watch_cut": Faults(watch_max_seconds=1.0, seed=5),
}
GONE = Faults(watch_gone=True, seed=6)


def _retrying(action: Callable[[], Any], attempts: int = 20) -> Any:
    for attempt in range(attempts):
        try:
            return action()
        except Exception:  # the test's own writes meet the same faults; bounded retries
            if attempt == attempts - 1:
                raise
            time.sleep(0.2)
    return None


def _storm(fleet: Fleet, rng: random.Random, seconds: float) -> int:
    changes, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline and changes < 200:
        _retrying(lambda: fleet.random_change(rng))
        changes += 1
        time.sleep(0.05)
    return changes


def _injected(server: EmbeddedApiServer, code: int) -> int:
    return sum(n for key, n in server.request_breakdown().items() if key.code == code)


def _watches(server: EmbeddedApiServer) -> int:
    return server.request_counts()["watch"]


def _running(server: EmbeddedApiServer, client: KubernetesClient,
             operators: Callable[..., OperatorProcess],
             ) -> tuple[OperatorProcess, Fleet, dict[tuple[str, str], str]]:
    replica = operators(server.kubeconfig_path).start()
    eventually(lambda: client.is_served("monitoring.optk.dev/v1alpha1", "Thanos"),
               "the Thanos CRD", 60)
    fleet = Fleet(client, "faults")
    fleet.create_namespace()
    seeds = fleet.seed_unowned(5)
    fleet.create_parents(PARENTS)
    fleet.wait_converged(CONVERGE_SECONDS)
    return replica, fleet, seeds


def _bounce(server: EmbeddedApiServer) -> None:
    """Watch faults apply to watches opened after them: end the open ones (a quick stop and
    start with state) so that every informer re-watches under the fault."""
    server.stop()
    server.start()


def test_operator_converges_after_forced_410s(
    server: EmbeddedApiServer, client: KubernetesClient,
    operators: Callable[..., OperatorProcess],
) -> None:
    rng = random.Random(410)
    replica, fleet, seeds = _running(server, client, operators)
    server.reset_request_counts()
    with server.faults(GONE):
        _bounce(server)
        _storm(fleet, rng, PHASE_SECONDS)
        injected = _watches(server)
    _counts.add("faults:watch_410", {"faults.watch_410": injected})
    seconds = fleet.wait_converged(30)  # a few seconds: relists pause at most GONE_PAUSE_CAP
    duplicated, lost = fleet.census()
    assert (duplicated, lost) == (0, 0)
    assert fleet.written_seeds(seeds) == []
    assert replica.alive(), replica.output()[-3000:]
    _counts.add("faults:watch_410:checked", {"objects.duplicated": duplicated,
                                             "objects.lost": lost, "parents.checked": PARENTS})
    _counts.figure("converge_seconds.watch_410", round(seconds, 2))


def test_operator_converges_after_every_fault_phase(
    server: EmbeddedApiServer, client: KubernetesClient,
    operators: Callable[..., OperatorProcess],
) -> None:
    rng = random.Random(12)
    replica, fleet, seeds = _running(server, client, operators)
    figures: dict[str, float] = {}
    for phase, faults in PHASES.items():
        server.reset_request_counts()
        with server.faults(faults):
            if phase.startswith("watch"):
                _bounce(server)
            _storm(fleet, rng, PHASE_SECONDS)
            code = {"http_500": 500, "http_503": 503, "http_429": 429}.get(phase)
            injected = _injected(server, code) if code else (
                _watches(server) if phase.startswith("watch") else
                sum(server.request_counts().values()))
        try:
            figures[phase] = fleet.wait_converged(CONVERGE_SECONDS)
        except AssertionError as error:
            raise AssertionError(f"after the {phase} phase: {error}") from None
        duplicated, lost = fleet.census()
        assert (duplicated, lost) == (0, 0), phase
        assert fleet.written_seeds(seeds) == [], phase
        assert replica.alive(), replica.output()[-3000:]
        _counts.add(f"faults:{phase}", {f"faults.{phase}": injected, "objects.duplicated":
                                         duplicated, "objects.lost": lost})
    # The server goes away (changes queued up meanwhile by nobody) and comes back with its state.
    server.stop()
    time.sleep(OUTAGE_SECONDS)
    server.start()
    _storm(fleet, rng, PHASE_SECONDS)
    figures["server_restart"] = fleet.wait_converged(CONVERGE_SECONDS)
    duplicated, lost = fleet.census()
    assert (duplicated, lost) == (0, 0)
    assert fleet.written_seeds(seeds) == []
    assert replica.alive(), replica.output()[-3000:]
    _counts.add("faults:server_restart", {"faults.server_restart": 1,
                                          "objects.duplicated": duplicated, "objects.lost": lost,
                                          "parents.checked": PARENTS * (len(PHASES) + 1)})
    for phase, seconds in figures.items():
        _counts.figure(f"converge_seconds.{phase}", round(seconds, 2))
