"""Benchmark: the driver (watch + periodic reconciliation) against the embedded API server, or
with ``--real`` against a real control plane.

The server runs in a subprocess (``optk apiserver``) so the figures of this process are the
operator's own; requests are counted by the server (``/debug/optk/requests``). With ``--real``
the server is a ``reconciler.envtest.ControlPlane`` (kube-apiserver, etcd and
kube-controller-manager from ``OPTK_KUBE_ASSETS``, also separate processes) and requests are
counted from kube-apiserver's audit log (``request_counts()``). Parents are a
``Drive`` custom resource with five children each (three ConfigMaps, a headless Service, a
Deployment; headless because 1,100 Services would exhaust the server's service IP range).

- ``cold_start``: parents exist, the operator starts: seconds until every parent is reconciled
  and the queue is idle, and the CPU seconds the operator used (process CPU minus the benchmark's
  main thread), for 100 and 1,000 parents.
- ``steady_state``: after the 1,000-parent cold start the operator is restarted on a virtual
  clock (default policy: 10 h interval), which is then advanced past the interval so that every
  parent's periodic resync falls due once on its grid: API writes and GETs during that pass
  (goal: zero and zero), counted by the server; the operator's own heartbeat (one Lease write per
  period, not per parent) is reported apart as ``heartbeat_writes`` and is not in ``writes``;
  ``reconciled_at_restart`` counts parents reconciled when it restarted (goal: zero).
- ``drift_repair_ms``: a child is deleted or hand-edited, the time until it is repaired (polled
  every millisecond), p50 and p99; for the watch path, and for a periodic-only configuration
  (``watch_children=False``, resync every ``--periodic-interval`` seconds) in the same run.
- ``bytes_per_cached_object``: traced memory (tracemalloc) of informer caches holding every child
  of the 1,000 parents, divided by the objects cached.

Run: ``python -m benchmarks.driver [--json] [--sizes 100,1000] [--samples 100] [--real]``.
``python -m benchmarks.driver --cold-start [--parents 1000] [--json]`` runs only issue 14's size
goals instead: the Thanos example operator in its own process, cold start, peak RSS and memory
per cached object against its JSON size (``benchmarks.coldstart``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kubernetes.config

from benchmarks import coldstart
from builders import DesiredState, ResourceBuilder
from reconciler import (
    ApiError,
    KubernetesClient,
    NotFoundError,
    Operator,
    OperatorRuntime,
    ResyncPolicy,
    Watching,
)
from reconciler.informers import Informer
from reconciler.testing import VirtualClock, wait_idle, wait_synced

GROUP = "driverbench.optk.dev"
API_VERSION = f"{GROUP}/v1"
WRITES = ("create", "update", "patch", "delete", "deletecollection")
MERGE = "application/merge-patch+json"
CHILD_TYPES = (("v1", "ConfigMap"), ("v1", "Service"), ("apps/v1", "Deployment"))

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"drives.{GROUP}"},
    "spec": {
        "group": GROUP, "scope": "Namespaced",
        "names": {"plural": "drives", "singular": "drive", "kind": "Drive"},
        "versions": [{"name": "v1", "served": True, "storage": True,
                      "subresources": {"status": {}},
                      "schema": {"openAPIV3Schema": {
                          "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}


def children(parent: Any) -> list[ResourceBuilder]:
    """Three ConfigMaps, a headless Service and a Deployment for one parent."""
    name = parent["metadata"]["name"]
    size = str((parent.get("spec") or {}).get("size", 1))
    labels = {"app": name}
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-c{i}"},
         "data": {"size": size, "index": str(i)}}
        for i in range(3)
    ]
    objects.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"{name}-svc"},
                    "spec": {"selector": labels, "clusterIP": "None",
                             "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
    objects.append({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"{name}-app"},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                     {"name": "app", "image": "nginx:1.25",
                      "ports": [{"containerPort": 8080}]}]}}},
    })
    return [_present(obj) for obj in objects]


def _present(obj: dict[str, Any]) -> ResourceBuilder:
    return lambda: (obj, DesiredState.PRESENT)


# --- the server ---------------------------------------------------------------------------


@contextmanager
def apiserver() -> Iterator[tuple[KubernetesClient, Callable[[], dict[str, int]]]]:
    """An ``optk apiserver`` subprocess; a client and a function reading its request counts."""
    with apiserver_and_kubeconfig() as (client, counts, _):
        yield client, counts


@contextmanager
def apiserver_and_kubeconfig(
) -> Iterator[tuple[KubernetesClient, Callable[[], dict[str, int]], str]]:
    """:func:`apiserver`, and the text of its kubeconfig (to declare it as a cluster)."""
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        process = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "apiserver", "--kubeconfig", str(kubeconfig)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        try:
            assert process.stdout is not None
            for line in process.stdout:
                if line.startswith("kubeconfig:"):
                    break
            api_client = kubernetes.config.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=str(kubeconfig)
            )
            client = KubernetesClient(api_client)

            def counts() -> dict[str, int]:
                method, url, headers, _, _ = api_client.param_serialize(
                    method="GET", resource_path="/debug/optk/requests",
                    header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
                )
                body = json.loads(api_client.call_api(method, url, header_params=headers).read())
                return dict(body["byVerb"])

            yield client, counts, kubeconfig.read_text()
        finally:
            process.terminate()
            process.wait(timeout=30)


@contextmanager
def real_apiserver() -> Iterator[tuple[KubernetesClient, Callable[[], dict[str, int]]]]:
    """A real control plane; a client and a function reading its audit log's request counts."""
    from reconciler.envtest import ControlPlane

    with ControlPlane() as plane:
        yield KubernetesClient(plane.api_client()), plane.request_counts


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {verb: after.get(verb, 0) - before.get(verb, 0) for verb in after}


