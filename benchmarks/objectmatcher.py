"""Benchmark: ``calculate_patch`` on a real server's Deployment, against the floor and naive peers.

The live object is the Deployment a real kube-apiserver 1.25 returned (``deployment.json`` of the
recordings: server defaults, ``managedFields``, ``status``), carrying the last-applied annotation;
``desired`` is what was sent. Two cases: ``unchanged`` (desired as sent) and ``one_change`` (the
container image changed). In the same run it times the floor, ``json.loads(json.dumps(live))``,
and two naive peers on the same pair: ``list(dictdiffer.diff(live, desired))`` and
``jsonpatch.make_patch(live, desired)`` (both report false diffs for every server default; they
are here for their cost). Each figure is the best of several repeats, in microseconds per call.

``objectmatcher_cold`` repeats the ``objectmatcher`` figure with the annotation decode cache
cleared before every call: the cost when a live object is seen for the first time (informer
caches hand the same annotation text to every comparison, so the warm figure is the steady state).

Run: ``python -m benchmarks.objectmatcher [--json]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dictdiffer
import jsonpatch

from objectmatcher import LAST_APPLIED_ANNOTATION, calculate_patch, set_last_applied

FIXTURE = (Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "real-apiserver"
           / "deployment.json")
PEERS = ("objectmatcher", "objectmatcher_cold", "json_roundtrip", "dictdiffer", "jsonpatch")


def load_case() -> tuple[dict[str, Any], dict[str, Any]]:
    """``(live, desired)``: the recorded Deployment with our annotation, and what was sent."""
    recording = json.loads(FIXTURE.read_text())
    desired = recording["sent"]
    live = copy.deepcopy(recording["returned"])
    annotation = set_last_applied(desired)["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
    live["metadata"].setdefault("annotations", {})[LAST_APPLIED_ANNOTATION] = annotation
    return live, desired


def _clear_cache() -> None:
    from objectmatcher import _annotations  # the benchmark may reach the private cache

    _annotations.clear_annotation_cache()


def _cold(live: dict[str, Any], desired: dict[str, Any]) -> Any:
    _clear_cache()
    return calculate_patch(live, desired)


def per_call_us(func: Callable[[], Any], *, repeat: int = 7, budget: float = 0.2) -> float:
    """Best time per call of ``func`` in microseconds (auto-ranged to about ``budget`` s)."""
    timer = timeit.Timer(func)
    number, _ = timer.autorange()
    number = max(1, int(number * budget / 0.2))
    best = min(timer.repeat(repeat=repeat, number=number))
    return round(best / number * 1e6, 2)


def measure(live: dict[str, Any], desired: dict[str, Any]) -> dict[str, float]:
    """The five figures for one ``(live, desired)`` pair."""
    return {
        "objectmatcher": per_call_us(lambda: calculate_patch(live, desired)),
        "objectmatcher_cold": per_call_us(lambda: _cold(live, desired)),
        "json_roundtrip": per_call_us(lambda: json.loads(json.dumps(live))),
        "dictdiffer": per_call_us(lambda: list(dictdiffer.diff(live, desired))),
        "jsonpatch": per_call_us(lambda: jsonpatch.make_patch(live, desired)),
    }


def run() -> dict[str, Any]:
    """Both cases, checked for the expected outcome before being timed."""
    live, desired = load_case()
    assert calculate_patch(live, desired).is_empty, "the unchanged case must need no patch"
    changed = copy.deepcopy(desired)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.27"
    assert len(calculate_patch(live, changed).diff) == 2  # the image and the annotation
    return {
        "unchanged": measure(live, desired),
        "one_change": measure(live, changed),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> int:
    """Print a table, and with ``--json`` the figures as one JSON object on the last line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    args = parser.parse_args(argv)
    figures = run()
    print(f"calculate_patch on {FIXTURE.name} (us per call, best of 7)")
    print(f"{'case':<12}" + "".join(f"{peer:>20}" for peer in PEERS))
    for case in ("unchanged", "one_change"):
        print(f"{case:<12}" + "".join(f"{figures[case][peer]:>20.2f}" for peer in PEERS))
    ratio = figures["unchanged"]["objectmatcher"] / figures["unchanged"]["json_roundtrip"]
    print(f"unchanged / json_roundtrip = {ratio:.2f}x (goal: at most 3x)")
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
