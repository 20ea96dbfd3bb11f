"""``Operator.on_start`` hooks and loading an operator from the working directory."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from reconciler import KubernetesClient
from reconciler._commands.loading import load_operator
from reconciler._driver.runtime import OperatorRuntime
from tests.driver.conftest import child_data, make_operator, running, thing, wait_until


@pytest.mark.both_servers
def test_hooks_run_before_any_reconcile_and_clean_up_at_stop(
    client: KubernetesClient, ns: str
) -> None:
    seen: list[str] = []

    def hook(runtime: OperatorRuntime) -> Any:
        seen.append(f"start:{runtime.stats.total}")  # no reconcile has run yet
        return lambda: seen.append("cleanup")

    def second(runtime: OperatorRuntime) -> Any:
        seen.append("second")
        return lambda: seen.append("second-cleanup")

    client.create(thing(ns, "early"))
    with running(make_operator(ns, on_start=[hook, second]), client):
        assert wait_until(lambda: child_data(client, ns, "early") is not None)
        assert seen == ["start:0", "second"]
    assert seen == ["start:0", "second", "second-cleanup", "cleanup"]  # reverse order


@pytest.mark.both_servers
def test_a_failing_hook_aborts_the_start_and_stops_what_started(
    client: KubernetesClient, ns: str
) -> None:
    cleaned: list[str] = []

    def good(runtime: OperatorRuntime) -> Any:
        return lambda: cleaned.append("good")

    def bad(runtime: OperatorRuntime) -> Any:
        raise RuntimeError("cannot watch the CRD")

    operator = make_operator(ns, on_start=[good, bad])
    with pytest.raises(RuntimeError, match="cannot watch the CRD"):
        operator.start(client)
    assert cleaned == ["good"]


def test_optk_run_finds_modules_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_operator_module.py").write_text(
        "from tests.driver.sample_operator import operator\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    try:
        assert load_operator("my_operator_module:operator").kind == "Thing"
    finally:
        sys.modules.pop("my_operator_module", None)