def _namespace(client: KubernetesClient, name: str) -> str:
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def _create_parents(client: KubernetesClient, namespace: str, *, count: int) -> None:
    def create(start: int) -> None:
        for i in range(start, count, 4):
            client.create({"apiVersion": API_VERSION, "kind": "Drive",
                           "metadata": {"name": f"p{i:04d}", "namespace": namespace},
                           "spec": {"size": 1}})

    threads = [threading.Thread(target=create, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _operator(namespace: str, **options: Any) -> Operator:
    return Operator(api_version=API_VERSION, kind="Drive", build=children, name="bench",
                    namespace=namespace, workers=4, **options)


def _wait_converged(runtime: OperatorRuntime, parents: int, *, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while len(runtime.stats.reconciles) < parents:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(runtime.stats.reconciles)} of {parents} reconciled")
        time.sleep(0.01)
    if not wait_idle(runtime, timeout, settle=0.5):
        raise TimeoutError("the operator did not become idle")


# --- the measurements ---------------------------------------------------------------------


def cold_start(
    client: KubernetesClient, counts: Callable[[], dict[str, int]], *, parents: int
) -> tuple[dict[str, Any], OperatorRuntime, str]:
    """Start an operator on ``parents`` existing parents; figures and the running runtime."""
    namespace = _namespace(client, f"cold-{parents}")
    _create_parents(client, namespace, count=parents)
    before = counts()
    cpu, main = time.process_time(), time.thread_time()
    started = time.perf_counter()
    runtime = _operator(namespace).start(client)
    _wait_converged(runtime, parents)
    seconds = time.perf_counter() - started - 0.5  # minus the idle settle
    cpu_seconds = (time.process_time() - cpu) - (time.thread_time() - main)
    requests = _delta(counts(), before)
    return {
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu_seconds, 3),
        "writes": sum(requests.get(v, 0) for v in WRITES),
        "requests": requests,
    }, runtime, namespace


def steady_state(
    client: KubernetesClient, runtime: OperatorRuntime, counts: Callable[[], dict[str, int]], *,
    namespace: str, parents: int,
) -> dict[str, Any]:
    """Stop ``runtime``, restart it on a virtual clock and let one default interval pass;
    writes and GETs of that periodic pass."""
    runtime.stop(10)  # its last heartbeat records what it covered
    clock = VirtualClock(start=time.time())
    restarted = _operator(namespace).start(client, clock=clock)
    try:
        if not wait_synced(restarted, 120) or not wait_idle(restarted, 120, settle=0.5):
            raise TimeoutError("the restarted operator did not settle")
        at_restart = restarted.stats.total
        interval = restarted.schedule.policy.interval
        before, beats = counts(), restarted.stats.heartbeats
        started = time.perf_counter()
        clock.advance(interval + 1.0)  # every parent's grid time passes once
        deadline = time.monotonic() + 600
        while restarted.stats.total - at_restart < parents and time.monotonic() < deadline:
            time.sleep(0.005)
        wait_idle(restarted, 60, settle=0.3)
        seconds = time.perf_counter() - started - 0.3
        requests = _delta(counts(), before)
        heartbeats = restarted.stats.heartbeats - beats
    finally:
        restarted.stop(10)
    return {
        "parents": parents,
        "interval_s": interval,
        "reconciled_at_restart": at_restart,
        "reconciles": restarted.stats.total - at_restart,
        "seconds": round(seconds, 3),
        "writes": sum(requests.get(v, 0) for v in WRITES) - heartbeats,
        "heartbeat_writes": heartbeats,
        "gets": requests.get("get", 0),
        "lists": requests.get("list", 0),
    }


def _repaired(client: KubernetesClient, namespace: str, *, name: str, expected: str) -> bool:
    try:
        cm = client.get("v1", "ConfigMap", name, namespace=namespace)
    except NotFoundError:
        return False
    return bool((cm.get("data") or {}).get("index") == expected)


def drift_repair(
    client: KubernetesClient, namespace: str, *, parents: int, samples: int,
    timeout: float = 30.0,
) -> dict[str, Any]:
    """Break a child ``samples`` times (delete or edit, alternately); repair latency in ms."""
    latencies: list[float] = []
    for sample in range(samples):
        parent = f"p{sample % parents:04d}"
        index = sample % 3
        name = f"{parent}-c{index}"
        started = time.perf_counter()
        if sample % 2:
            client.delete("v1", "ConfigMap", name, namespace=namespace)
        else:
            client.patch("v1", "ConfigMap", name, {"data": {"index": "edited"}},
                         patch_type=MERGE, namespace=namespace)
        while not _repaired(client, namespace, name=name, expected=str(index)):
            if time.perf_counter() - started > timeout:
                raise TimeoutError(f"{name} was not repaired within {timeout}s")
            time.sleep(0.001)
        latencies.append((time.perf_counter() - started) * 1000)
    return _percentiles(latencies)


def _percentiles(latencies: list[float]) -> dict[str, Any]:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 2), "p99": round(p99, 2),
            "max": round(ordered[-1], 2), "samples": len(ordered)}


