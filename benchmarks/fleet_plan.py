"""Benchmark: ``optk plan --all`` over a fleet, its requests by verb and its wall time (issue 29).

Against the embedded API server run as a subprocess (``optk apiserver``), N parents of
``benchmarks.driver``'s kind (three ConfigMaps, a headless Service and a Deployment each: five
children) are created and reconciled once by the operator as it is (version 1). Then, per size:

- ``unchanged``: ``plan_fleet`` (what ``optk plan --all`` runs) with version 1: "no changes";
- ``changed``: with version 2, whose builders give every Deployment a new image: N patches
  planned;
- ``per_parent_dry_run``: the peer, the path ``optk plan -f`` takes (``plan_parents``: per
  parent a GET, one LIST per child kind with its owner label, a server-side dry run per change)
  over the same listed parents with version 2.

Each reports ``requests`` (by verb as the server counted them, and ``total``), ``writes``
(create/update/patch/delete: the dry runs of the peer count here; the fleet plan's must be 0),
``wall_s`` (the planning call, the parents' list included) and the plan's ``changes``.

Run: ``python -m benchmarks.fleet_plan [--json] [--sizes 10,100,1000] [--no-peer] [--real]``
(``--real``: a real control plane from ``OPTK_KUBE_ASSETS``, requests from its audit log).
JSON keys:
``sizes.<N>.<unchanged|changed|per_parent_dry_run>.{requests, writes, wall_s, changes,
exit_code}``, ``sizes.<N>.setup_s``, ``children_per_parent``, ``server``, ``python``, ``cpus``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks.driver import API_VERSION, CRD, WRITES, apiserver, children, real_apiserver
from builders import ResourceBuilder
from reconciler import KubernetesClient, Operator, ParentReconciler, ParentSettings
from reconciler._commands.fleet_plans import plan_fleet
from reconciler._commands.fleet_report import fleet_exit_code, summarize
from reconciler._commands.plans import plan_parents
from reconciler._reconcile.reconciling import Action

NAME = "fleet-bench"
KIND = "Drive"
NEW_IMAGE = "nginx:1.27"


def children_v2(parent: Any) -> list[ResourceBuilder]:
    """Version 2 of the builders: the Deployment's image changes, for every parent."""
    built = [builder() for builder in children(parent)]
    deployment, state = built[-1]
    spec = deployment["spec"]
    template = spec["template"]
    container = {**template["spec"]["containers"][0], "image": NEW_IMAGE}
    changed = {**deployment, "spec": {**spec, "template": {
        **template, "spec": {**template["spec"], "containers": [container]}}}}
    return [*(lambda b=b: b for b in built[:-1]), lambda: (changed, state)]


def _delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    delta = {verb: after.get(verb, 0) - before.get(verb, 0) for verb in after}
    delta = {verb: count for verb, count in sorted(delta.items()) if count}
    return {**delta, "total": sum(delta.values())}


def _measure(counts: Callable[[], dict[str, int]], run: Callable[[], tuple[int, int]]
             ) -> dict[str, Any]:
    before = counts()
    started = time.perf_counter()
    changes, code = run()
    wall = time.perf_counter() - started
    requests = _delta(before, counts())
    return {"requests": requests, "writes": sum(requests.get(v, 0) for v in WRITES),
            "wall_s": round(wall, 3), "changes": changes, "exit_code": code}


def _setup(client: KubernetesClient, namespace: str, size: int) -> float:
    """``size`` parents in ``namespace``, each reconciled once by version 1 (seconds taken)."""
    started = time.perf_counter()
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    reconciler = ParentReconciler(
        client, children, operator_name=NAME, settings=ParentSettings(events=False),
    )

    def one(index: int) -> None:
        parent = client.create({"apiVersion": API_VERSION, "kind": KIND,
                                "metadata": {"name": f"d{index:05d}", "namespace": namespace},
                                "spec": {"size": 1 + index % 3}})
        if not reconciler.reconcile(parent).ok:
            raise AssertionError(f"setup: parent d{index:05d} did not converge")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, range(size)))
    return time.perf_counter() - started


def run_size(client: KubernetesClient, counts: Callable[[], dict[str, int]], size: int, *,
             peer: bool) -> dict[str, Any]:
    """The three measurements at one fleet size."""
    namespace = f"fleet-plan-{size}"
    result: dict[str, Any] = {"setup_s": round(_setup(client, namespace, size), 1)}
    for name, build in (("unchanged", children), ("changed", children_v2)):
        operator = Operator(api_version=API_VERSION, kind=KIND, build=build, name=NAME)

        def fleet(operator: Operator = operator) -> tuple[int, int]:
            summary = summarize(plan_fleet(client, operator, namespace=namespace))
            return summary.changes, fleet_exit_code(summary)

        result[name] = _measure(counts, fleet)
    if peer:
        def per_parent() -> tuple[int, int]:
            parents = client.list(API_VERSION, KIND, namespace=namespace)["items"]
            results = plan_parents(client, children_v2, parents, operator_name=NAME)
            changes = sum(1 for r in results for c in r.children
                          if c.action is not Action.UNCHANGED)
            return changes, 0 if all(r.ok for r in results) else 1

        result["per_parent_dry_run"] = _measure(counts, per_parent)
    client.delete("v1", "Namespace", namespace)
    return result


def run(sizes: list[int], *, peer: bool = True, real: bool = False) -> dict[str, Any]:
    """Every size against one embedded API server subprocess (or one real control plane)."""
    with (real_apiserver() if real else apiserver()) as (client, counts):
        client.create(CRD)
        deadline = time.monotonic() + 30
        while not client.is_served(API_VERSION, KIND):
            if time.monotonic() > deadline:
                raise AssertionError("the benchmark's CRD is not served after 30 s")
            time.sleep(0.05)
        by_size = {str(size): run_size(client, counts, size, peer=peer) for size in sizes}
    return {"sizes": by_size, "children_per_parent": len(children({"metadata": {"name": "x"}})),
            "server": "real (kube-apiserver, etcd)" if real
            else "embedded (optk apiserver subprocess)",
            "python": platform.python_version(), "cpus": os.cpu_count()}


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print a summary (and the JSON line with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--sizes", default="10,100,1000",
                        help="comma-separated fleet sizes (parents; default 10,100,1000)")
    parser.add_argument("--no-peer", dest="peer", action="store_false",
                        help="skip the per-parent dry-run path of optk plan -f")
    parser.add_argument("--real", action="store_true",
                        help="a real control plane (OPTK_KUBE_ASSETS) instead of the embedded "
                             "server; requests from its audit log")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    result = run(sizes, peer=args.peer, real=args.real)
    for size, figures in result["sizes"].items():
        for name in ("unchanged", "changed", "per_parent_dry_run"):
            if name in figures:
                row = figures[name]
                print(f"{size:>6} parents  {name:<19} {row['wall_s']:>8.3f} s  "
                      f"{row['requests']['total']:>6} requests ({row['writes']} writes)  "
                      f"{row['changes']} changes")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
