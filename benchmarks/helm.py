"""Benchmark: what a Helm chart costs a parent's build (issue 40), with and without the cache.

The chart is the Observer example's (``examples/observer/charts/prometheus-operator``: two CRDs,
a ServiceAccount, RBAC, a Service and a Deployment), rendered by ``builders.helm`` through Helm's
own engine (helm-python-sdk). For ``--parents`` parents, each with its own values (a log level
and a replica count), it times:

- ``first_build_ms``: the parent's first build: ``helm.chart`` renders (cache miss) and every
  builder is run, as a reconcile does;
- ``resync_cached_ms``: the same build again, unchanged parent: answered from the cache (the
  chart digest is checked by the files' stat; nothing renders);
- ``resync_uncached_ms``: the same build with the cache cleared before each call: what every
  resync would cost without the cache (the chart hashed, loaded and rendered again);
- ``observer_build_ms``: ``examples.observer.builders.build`` of an Observer with the chart and
  a Thanos, resynced (cached), beside ``observer_without_chart_ms`` (the Thanos alone).

Each is the per-parent time over ``--rounds`` rounds. ``renders`` counts the engine's renders
(``helm.cache_info``): one per parent for the first builds, none for the cached resyncs.

Run: ``python -m benchmarks.helm [--json] [--parents 200] [--rounds 5]``. JSON keys:
``first_build_ms``, ``resync_cached_ms``, ``resync_uncached_ms``, ``observer_build_ms``,
``observer_without_chart_ms`` (each ``p50``, ``p99``, ``max``, ``samples``), ``renders``
(``first``, ``cached``, ``uncached``), ``objects``, ``engine``, ``parents``, ``python``,
``cpus``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

from builders import helm, run_builders
from examples.observer.builders import PROMETHEUS_OPERATOR_CHART
from examples.observer.builders import build as observer_build

LEVELS = ("debug", "info", "warn", "error")


def _values(i: int) -> dict[str, Any]:
    return {"logLevel": LEVELS[i % len(LEVELS)], "replicas": 1 + i % 3,
            "extraArgs": {"parent": f"p{i}"}}


def _build(i: int) -> int:
    chart = helm.chart(PROMETHEUS_OPERATOR_CHART, values=_values(i), release=f"p{i}",
                       namespace="bench")
    return len(run_builders(chart))


def _observer(i: int, *, chart: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"thanos": {"spec": {"objectStorageSecret": "objstore"}}}
    if chart:
        spec["prometheusOperatorChart"] = _values(i)
    return {"apiVersion": "observe.optk.dev/v1alpha1", "kind": "Observer",
            "metadata": {"name": f"p{i}", "namespace": "bench", "uid": f"uid-{i}"},
            "spec": spec}


def _timed(parents: int, call: Callable[[int], object],
           before: Callable[[], None] | None = None) -> list[float]:
    """Milliseconds per call of ``call(i)`` for each parent ``i``."""
    found = []
    for i in range(parents):
        if before is not None:
            before()
        start = time.perf_counter()
        call(i)
        found.append((time.perf_counter() - start) * 1000)
    return found


def _percentiles(samples: list[float]) -> dict[str, Any]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 3), "p99": round(p99, 3),
            "max": round(ordered[-1], 3), "samples": len(ordered)}


def run(parents: int = 200, rounds: int = 5) -> dict[str, Any]:
    """The figures of the module docstring, as a dict."""
    first: list[float] = []
    cached: list[float] = []
    uncached: list[float] = []
    renders = {"first": 0, "cached": 0, "uncached": 0}
    for _ in range(rounds):
        helm.clear_cache()
        first += _timed(parents, _build)
        renders["first"] += helm.cache_info().renders
        before = helm.cache_info().renders
        cached += _timed(parents, _build)
        renders["cached"] += helm.cache_info().renders - before
        counted = 0

        def clear() -> None:
            nonlocal counted
            counted += 1
            helm.clear_cache()

        uncached += _timed(parents, _build, before=clear)
        renders["uncached"] += counted  # each call after a clear renders once
    helm.clear_cache()
    for i in range(parents):
        run_builders(observer_build(_observer(i, chart=True)))
    with_chart = [t for _ in range(rounds) for t in _timed(
        parents, lambda i: run_builders(observer_build(_observer(i, chart=True))))]
    without = [t for _ in range(rounds) for t in _timed(
        parents, lambda i: run_builders(observer_build(_observer(i, chart=False))))]
    return {
        "first_build_ms": _percentiles(first), "resync_cached_ms": _percentiles(cached),
        "resync_uncached_ms": _percentiles(uncached),
        "observer_build_ms": _percentiles(with_chart),
        "observer_without_chart_ms": _percentiles(without),
        "renders": renders, "objects": _build(0), "engine": helm.engine_version(),
        "parents": parents, "rounds": rounds, "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.helm``: print the figures (one JSON object with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--parents", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args(argv)
    figures = run(args.parents, args.rounds)
    if args.json:
        print(json.dumps(figures))
        return 0
    print(f"chart: {figures['objects']} objects, Helm {figures['engine']}, "
          f"{figures['parents']} parents x {figures['rounds']} rounds")
    for key in ("first_build_ms", "resync_cached_ms", "resync_uncached_ms", "observer_build_ms",
                "observer_without_chart_ms"):
        row = figures[key]
        print(f"{key:28} p50 {row['p50']:8.3f}  p99 {row['p99']:8.3f}  max {row['max']:8.3f}")
    print(f"renders: {figures['renders']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
