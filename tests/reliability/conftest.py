"""Fixtures of the reliability suite: a fresh counter file per session, a private embedded
server per test, and operator processes that are always killed, even when a test fails."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler import KubernetesClient
from reconciler.embedded import EmbeddedApiServer
from tests.reliability import _counts
from tests.reliability._harness import OperatorProcess


@pytest.fixture(scope="session", autouse=True)
def fresh_counts() -> None:
    """Each pytest session starts the counter file from zero."""
    _counts.reset()


@pytest.fixture
def server() -> Iterator[EmbeddedApiServer]:
    """A private embedded server (faults and restarts must not disturb other tests)."""
    api = EmbeddedApiServer()
    api.start()
    try:
        yield api
    finally:
        api.set_faults(None)
        api.stop()


@pytest.fixture
def client(server: EmbeddedApiServer) -> KubernetesClient:
    """The test's own client (a user, a CI job): the official client on ``server``."""
    return KubernetesClient(server.api_client())


@pytest.fixture
def operators(tmp_path: Path) -> Iterator[Callable[..., OperatorProcess]]:
    """A factory of operator processes; every one is SIGKILLed at the end of the test."""
    made: list[OperatorProcess] = []

    def make(kubeconfig: Path, **kwargs: Any) -> OperatorProcess:
        replica = OperatorProcess(kubeconfig=kubeconfig, log=tmp_path / f"op{len(made)}.log",
                                  **kwargs)
        made.append(replica)
        return replica

    try:
        yield make
    finally:
        for replica in made:
            replica.kill()
