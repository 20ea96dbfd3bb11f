"""Benchmark: children placed in other clusters (issue 41), K clusters x N parents.

Every API server is an ``optk apiserver`` subprocess (the home cluster and each workload
cluster), so this process's CPU and memory are the operator's own; each server counts its
requests (``/debug/optk/requests``). The operator (in this process) reconciles ``N`` parents of
``benchmarks.driver``'s ``Drive`` kind at home; each parent places two children (a ConfigMap
and a ServiceAccount, in the namespace ``tenants``) in **every** cluster declared by a Secret
(``reconciler.ClusterSecrets``), and keeps one ConfigMap at home. Run for each ``K`` of
``--clusters`` (default ``1,10``), with a fresh home server and operator each time:

- ``converge_s`` and ``converge_cpu_s``: the operator started with the parents there, until
  every remote child exists and the queue is idle; the process CPU in that time;
- ``rss_mib``: this process's resident memory when converged, minus before the operator started;
- ``steady_requests``: the requests every server saw in ``--steady`` seconds of a converged,
  idle operator (goal: 0), home and remote apart;
- ``remote_drift_ms``: a remote child's ``data`` edited in cluster 0, the time until the
  operator put it back (polled every 2 ms, at most ``--drift-timeout`` seconds; ``None``: not
  repaired in that time), median of ``--drifts`` edits;
- per cluster, from the two ends of ``--clusters``: the marginal ``cpu_s_per_cluster`` and
  ``rss_mib_per_cluster`` ((figure at K_max - figure at K_min) / (K_max - K_min)).

Run: ``python -m benchmarks.clusters [--json] [--parents 100] [--clusters 1,10]``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from benchmarks.driver import API_VERSION, CRD, MERGE, apiserver_and_kubeconfig
from builders import DesiredState, ResourceBuilder, placed
from reconciler import (
    Applying,
    ClusterSecrets,
    KubernetesClient,
    NotFoundError,
    Operator,
    Reporting,
    ResyncPolicy,
)
from reconciler.testing import wait_idle, wait_synced

NAMESPACE = "clusters-bench"
FLEET = "fleet"
REMOTE_NAMESPACE = "tenants"

Counts = Callable[[], dict[str, int]]


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _builder(obj: dict[str, Any]) -> ResourceBuilder:
    return lambda: (obj, DesiredState.PRESENT)


def build_for(clusters: list[str]) -> Callable[[Any], list[ResourceBuilder]]:
    """One ConfigMap at home, and a ConfigMap and a ServiceAccount in each of ``clusters``."""
    def build(parent: Any) -> list[ResourceBuilder]:
        name = parent["metadata"]["name"]
        size = str((parent.get("spec") or {}).get("size", 1))
        made = [_builder({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": f"{name}-home"}, "data": {"size": size}})]
        for cluster in clusters:
            config = {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": f"{name}-settings", "namespace": REMOTE_NAMESPACE},
                      "data": {"size": size, "cluster": cluster}}
            account = {"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": f"{name}-agent", "namespace": REMOTE_NAMESPACE}}
            made += [placed(_builder(config), cluster=cluster),
                     placed(_builder(account), cluster=cluster)]
        return made
    return build


def _total(counts: dict[str, int]) -> int:
    return sum(v for k, v in counts.items() if k != "watch")


@contextlib.contextmanager
def _servers(count: int) -> Iterator[list[tuple[KubernetesClient, Counts, str]]]:
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(apiserver_and_kubeconfig()) for _ in range(count)]


def _converged(remotes: list[tuple[KubernetesClient, Counts, str]], parents: int) -> bool:
    for client, _, _ in remotes:
        listed = client.list("v1", "ConfigMap", namespace=REMOTE_NAMESPACE)
        if len(listed.get("items") or ()) < parents:
            return False
    return True


def run_once(parents: int, clusters: int, *, steady: float, drifts: int,
             drift_timeout: float) -> dict[str, Any]:
    """The figures for ``clusters`` workload clusters (fresh servers and operator)."""
    with _servers(clusters + 1) as servers:
        (home, _, _), remotes = servers[0], servers[1:]
        home.create(CRD)
        deadline = time.monotonic() + 30
        while not home.is_served(API_VERSION, "Drive") and time.monotonic() < deadline:
            time.sleep(0.05)
        for ns in (NAMESPACE, FLEET):
            home.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        names = [f"edge-{i}" for i in range(clusters)]
        for name, (remote, _, kubeconfig) in zip(names, remotes, strict=True):
            remote.create({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": REMOTE_NAMESPACE}})
            home.create({"apiVersion": "v1", "kind": "Secret",
                         "metadata": {"name": name, "namespace": FLEET},
                         "data": {"kubeconfig": base64.b64encode(kubeconfig.encode()).decode()}})
        for i in range(parents):
            home.create({"apiVersion": API_VERSION, "kind": "Drive",
                         "metadata": {"name": f"p{i}", "namespace": NAMESPACE},
                         "spec": {"size": 1}})
        operator = Operator(
            api_version=API_VERSION, kind="Drive", build=build_for(names), namespace=NAMESPACE,
            name="clusters-bench", reporting=Reporting(events=False),
            resync=ResyncPolicy(heartbeat=None),
            applying=Applying(clusters=ClusterSecrets(namespace=FLEET)),
        )
        rss_before, cpu_before, started = _rss_mib(), time.process_time(), time.monotonic()
        runtime = operator.start(home)
        try:
            assert wait_synced(runtime, 120)
            deadline = time.monotonic() + 600
            while not _converged(remotes, parents) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert wait_idle(runtime, 600, settle=1.0)
            converge_s = time.monotonic() - started - 1.0  # the settle is not work
            converge_cpu = time.process_time() - cpu_before
            rss = _rss_mib() - rss_before
            before = [counts() for _, counts, _ in servers]
            time.sleep(steady)
            after = [counts() for _, counts, _ in servers]
            steady_counts = [_total(a) - _total(b) for a, b in zip(after, before, strict=True)]
            remote, _, _ = remotes[0]
            repaired: list[float | None] = []
            for n in range(drifts):
                name = f"p{n % parents}-settings"
                remote.patch("v1", "ConfigMap", name, {"data": {"size": f"drift-{n}"}},
                             patch_type=MERGE, namespace=REMOTE_NAMESPACE)
                edited = time.monotonic()
                took: float | None = None
                while time.monotonic() - edited < drift_timeout:
                    try:
                        live = remote.get("v1", "ConfigMap", name, namespace=REMOTE_NAMESPACE)
                    except NotFoundError:
                        live = {}
                    if (live.get("data") or {}).get("size") == "1":
                        took = (time.monotonic() - edited) * 1000
                        break
                    time.sleep(0.002)
                repaired.append(took)
                wait_idle(runtime, 30, settle=0.2)
        finally:
            runtime.stop(5)
    done = [r for r in repaired if r is not None]
    return {
        "clusters": clusters, "parents": parents, "remote_children": parents * clusters * 2,
        "converge_s": round(converge_s, 2), "converge_cpu_s": round(converge_cpu, 2),
        "rss_mib": round(rss, 1),
        "steady_requests": {"home": steady_counts[0], "remote": sum(steady_counts[1:])},
        "remote_drift_ms": round(statistics.median(done), 1) if done else None,
        "remote_drifts_repaired": f"{len(done)}/{len(repaired)}",
    }


def run(parents: int, sizes: list[int], *, steady: float, drifts: int,
        drift_timeout: float) -> dict[str, Any]:
    """Every size in turn, and the marginal cost of a cluster between the smallest and largest."""
    runs = [run_once(parents, k, steady=steady, drifts=drifts, drift_timeout=drift_timeout)
            for k in sizes]
    figures: dict[str, Any] = {"runs": runs}
    low, high = min(runs, key=lambda r: r["clusters"]), max(runs, key=lambda r: r["clusters"])
    if high["clusters"] > low["clusters"]:
        span = high["clusters"] - low["clusters"]
        figures["cpu_s_per_cluster"] = round(
            (high["converge_cpu_s"] - low["converge_cpu_s"]) / span, 3)
        figures["rss_mib_per_cluster"] = round((high["rss_mib"] - low["rss_mib"]) / span, 2)
    return figures


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.clusters``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.clusters")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--parents", type=int, default=100)
    parser.add_argument("--clusters", default="1,10",
                        help="comma-separated cluster counts, each run on fresh servers")
    parser.add_argument("--steady", type=float, default=10.0,
                        help="seconds of an idle, converged operator counted (default 10)")
    parser.add_argument("--drifts", type=int, default=5)
    parser.add_argument("--drift-timeout", type=float, default=5.0)
    args = parser.parse_args(argv)
    sizes = [int(k) for k in args.clusters.split(",") if k.strip()]
    figures = run(args.parents, sizes, steady=args.steady, drifts=args.drifts,
                  drift_timeout=args.drift_timeout)
    figures |= {"python": platform.python_version(), "cpus": os.cpu_count(),
                "load": round(os.getloadavg()[0], 1)}
    if args.json:
        print(json.dumps(figures))
    else:
        print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
