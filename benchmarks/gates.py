"""Benchmark: what a component's gates cost a converging parent (issue 39).

The Thanos example's query frontend waits for the query Deployment to be Available
(``depends_on``), so a parent converges in several reconciles: the first writes everything but
the frontend, the query Deployment's readiness wakes it to write the frontend, the workloads'
readiness flips its ``Ready``. Kopf's peer and the "same work" comparisons run it without that
gate. This benchmark runs the example both ways, alternating, against a fresh
``optk apiserver`` each time:

- ``on``: ``examples.thanos.operator:operator`` as it is;
- ``off``: :data:`ungated_operator`, the same operator whose builders carry no component node
  (no ``depends_on``: every child written at the first reconcile), the work of kopf's peer.

Each run starts the operator with no parents and waits until it is idle (its start-up is not
counted), creates N parents (the ``benchmarks._fleet`` ones: ten children each, the harness
playing the kubelet, ``benchmarks._child_watch``), waits until every child is as built and every
parent says ``Ready``, then until the operator is idle again (``benchmarks._scenario.Probe``).
Figures per mode (medians over the rounds, each round's in ``runs``): ``cpu_per_parent_ms``
(the operator's CPU from the parents' creation to idle, per parent), ``converge_s``,
``requests_per_parent`` (by verb and resource: how many status writes and child writes a parent
cost), and ``ratio`` = on / off of the CPU per parent (issue 39's goal: at most 1.2).

Run: ``python -m benchmarks.gates [--parents 100] [--rounds 2] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmarks import _fleet as fleet
from benchmarks._child_watch import ChildWatch
from benchmarks._kube import Cluster, collection_path
from benchmarks._processes import Processes, start_apiserver
from benchmarks._scenario import (
    PARENTS_PLURAL,
    RESYNC_SECONDS,
    Probe,
    _by_resource,
    bounded,
    create_when_served,
)
from examples.thanos.crds import API_VERSION, THANOS_CRD

MODES = {"on": "examples.thanos.operator:operator", "off": "benchmarks.gates:ungated_operator"}


def _ungated(build: Any) -> Any:
    from builders.composition import GatedBuilder

    def build_without_gates(parent: Any, inputs: Any) -> list[Any]:
        return [b.builder if isinstance(b, GatedBuilder) else b for b in build(parent, inputs)]

    return build_without_gates


def _make_ungated() -> Any:
    import attrs

    from examples.thanos.operator import make_operator

    made = make_operator()
    return attrs.evolve(made, build=_ungated(made.build))


def __getattr__(name: str) -> Any:  # built on use: importing the benchmark starts no operator
    if name == "ungated_operator":
        return _make_ungated()
    raise AttributeError(name)


def _ready(parent: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (parent.get("status") or {}).get("conditions") or ())


async def _all_ready(cluster: Cluster, *, timeout: float) -> None:
    path = collection_path(API_VERSION, PARENTS_PLURAL, fleet.NAMESPACE)
    deadline = time.monotonic() + timeout
    while True:
        listed = await cluster.request("GET", path, verb="list")
        waiting = [p["metadata"]["name"] for p in listed.get("items") or () if not _ready(p)]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(waiting)} parents not Ready after {timeout:.0f} s: "
                               f"{waiting[:5]}")
        await asyncio.sleep(0.5)


async def _one(mode: str, parents: int, *, workdir: Path, timeout: float) -> dict[str, Any]:
    with Processes(workdir) as processes:
        _, kubeconfig = start_apiserver(processes)
        async with Cluster(kubeconfig) as cluster:
            await cluster.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                  verb="create", body=THANOS_CRD)
            path = collection_path(API_VERSION, PARENTS_PLURAL, fleet.NAMESPACE)
            await create_when_served(cluster, path, [], first=[(
                f"/api/v1/namespaces/{fleet.NAMESPACE}/secrets", fleet.object_storage_secret())])
            watch = ChildWatch(cluster)
            await watch.start()
            argv = [sys.executable, "-m", "reconciler", "run", MODES[mode],
                    "--kubeconfig", str(kubeconfig)]
            operator = processes.start(f"operator-{mode}", argv,
                                       env={"OPTK_RESYNC_INTERVAL": f"{RESYNC_SECONDS}s"})
            probe = Probe(cluster, operator.pid)
            await asyncio.sleep(1.0)
            await probe.quiet(idle=1.5, timeout=60)
            processes.check_alive(f"operator-{mode}", operator)
            before = await probe.snapshot()
            before_resources = (await cluster.server_counts()).get("breakdown") or []
            start = time.monotonic()
            objects = [fleet.parent(i) for i in range(parents)]
            created = await bounded([cluster.request("POST", path, verb="create", body=dict(o))
                                     for o in objects])
            watch.set_desired(fleet.desired_children(created))
            await watch.converged(timeout=timeout)
            await _all_ready(cluster, timeout=timeout)
            converged = time.monotonic() - start
            await probe.quiet(idle=1.5, timeout=60)
            after = await probe.snapshot()
            after_resources = (await cluster.server_counts()).get("breakdown") or []
            processes.check_alive(f"operator-{mode}", operator)
            await watch.stop()
    by_verb, cpu = Probe.delta(before, after)
    resources = _by_resource(after_resources, before_resources)
    return {
        "mode": mode, "parents": parents, "cpu_s": cpu,
        "cpu_per_parent_ms": round(cpu * 1000 / parents, 2),
        "converge_s": round(converged, 3),
        "requests_per_parent": {k: round(v / parents, 2) for k, v in by_verb.items() if v},
        "resources_per_parent": {k: round(v / parents, 2) for k, v in resources.items()},
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def _median(runs: Iterable[dict[str, Any]], key: str) -> float:
    return round(statistics.median(run[key] for run in runs), 3)


def run(parents: int, *, rounds: int = 2, timeout: float = 600.0) -> dict[str, Any]:
    """Both modes, alternating (``on`` first), ``rounds`` times; see the module docstring."""
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="optk-gates-") as tmp:
        for round_ in range(rounds):
            for mode in MODES:
                workdir = Path(tmp) / f"{mode}-{round_}"
                workdir.mkdir()
                runs.append(asyncio.run(_one(mode, parents, workdir=workdir, timeout=timeout)))
    figures: dict[str, Any] = {"parents": parents, "rounds": rounds}
    for mode in MODES:
        mine = [r for r in runs if r["mode"] == mode]
        figures[mode] = {"cpu_per_parent_ms": _median(mine, "cpu_per_parent_ms"),
                         "converge_s": _median(mine, "converge_s"),
                         "requests_per_parent": mine[-1]["requests_per_parent"],
                         "resources_per_parent": mine[-1]["resources_per_parent"]}
    off = figures["off"]["cpu_per_parent_ms"]
    figures["ratio"] = round(figures["on"]["cpu_per_parent_ms"] / off, 3) if off else None
    figures.update(runs=runs, python=platform.python_version(), cpus=os.cpu_count())
    return figures


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print (the JSON line last with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--parents", type=int, default=100, help="Thanos parents (10 children)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each mode, alternating")
    parser.add_argument("--timeout", type=float, default=600.0, help="convergence bound (s)")
    args = parser.parse_args(argv)
    figures = run(args.parents, rounds=args.rounds, timeout=args.timeout)
    for mode in MODES:
        print(f"gates {mode}: {figures[mode]['cpu_per_parent_ms']} ms CPU per parent, "
              f"converged in {figures[mode]['converge_s']} s; requests per parent "
              f"{figures[mode]['resources_per_parent']}")
    print(f"CPU per parent, gates on / off: {figures['ratio']}x (goal: at most 1.2x)")
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
