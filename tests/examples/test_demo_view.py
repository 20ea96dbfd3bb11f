"""The demo's view: plain lines of at most 120 characters off a terminal (with ``optk plan``
before a changed spec is applied), the live tree on one, and ``--keep-running``."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from examples.thanos import _view
from examples.thanos.demo import run_demo
from reconciler import KubernetesClient, NotFoundError

ROOT = Path(__file__).resolve().parents[2]


def test_fit_wraps_long_lines_to_the_width() -> None:
    line = "12:00:00.000 +  1.00s    ok   " + "word " * 60
    parts = _view.fit(line)
    assert len(parts) > 1
    assert all(len(part) <= _view.WIDTH for part in parts)
    assert " ".join(p.strip() for p in parts).split() == line.split()
    assert _view.fit("short") == ["short"]


def test_last_actions_come_from_the_operators_events() -> None:
    actions = _view.last_actions([
        "Created 2 children: Deployment.apps/v1 demo/a-query, Service.v1 demo/a-query",
        "Updated child: Deployment.apps/v1 demo/a-query",
    ])
    assert actions == {("Deployment", "a-query"): "updated", ("Service", "a-query"): "created"}


def test_the_live_view_draws_a_tree_per_parent_with_state_and_last_action() -> None:
    pytest.importorskip("rich", reason="rich (the demo extra) is not installed")
    parents = [_view.ParentView(name="edge", ready="True", children=(
        _view.ChildView(kind="Deployment", name="edge-query", state="as built"),
        _view.ChildView(kind="Service", name="edge-query", state="missing")))]
    out = io.StringIO()
    view = _view.LiveView(out, lambda: parents, every=0.01)
    try:
        view.step("recreate the deleted Service")
        view.event("Created child: Service.v1 demo/edge-query")
        view.done("recreate the deleted Service", 0.042, True)
        view.parents = parents
        from rich.console import Console

        screen = io.StringIO()
        Console(file=screen, width=120).print(view.render())
    finally:
        view.close()
    text = screen.getvalue()
    assert "step: recreate the deleted Service" in text
    assert "Thanos edge  Ready=True" in text
    assert re.search(r"Service\s+edge-query\s+missing\s+last: created", text)
    assert re.search(r"Deployment\s+edge-query\s+as built\s+last: -", text)
    assert "42 ms" in text


def test_off_a_terminal_the_demo_prints_short_lines_and_plans_before_applying() -> None:
    out = io.StringIO()
    summary = run_demo(out=out)
    assert summary.ok
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= _view.WIDTH
    start = next(i for i, line in enumerate(lines) if "optk plan for observatory" in line)
    applied = next(i for i, line in enumerate(lines) if "removed spec.rule of observatory" in line)
    plan = "\n".join(lines[start:applied])
    assert "delete    StatefulSet.apps/v1 demo/observatory-rule" in plan
    assert "update    Deployment.apps/v1 demo/observatory-query" in plan


def test_keep_running_leaves_the_server_and_the_operator_up(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "examples.thanos.demo", "--keep-running"], cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    kubeconfig = None
    try:
        for raw in process.stdout:
            if "export KUBECONFIG=" in raw:
                kubeconfig = raw.split("export KUBECONFIG=", 1)[1].strip()
            if "press Ctrl-C" in raw:
                break
        assert kubeconfig is not None
        from kubernetes import config

        client = KubernetesClient(config.new_client_from_config(config_file=kubeconfig))
        edge = client.get("monitoring.optk.dev/v1alpha1", "Thanos", "edge", namespace="demo")
        assert edge["metadata"]["name"] == "edge"
        client.delete("v1", "Service", "edge-query", namespace="demo")
        deadline = 100
        while deadline:  # the operator still runs: it repairs the drift
            try:
                client.get("v1", "Service", "edge-query", namespace="demo")
                break
            except NotFoundError:
                deadline -= 1
                time.sleep(0.1)
        assert deadline, "the operator did not recreate the Service"
        process.send_signal(signal.SIGTERM)
        rest, _ = process.communicate(timeout=30)
        assert process.returncode == 0, rest[-2000:]
        assert "result                OK" in rest
    finally:
        if process.poll() is None:
            process.kill()
