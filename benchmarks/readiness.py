"""Benchmark: how fast a parent's ``Ready`` follows a child's status change, and that a status
change no rule reads reconciles nothing (issue 24).

Against the embedded API server run as a subprocess (``optk apiserver``), one operator with
``Operator(reporting=Reporting(readiness=Readiness()))`` reconciles one parent of
``benchmarks.driver``'s kind (three ConfigMaps, a Service, a Deployment). No kubelet runs: the
benchmark plays one, patching the Deployment's status (``reconciler.testing.make_available``
for available, a status of 0 available replicas for unavailable). It flips the Deployment
``changes`` times, alternately unavailable and available, and measures each flip from the
status patch's answer to the moment the parent's
``Ready`` condition, seen by a watch on the parent, says so. The operator is woken by exactly that
verdict change (``reconciler._reconcile.waits``: no polling; the parent's ``Readiness.recheck``
requeue is pushed past the run). Then it patches statuses no rule reads (the Service's load
balancer, the Deployment's conditions while it stays available) ``changes`` times and counts the
reconciles they caused: the target is 0.

Run: ``python -m benchmarks.readiness [--json] [--changes 100]``. JSON keys: ``ready_follows_ms``
(``p50``, ``p99``, ``max``, ``samples``), ``unread_status_changes``, ``reconciles_for_unread``,
``reconciles_for_flips``, ``event_coalesce_s``, ``python``, ``cpus``. ``--event-coalesce S`` sets
the operator's coalescing window (default the ``Operator``'s 0.05 s: a flip that comes less than
that after the parent's last reconcile waits for the window's end).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import sys
import threading
import time
from typing import Any

from benchmarks.driver import API_VERSION, CRD, _percentiles, apiserver, children
from reconciler import KubernetesClient, Operator, Readiness, Reporting, Watching
from reconciler.testing import make_available, wait_idle, wait_synced

MERGE = "application/merge-patch+json"
NAMESPACE = "readiness-bench"
PARENT = "p0"


def _ready_watch(client: KubernetesClient, into: queue.Queue[tuple[float, str]],
                 stop: threading.Event) -> threading.Thread:
    """A thread watching the parent: each change of its ``Ready`` status, with the time seen."""

    def run() -> None:
        last = None
        while not stop.is_set():
            try:
                for event in client.watch(API_VERSION, "Drive", namespace=NAMESPACE,
                                          timeout_seconds=5):
                    obj = event.get("object") or {}
                    ready = next((c.get("status") for c in (obj.get("status") or {}).get(
                        "conditions", ()) if c.get("type") == "Ready"), None)
                    if ready is not None and ready != last:
                        last = ready
                        into.put((time.perf_counter(), ready))
                    if stop.is_set():
                        return
            except Exception:  # a closed stream: watch again until stopped
                time.sleep(0.01)

    thread = threading.Thread(target=run, daemon=True, name="ready-watch")
    thread.start()
    return thread


def _deployment() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"{PARENT}-app", "namespace": NAMESPACE}}


def _unavailable(client: KubernetesClient) -> None:
    client.patch("apps/v1", "Deployment", f"{PARENT}-app",
                 {"status": {"availableReplicas": 0, "readyReplicas": 0, "conditions": [
                     {"type": "Available", "status": "False", "reason": "Benchmark"}]}},
                 patch_type=MERGE, namespace=NAMESPACE, subresource="status")


def _await(into: queue.Queue[tuple[float, str]], wanted: str, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"Ready did not become {wanted} within {timeout} s")
        seen, status = into.get(timeout=left)
        if status == wanted:
            return seen


def run(changes: int, *, event_coalesce: float = 0.05) -> dict[str, Any]:
    """The figures (see the module docstring)."""
    with apiserver() as (client, _counts):
        client.create(CRD)
        deadline = time.monotonic() + 30
        while not client.is_served(API_VERSION, "Drive"):
            if time.monotonic() > deadline:
                raise TimeoutError("the parent CRD is not served")
            time.sleep(0.05)
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        operator = Operator(
            api_version=API_VERSION, kind="Drive", build=children, name="readiness-bench",
            namespace=NAMESPACE,
            reporting=Reporting(events=False, readiness=Readiness(recheck=3600.0)),
            watching=Watching(coalesce=event_coalesce),
        )
        runtime = operator.start(client)
        seen: queue.Queue[tuple[float, str]] = queue.Queue()
        stop = threading.Event()
        try:
            if not wait_synced(runtime, 30):
                raise TimeoutError("the operator did not sync")
            _ready_watch(client, seen, stop)
            client.create({"apiVersion": API_VERSION, "kind": "Drive",
                           "metadata": {"name": PARENT, "namespace": NAMESPACE},
                           "spec": {"size": 1}})
            _await(seen, "False", 30)  # no kubelet: the Deployment is not available
            make_available(client, _deployment())
            _await(seen, "True", 30)
            wait_idle(runtime, 30)
            before = runtime.stats.total
            latencies = []
            for i in range(changes):
                wanted = "False" if i % 2 == 0 else "True"
                if wanted == "False":
                    _unavailable(client)
                else:
                    make_available(client, _deployment())
                sent = time.perf_counter()
                latencies.append((_await(seen, wanted, 30) - sent) * 1000)
            wait_idle(runtime, 30)
            flips = runtime.stats.total - before
            if changes % 2:  # end available, so the unread changes find Ready True
                make_available(client, _deployment())
                _await(seen, "True", 30)
            wait_idle(runtime, 30, settle=0.5)
            before = runtime.stats.total
            for i in range(changes):
                if i % 2:
                    client.patch("v1", "Service", f"{PARENT}-svc", {"status": {"loadBalancer": {
                        "ingress": [{"ip": f"10.0.{i // 250}.{i % 250}"}]}}},
                        patch_type=MERGE, namespace=NAMESPACE, subresource="status")
                else:
                    client.patch("apps/v1", "Deployment", f"{PARENT}-app", {"status": {
                        "conditions": [{"type": "Available", "status": "True",
                                        "reason": "MinimumReplicasAvailable",
                                        "message": f"still available {i}"}]}},
                        patch_type=MERGE, namespace=NAMESPACE, subresource="status")
            wait_idle(runtime, 30, settle=1.0)
            unread = runtime.stats.total - before
        finally:
            stop.set()
            runtime.stop(5)
    return {
        "ready_follows_ms": _percentiles(latencies),
        "unread_status_changes": changes,
        "reconciles_for_unread": unread,
        "reconciles_for_flips": flips,
        "event_coalesce_s": event_coalesce,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print a summary (and the JSON line with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--changes", type=int, default=100, help="status changes measured")
    parser.add_argument("--event-coalesce", type=float, default=0.05,
                        help="Watching(coalesce=...): a parent reconciled less than this "
                             "many seconds ago waits for the window's end (default: the "
                             "Operator's 0.05)")
    args = parser.parse_args(argv)
    result = run(args.changes, event_coalesce=args.event_coalesce)
    follows = result["ready_follows_ms"]
    print(f"Ready follows a child's status change: p50 {follows['p50']} ms, p99 "
          f"{follows['p99']} ms, max {follows['max']} ms over {follows['samples']} changes "
          f"({result['reconciles_for_flips']} reconciles); {result['reconciles_for_unread']} "
          f"reconciles for {result['unread_status_changes']} status changes no rule reads")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
