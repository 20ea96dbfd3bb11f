"""``Operator.on_start`` hooks and loading an operator from the working directory."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from reconciler import KubernetesClient, StartContext
from reconciler._commands.loading import load_operator
from tests.driver.conftest import child_data, make_operator, running, thing, wait_until


@pytest.mark.both_servers
def test_hooks_run_before_any_reconcile_and_clean_up_at_stop(
    client: KubernetesClient, ns: str
) -> None:
    seen: list[str] = []

    def hook(context: StartContext) -> Any:
        seen.append(f"start:{context.stats.total}")  # no reconcile has run yet
        return lambda: seen.append("cleanup")

    def second(context: StartContext) -> Any:
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

    def good(context: StartContext) -> Any:
        return lambda: cleaned.append("good")

    def bad(context: StartContext) -> Any:
        raise RuntimeError("cannot watch the CRD")

    operator = make_operator(ns, on_start=[good, bad])
    with pytest.raises(RuntimeError, match="cannot watch the CRD"):
        operator.start(client)
    assert cleaned == ["good"]


@pytest.mark.both_servers
def test_a_hook_gets_the_client_clock_and_request_and_reads_of_the_runtime_are_deprecated(
    client: KubernetesClient, ns: str
) -> None:
    client.create(thing(ns, "asked"))
    got: dict[str, Any] = {}

    def hook(context: StartContext) -> None:
        got["context"] = context
        got["listed"] = context.client.list("v1", "ConfigMap", namespace=ns)
        with pytest.warns(DeprecationWarning, match=r"StartContext\.queue .*deprecated"):
            got["queue"] = context.queue  # the earlier form: the runtime's attribute
        with pytest.warns(DeprecationWarning, match="use StartContext.client"):
            got["inner"] = context.inner_client

    with running(make_operator(ns, on_start=[hook]), client) as runtime:
        context = got["context"]
        assert isinstance(context, StartContext)
        assert context.clock is runtime.clock
        assert got["queue"] is runtime.queue
        assert got["inner"] is context.client is runtime.inner_client
        assert got["listed"]["kind"] == "ConfigMapList"
        assert wait_until(lambda: child_data(client, ns, "asked") is not None)
        before = runtime.stats.triggers["manual"]
        context.request(ns, "asked")  # queues the parent as runtime.request does
        assert runtime.stats.triggers["manual"] == before + 1
        with pytest.raises(AttributeError, match="StartContext has no attribute 'nothing'"):
            context.nothing  # noqa: B018


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
