"""The conformance suite needs both servers at once: the session's embedded server and the real
control plane (skipped in one line naming OPTK_KUBE_ASSETS and KUBEBUILDER_ASSETS when there are
no assets)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conformance.helpers import Pair


@pytest.fixture
def pair(request: pytest.FixtureRequest) -> Iterator[Pair]:
    """Both servers, with a fresh namespace of the same name on each."""
    if request.config.getoption("--kube-api") == "embedded":
        pytest.skip("real control plane: not selected (--kube-api=embedded)")
    real = request.getfixturevalue("real_kube_api")
    embedded = request.getfixturevalue("_optk_embedded_server")
    servers = Pair(embedded, real)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": servers.namespace}}
    for answer in servers.both("POST", "/api/v1/namespaces", body=namespace).values():
        assert answer.status == 201, answer
    _wait_for_service_account(real, servers)
    yield servers
    servers.close()


def _wait_for_service_account(real: Any, servers: Pair) -> None:
    import time

    if not real.has_controller_manager:  # no serviceaccount controller: it never comes
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        path = f"/api/v1/namespaces/{servers.namespace}/serviceaccounts/default"
        if servers.on("real", "GET", path).status == 200:
            return
        time.sleep(0.05)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line: how many request kinds the suite compared on both servers."""
    import sys

    module = sys.modules.get("tests.conformance.test_requests")
    covered = getattr(module, "COVERED", None)
    if covered:
        terminalreporter.write_line(
            f"conformance: {len(covered)} request kinds compared on both servers")
        if terminalreporter.config.option.verbose > 0:
            terminalreporter.write_line("  " + "; ".join(sorted(covered)))
