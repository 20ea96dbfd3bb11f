"""The real kube-apiserver restarted over the same etcd, the example operator as a separate process.

The API-fault phase of issue 12 that only the real control plane can play: what an operator sees
when a cluster's API server is upgraded or rescheduled. Its connections are cut, requests are
refused for a few seconds, and the new server's watch cache starts at its own list, so every
informer's watch from before the restart gets 410 Gone and must re-list. A control plane of the
test's own (``reconciler.envtest.ControlPlane``; a restart would disturb the session's shared
one); the operator manages ``PARENTS`` parents while the test changes them before, during
(refused) and after each restart. After each: convergence within a bound, no duplicate or lost
child, no parent left unreconciled (Ready for its generation), the seeded objects that are not
ours never written, and every process (operator, etcd, kube-controller-manager) alive.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from examples.thanos.crds import API_VERSION, KIND
from reconciler import KubernetesClient
from reconciler.envtest import ControlPlane
from tests.reliability import _counts
from tests.reliability._harness import SOAK, Fleet, OperatorProcess, eventually

PARENTS = 50 if SOAK else 20
DOWN_SECONDS = (3.0, 0.0, 10.0) if SOAK else (3.0, 0.0)
"""One restart per entry, with that outage (besides the stop's bound and the start)."""
STORM_SECONDS = 1.5
"""Parents change this long before the restart and again after it, while the operator catches
up (and every attempt in between is refused)."""
CONVERGE_SECONDS = 90.0
MAX_CHANGES = 400
EXPIRED = "expired (410 Gone); relisting"
"""What the operator logs when an informer's watch from before a restart is refused."""


@pytest.fixture
def plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """A control plane of this test's own (skipped in one line without ``OPTK_KUBE_ASSETS``)."""
    if request.config.getoption("--kube-api") == "embedded":
        pytest.skip("real control plane: --kube-api=embedded")
    assets: Path = request.getfixturevalue("kube_assets")
    with ControlPlane(assets) as control_plane:
        yield control_plane


class _Storm:
    """Random parent changes from a thread until ``stop()`` (bounded in count); a change the
    server refuses is counted and not retried (the next one is another random change)."""

    def __init__(self, fleet: Fleet, rng: random.Random) -> None:
        self._fleet = fleet
        self._rng = rng
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="storm", daemon=True)
        self.landed: list[float] = []
        self.refused = 0

    def _run(self) -> None:
        while not self._done.is_set() and len(self.landed) + self.refused < MAX_CHANGES:
            try:
                self._fleet.random_change(self._rng)
                self.landed.append(time.monotonic())
            except Exception:  # refused or cut while the server is away
                self.refused += 1
                time.sleep(0.2)
            time.sleep(0.05)

    def __enter__(self) -> _Storm:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the storm thread did not stop"


def test_operator_converges_after_kube_apiserver_restarts(
    plane: ControlPlane, operators: Callable[..., OperatorProcess],
) -> None:
    client = KubernetesClient(plane.api_client())
    replica = operators(plane.kubeconfig_path).start()
    eventually(lambda: client.is_served(API_VERSION, KIND), "the Thanos CRD", 60)
    fleet = Fleet(client, "restart")
    fleet.create_namespace()
    seeds = fleet.seed_unowned(5)
    fleet.create_parents(PARENTS)
    fleet.wait_converged(CONVERGE_SECONDS)
    rng = random.Random(1225)
    restart_seconds, converge_seconds = [], []
    for down in DOWN_SECONDS:
        expired_before = replica.output().count(EXPIRED)
        with _Storm(fleet, rng) as storm:
            time.sleep(STORM_SECONDS)
            started = time.monotonic()
            plane.restart_apiserver(down_seconds=down)
            back = time.monotonic()
            restart_seconds.append(back - started)
            time.sleep(STORM_SECONDS)
        assert any(t < started for t in storm.landed), "no change before the restart"
        assert any(t > back for t in storm.landed), "no change after the restart"
        try:
            converge_seconds.append(fleet.wait_converged(CONVERGE_SECONDS))
        except AssertionError as error:
            raise AssertionError(f"after a restart with {down} s down: {error}\n"
                                 f"operator output:\n{replica.output()[-3000:]}") from None
        duplicated, lost = fleet.census()
        assert (duplicated, lost) == (0, 0), f"after a restart with {down} s down"
        assert fleet.written_seeds(seeds) == []
        assert replica.alive(), replica.output()[-3000:]
        assert replica.starts == 1
        plane.check()  # etcd and kube-controller-manager rode it out too
        _counts.add("faults:apiserver_restart", {
            "faults.apiserver_restart": 1, "apiserver_restart.changes_refused": storm.refused,
            "apiserver_restart.watches_expired": replica.output().count(EXPIRED) - expired_before,
            "objects.duplicated": duplicated, "objects.lost": lost,
            "parents.checked": PARENTS,
        })
    _counts.figure("apiserver_restart_seconds", round(max(restart_seconds), 2))
    _counts.figure("converge_seconds.apiserver_restart", round(max(converge_seconds), 2))
