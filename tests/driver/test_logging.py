"""The operator says what it does: one INFO line per reconcile that changed something, one line
per failure, nothing at INFO when nothing changed (reconciler._reconcile.changelog, the worker's
log)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from builders import ResourceBuilder
from reconciler import KubernetesClient
from reconciler._commands.running import JsonLogFormatter
from reconciler.testing import wait_idle
from tests.driver.conftest import child_data, make_operator, running, thing, wait_until
from tests.driver.sample_operator import build as base

ROOT = Path(__file__).resolve().parents[2]


def _build(parent: Any) -> list[ResourceBuilder]:
    if parent["spec"].get("value") == "bad":
        raise ValueError("value 'bad' is refused")
    return list(base(parent))


def _lines(caplog: pytest.LogCaptureFixture, name: str, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == level and r.name.startswith("optk") and f"[{name}]" in r.getMessage()]


def test_one_info_line_per_change_none_when_nothing_changed_one_per_failure(
    client: KubernetesClient, ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    operator = make_operator(ns, build=_build)
    with caplog.at_level(logging.INFO, logger="optk"), running(operator, client) as runtime:
        client.create(thing(ns, "a"))
        assert wait_until(lambda: child_data(client, ns, "a") == {"value": "1"})
        assert wait_idle(runtime, 5)
        key = f"{ns}/a"
        assert _lines(caplog, key, logging.INFO) == [f"[{key}] reconciled: created ConfigMap a-cfg"]
        client.patch(thing(ns, "a")["apiVersion"], "Thing", "a", {"spec": {"value": "2"}},
                     patch_type="application/merge-patch+json", namespace=ns)
        assert wait_until(lambda: child_data(client, ns, "a") == {"value": "2"})
        assert wait_idle(runtime, 5)
        assert _lines(caplog, key, logging.INFO)[1:] == [
            f"[{key}] reconciled: patched ConfigMap a-cfg (data.value)"]
        before = runtime.stats.reconciles[(ns, "a")]
        runtime.request(ns, "a")  # nothing to change: silent at INFO
        assert wait_until(lambda: runtime.stats.reconciles[(ns, "a")] > before)
        assert wait_idle(runtime, 5)
        assert len(_lines(caplog, key, logging.INFO)) == 2
        client.create(thing(ns, "b", value="bad"))

        def refusals() -> list[logging.LogRecord]:
            return [r for r in caplog.records if r.levelno >= logging.WARNING
                    and "'bad' is refused" in r.getMessage()]

        # the worker counts the failure, then logs it: wait for the line
        assert wait_until(lambda: runtime.stats.failures[(ns, "b")] >= 1 and refusals())
        failures = runtime.stats.failures[(ns, "b")]
        warnings = refusals()
        assert len(warnings) in (failures - 1, failures, failures + 1)  # a retry may be under way
        assert all(f"[{ns}/b] reconcile failed" in r.getMessage() for r in warnings)


def test_optk_run_quiet_logs_no_info_and_a_bad_level_is_refused() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    refused = subprocess.run(
        [sys.executable, "-m", "reconciler", "run", "tests.driver.sample_operator",
         "--embedded", "--log-level", "chatty"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert "unknown log level 'chatty'" in refused.stderr
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "run", "tests.driver.sample_operator",
         "--embedded", "-v"], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    try:
        seen = []
        for raw in process.stderr:
            seen.append(raw)
            if "started (identity" in raw:
                break
            assert len(seen) < 2000
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
    assert any(" DEBUG " in line for line in seen)
    quiet = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "run", "tests.driver.sample_operator",
         "--embedded", "-q", "--metrics-port", "0"],
        cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(3)
        quiet.send_signal(signal.SIGTERM)
        _, err = quiet.communicate(timeout=30)
    finally:
        if quiet.poll() is None:
            quiet.kill()
    assert quiet.returncode == 0, err[-2000:]
    assert " INFO " not in err


def test_json_lines_carry_rfc3339_utc_time_with_milliseconds() -> None:
    record = logging.LogRecord("optk.operator", logging.INFO, __file__, 1, "hello %s",
                               ("world",), None)
    record.created = 1795705445.1239  # 2026-11-26T15:04:05.123Z (truncated, not rounded)
    line = json.loads(JsonLogFormatter().format(record))
    assert line == {"ts": "2026-11-26T15:04:05.123Z", "level": "info",
                    "logger": "optk.operator", "msg": "hello world"}
