"""``optk uninstall`` refuses while the operator runs (issue 23), judged by its Leases.

A running operator would create everything again within a second, so the command refuses, in
one line naming the Lease, its holder and how long ago it was renewed, while the operator's
leader Lease or its resync heartbeat Lease is fresh. A cleanly stopped operator released both,
so uninstall runs at once after it; after a crash the Leases hold until they go stale;
``--force`` overrides. Against the embedded server, with operators started in this process.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest

from reconciler import KubernetesClient, LeaderElection, ResyncPolicy
from reconciler._commands.cli import main
from reconciler._driver.operators import Operator
from reconciler._driver.resync_loop import HEARTBEAT_GRACE
from reconciler._reconcile.finalizing import has_finalizer
from tests.driver import test_cleanup as cleanup
from tests.driver.conftest import running, wait_until
from tests.driver.test_cleanup import kube

__all__ = ["TARGET", "kube"]

TARGET: Operator | None = None
"""The operator ``optk uninstall tests.driver.test_uninstall_running:TARGET`` loads."""

HEARTBEAT = 2.0
"""The heartbeat period of these operators (seconds)."""


def _uninstall(kube_api: Any, capsys: pytest.CaptureFixture[str], *extra: str,
               ) -> tuple[int, str, str]:
    code = main(["uninstall", f"{__name__}:TARGET", "--kubeconfig", str(kube_api.kubeconfig_path),
                 *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _target(monkeypatch: pytest.MonkeyPatch, operator: Operator) -> Operator:
    monkeypatch.setattr(sys.modules[__name__], "TARGET", operator)
    return operator


def _children(kube: KubernetesClient, parent: dict[str, Any]) -> list[bool]:
    """Whether the parent's ClusterRole, ClusterRoleBinding and ConfigMap exist."""
    meta = parent["metadata"]
    return [*cleanup._cluster_children(kube, cleanup._role_name(parent)),
            cleanup._exists(kube, "v1", "ConfigMap", f"{meta['name']}-cfg", meta["namespace"])]


def _parent(kube: KubernetesClient, parent: dict[str, Any]) -> dict[str, Any]:
    meta = parent["metadata"]
    found: dict[str, Any] = kube.get(parent["apiVersion"], parent["kind"], meta["name"],
                                     namespace=meta["namespace"])
    return found


def _refused(code: int, out: str, err: str) -> str:
    assert code == 2, (out, err)
    assert not out, out
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("optk uninstall: operator "), err
    return lines[0]


def test_refused_while_the_heartbeat_is_fresh_forced_or_after_a_clean_stop_it_runs(
    kube: KubernetesClient, kube_namespace: str, kube_api: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    ns = kube_namespace
    operator = _target(monkeypatch, cleanup._operator(
        ns, resync=ResyncPolicy(heartbeat=HEARTBEAT, heartbeat_namespace=ns)))
    parent = cleanup.thing(ns, "a")
    with running(operator, kube) as runtime:
        kube.create(parent)
        assert wait_until(lambda: _children(kube, parent) == [True, True, True])
        line = _refused(*_uninstall(kube_api, capsys))
        assert f"is running: Lease {ns}/{operator.name}-resync is held by " \
               f"'{runtime.identity}', renewed " in line, line
        assert f"fresh for {HEARTBEAT_GRACE * HEARTBEAT:.0f}s" in line, line
        assert "pass --force" in line, line
        assert _children(kube, parent) == [True, True, True]  # nothing done

        code, out, err = _uninstall(kube_api, capsys, "--force")
        assert code == 0, (out, err)
        assert "3 deleted, 1 released, 0 kept" in out, out
        assert err.startswith("optk uninstall: --force: operator "), err
        # ...and, as the refusal said, the running operator creates them again and puts its
        # finalizer back (a reconcile that read the parent before the finalizer's removal reached
        # the cache creates the children first; the parent's own event adds the finalizer after)
        assert wait_until(lambda: _children(kube, parent) == [True, True, True]
                          and has_finalizer(_parent(kube, parent)))
    # stopped cleanly: the heartbeat is released, uninstall runs at once (no period to wait)
    code, out, err = _uninstall(kube_api, capsys)
    assert code == 0, (out, err)
    assert "3 deleted, 1 released, 0 kept" in out, out
    assert not err, err
    assert _children(kube, parent) == [False, False, False]


def test_refused_while_the_leader_lease_is_fresh_and_after_a_crash_until_both_go_stale(
    kube: KubernetesClient, kube_namespace: str, kube_api: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    ns = kube_namespace
    election = LeaderElection(namespace=ns, lease_duration=2.0, renew_deadline=1.5,
                              retry_period=0.2)
    operator = _target(monkeypatch, cleanup._operator(
        ns, leader_election=election, resync=ResyncPolicy(heartbeat=HEARTBEAT)))
    runtime = operator.start(kube)
    try:
        assert wait_until(lambda: runtime.leading)
        line = _refused(*_uninstall(kube_api, capsys))
        assert f"Lease {ns}/{operator.name}-leader is held by '{runtime.identity}'" in line, line
        assert "(fresh for 2s)" in line, line
    finally:
        runtime.stop(5, release_lease=False)  # as a crash: both Leases left to go stale
    crashed = time.monotonic()
    _refused(*_uninstall(kube_api, capsys))
    code, out, err = _uninstall(kube_api, capsys, "--force")
    assert code == 0, (out, err)
    assert "0 deleted, 0 released, 0 kept" in out, out
    time.sleep(max(0.0, max(2.0, HEARTBEAT_GRACE * HEARTBEAT) + 0.2
                   - (time.monotonic() - crashed)))
    code, out, err = _uninstall(kube_api, capsys)
    assert (code, err) == (0, ""), (out, err)


def test_the_help_says_when_uninstall_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["uninstall", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Refused (exit code 2, nothing done) while the operator runs" in text
    assert "--force" in text
