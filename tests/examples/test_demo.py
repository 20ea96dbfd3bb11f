"""``make demo`` as a test: the Thanos demo runs end to end and its summary holds.

One in-process run checks every step converged, the steady-state resync wrote nothing and the
counts add up; one subprocess run checks the command line (exit code 0, ``--json`` summary on the
last line), as ``make demo`` runs it. A step that cannot converge fails the demo. The same demo
runs once more on a real control plane (``--real``, skipped without ``OPTK_KUBE_ASSETS``) with
the same steps and the same bounds, its counts read from the API server's audit log.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from examples.thanos.demo import CHILD_KINDS, Demo, DemoFailedError, Summary, run_demo
from reconciler.embedded import EmbeddedApiServer

ROOT = Path(__file__).resolve().parents[2]

STEPS = [
    "converge observatory",
    "converge edge",
    "recreate the deleted Service",
    "scale the Deployment back to 2",
    "restore the label",
    "delete the ruler's children",
    "create the ruler's children",
    "add ServiceMonitors to observatory",
    "add ServiceMonitors to edge",
    "resync every parent",
    "collect observatory's children",
    "edge is untouched",
    "read edge at v1alpha1 and v1alpha2",
]


@pytest.fixture(scope="module")
def demo_run() -> tuple[Summary, str]:
    out = io.StringIO()
    summary = run_demo(timeout=20.0, out=out)
    return summary, out.getvalue()


def test_every_step_converges(demo_run: tuple[Summary, str]) -> None:
    summary, output = demo_run
    assert [step.name for step in summary.steps] == STEPS, output
    assert all(step.converged for step in summary.steps), output
    assert summary.ok
    assert "result                OK" in output


def test_the_steady_state_resync_writes_nothing(demo_run: tuple[Summary, str]) -> None:
    summary, _ = demo_run
    assert summary.steady_state_reconciles == 2  # both parents were reconciled again
    assert summary.steady_state_writes == 0


def test_the_summary_counts_add_up(demo_run: tuple[Summary, str]) -> None:
    summary, output = demo_run
    requests = summary.api_requests
    assert summary.api_writes == sum(
        requests[v] for v in ("create", "update", "patch", "delete", "deletecollection")
    )
    # The operator wrote most of it; the demo's own writes are its applies and drift.
    assert 0 < summary.operator_writes < summary.api_writes
    # A reconcile per event, not per child: far fewer than the children it handled.
    assert 0 < summary.reconciles < 40
    assert summary.objects > 0
    assert summary.seconds < 60
    assert f"parent reconciles     {summary.reconciles}" in output


def test_the_steps_are_printed_with_timestamps(demo_run: tuple[Summary, str]) -> None:
    _, output = demo_run
    step_lines = [line for line in output.splitlines() if " ok   " in line]
    assert len(step_lines) == len(STEPS)
    for line in step_lines:  # wall clock, then seconds since the start
        assert re.match(r"\d\d:\d\d:\d\d\.\d{3} \+ *\d+\.\d\ds  ", line), line
    assert "deleted Service observatory-query" in output
    output = re.sub(r"\n +", " ", output)  # lines over 120 characters are wrapped
    # The operator's Events show each repair.
    assert "event on observatory: Created child: Service.v1 demo/observatory-query" in output
    assert ("event on observatory: Updated child: Deployment.apps/v1 demo/observatory-query"
            in output)
    assert ("event on observatory: Deleted 2 children: StatefulSet.apps/v1 demo/observatory-rule, "
            "Service.v1 demo/observatory-rule") in output
    # optk trace, run as a command after step 1, shows edge's children as they are
    assert "optk trace thanos/edge" in output
    assert "Thanos/edge  Current" in output, output
    assert "├─ Deployment/edge-query [query]  Current" in output, output


@pytest.mark.needs_controller_manager
def test_the_demo_runs_the_same_steps_within_the_same_bounds_on_a_real_control_plane(
    kube_assets: Path,
) -> None:
    out = io.StringIO()
    summary = run_demo(timeout=20.0, out=out, real=True, assets=str(kube_assets))
    output = out.getvalue()
    assert [step.name for step in summary.steps] == STEPS, output
    assert all(step.converged for step in summary.steps), output
    assert summary.ok, output
    assert summary.steady_state_reconciles == 2
    assert summary.steady_state_writes == 0  # counted from kube-apiserver's audit log
    assert 0 < summary.operator_writes < summary.api_writes
    assert 0 < summary.reconciles < 40
    assert summary.seconds < 60
    assert "real control plane at https://127.0.0.1:" in output
    assert "restarted kube-controller-manager" in output


def test_a_step_that_cannot_converge_fails_the_demo() -> None:
    out = io.StringIO()
    with EmbeddedApiServer() as server:
        demo = Demo(server, timeout=0.3, out=out)
        # No operator runs here: the parent is never created, so nothing converges.
        with pytest.raises(DemoFailedError, match="converge nothing"):
            demo.step("converge nothing", demo.converged("missing"))
        assert demo.collected("missing", CHILD_KINDS)()[0]  # nothing of it exists either
    assert [step.converged for step in demo.steps] == [False]
    assert "FAIL converge nothing: missing not found" in out.getvalue()
    failed = Summary(steps=tuple(demo.steps), objects=0, reconciles=0, operator_writes=0,
                     api_requests={}, steady_state_reconciles=0, steady_state_writes=0,
                     seconds=0.3)
    assert not failed.ok


def test_make_demo_command_exits_zero_with_a_json_summary() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "examples.thanos.demo", "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["ok"] is True
    assert summary["steady_state_writes"] == 0
    assert len(summary["steps"]) == len(STEPS)
