"""The process's collector policy (``reconciler._driver.heap.HeapSettler``): it freezes the heap
once at start and once after the cold start is reconciled, never again. ``freeze`` is injected, so
the test process's own collector is left alone."""

from __future__ import annotations

import subprocess
import sys

from reconciler import KubernetesClient
from reconciler._driver.heap import HeapSettler
from tests.driver.conftest import child_data, make_operator, running, thing, wait_until


def test_the_heap_is_frozen_at_start_and_once_the_cold_start_is_reconciled(
    client: KubernetesClient, ns: str
) -> None:
    seen: list[dict[str, str] | None] = []  # the child of "a" at each freeze
    warmed: list[int] = []  # how many freezes came before the repair path was warmed
    settler = HeapSettler(freeze=lambda: seen.append(child_data(client, ns, "a")),
                          warm=lambda: warmed.append(len(seen)))
    client.create(thing(ns, "a"))
    settler.started()
    settler.started()
    assert seen == [None]
    with running(make_operator(ns), client) as runtime:
        assert wait_until(lambda: settler.poll(runtime))
        assert seen == [None, {"value": "1"}]  # frozen after the cold start was reconciled
        assert settler.frozen == 2
        assert warmed == [1]  # once, just before the second freeze
        client.create(thing(ns, "b"))
        assert wait_until(lambda: child_data(client, ns, "b") is not None)
        assert not settler.poll(runtime)
    assert len(seen) == 2
    assert warmed == [1]


def test_warming_the_repair_path_loads_what_the_matcher_loads_on_first_use() -> None:
    code = ("import sys; from reconciler._driver.heap import warm_repair_path; "
            "before = 'dictdiffer' in sys.modules; warm_repair_path(); "
            "print(before, 'dictdiffer' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.split() == ["False", "True"]


def test_a_runtime_that_does_not_lead_is_not_frozen(client: KubernetesClient, ns: str) -> None:
    frozen: list[int] = []
    settler = HeapSettler(freeze=lambda: frozen.append(1))
    operator = make_operator(ns)
    runtime = operator.start(client)
    runtime.stop(5)
    assert not settler.poll(runtime)  # stopped: it no longer leads
    assert frozen == []
    assert settler.frozen == 0