def bytes_per_cached_object(client: KubernetesClient, namespace: str) -> dict[str, Any]:
    """Traced memory of informers caching every child in ``namespace``, per object."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        informers = [Informer(client, api_version, kind, namespace=namespace,
                              label_selector="app.kubernetes.io/managed-by=bench").start()
                     for api_version, kind in CHILD_TYPES]
        for informer in informers:
            informer.wait_synced(300)
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - base
        objects = sum(len(informer.cache) for informer in informers)
        for informer in informers:
            informer.stop()
    finally:
        tracemalloc.stop()
    # The same objects' compact JSON as the server sends them (the issue's "2x its JSON size").
    encoded = sum(len(json.dumps(obj, separators=(",", ":")))
                  for informer in informers for obj in informer.cache.list())
    return {"bytes": round(used / max(objects, 1)), "objects": objects,
            "json_bytes": round(encoded / max(objects, 1))}


# --- main ---------------------------------------------------------------------------------


def run(
    sizes: list[int], *, samples: int, periodic_interval: float, real: bool = False
) -> dict[str, Any]:
    """Every measurement on the embedded server (or a real control plane); the JSON-ready
    result."""
    result: dict[str, Any] = {"server": "real" if real else "embedded", "cold_start": {}}
    with (real_apiserver() if real else apiserver()) as (client, counts):
        client.create(CRD)
        deadline = time.monotonic() + 30
        while not client.is_served(API_VERSION, "Drive"):
            if time.monotonic() > deadline:
                raise TimeoutError("the Drive CRD is not served")
            time.sleep(0.05)
        largest: tuple[OperatorRuntime, str, int] | None = None
        for size in sorted(sizes):
            figures, runtime, namespace = cold_start(client, counts, parents=size)
            result["cold_start"][str(size)] = figures
            print(f"cold start {size}: {figures}", file=sys.stderr)
            if largest is not None:
                largest[0].stop(10)
            largest = (runtime, namespace, size)
        assert largest is not None
        runtime, namespace, size = largest
        result["steady_state"] = steady_state(client, runtime, counts, namespace=namespace,
                                              parents=size)
        print(f"steady state: {result['steady_state']}", file=sys.stderr)
        runtime = _operator(namespace).start(client)  # real time again, for the watch path
        if not wait_synced(runtime, 120) or not wait_idle(runtime, 120, settle=0.5):
            raise TimeoutError("the operator for the drift measurement did not settle")
        watch = drift_repair(client, namespace, parents=size, samples=samples)
        print(f"drift repair, watch: {watch}", file=sys.stderr)
        runtime.stop(10)
        memory = bytes_per_cached_object(client, namespace)
        result["bytes_per_cached_object"] = memory["bytes"]
        result["json_bytes_per_cached_object"] = memory["json_bytes"]
        periodic_ns = _namespace(client, "periodic-only")
        small = min(sizes)
        _create_parents(client, periodic_ns, count=small)
        policy = ResyncPolicy(interval=periodic_interval, min_interval=0.1)
        periodic = _operator(periodic_ns, resync=policy,
                             watching=Watching(children=False)).start(client)
        try:
            _wait_converged(periodic, small)
            periodic_only = drift_repair(client, periodic_ns, parents=small,
                                         samples=max(10, samples // 10),
                                         timeout=periodic_interval * 3)
        finally:
            periodic.stop(10)
        periodic_only["interval_s"] = periodic_interval
        print(f"drift repair, periodic only: {periodic_only}", file=sys.stderr)
        result["drift_repair_ms"] = {"watch": watch, "periodic_only": periodic_only}
    result["python"] = platform.python_version()
    result["cpus"] = os.cpu_count()
    return result


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print a summary (and the JSON line with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--sizes", default="100,1000", help="parent counts for cold start")
    parser.add_argument("--samples", type=int, default=100, help="drift repairs measured")
    parser.add_argument("--periodic-interval", type=float, default=2.0,
                        help="resync interval (s) of the periodic-only configuration")
    parser.add_argument("--real", action="store_true",
                        help="a real control plane (binaries from $OPTK_KUBE_ASSETS)")
    parser.add_argument("--cold-start", action="store_true",
                        help="only the Thanos operator's cold start, peak RSS and cache memory "
                             "(benchmarks.coldstart)")
    coldstart.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.cold_start:
        coldstart.report(coldstart.run(args.parents, timeout=args.timeout,
                                       profile=args.profile), as_json=args.json)
        return 0
    sizes = [int(s) for s in re.split(r"[,\s]+", args.sizes) if s]
    try:
        result = run(sizes, samples=args.samples, periodic_interval=args.periodic_interval,
                     real=args.real)
    except (ApiError, TimeoutError) as error:
        print(f"benchmark failed: {error}", file=sys.stderr)
        return 1
    watch = result["drift_repair_ms"]["watch"]
    periodic = result["drift_repair_ms"]["periodic_only"]
    print(f"drift repair p50/p99: watch {watch['p50']}/{watch['p99']} ms, periodic only "
          f"{periodic['p50']}/{periodic['p99']} ms")
    for size, figures in result["cold_start"].items():
        print(f"cold start {size} parents: {figures['seconds']} s, "
              f"{figures['cpu_seconds']} CPU s, {figures['writes']} writes")
    steady = result["steady_state"]
    print(f"steady-state resync of {steady['parents']} parents at {steady['interval_s']:.0f} s: "
          f"{steady['writes']} writes, {steady['gets']} GETs (+{steady['heartbeat_writes']} "
          f"heartbeat writes); {steady['reconciled_at_restart']} reconciled at restart")
    print(f"memory per cached object: {result['bytes_per_cached_object']} bytes "
          f"(its JSON: {result['json_bytes_per_cached_object']} bytes)")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
