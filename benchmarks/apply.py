"""Benchmark: the two write strategies side by side, ``ThreeWayMerge`` and ``ServerSideApply``.

One fleet of children (Deployments, Services and ConfigMaps with a few fields each) is brought
to its desired state by ``ResourceReconciler`` with each strategy, on each server (the embedded
one in this process, and a real control plane when ``OPTK_KUBE_ASSETS`` or
``KUBEBUILDER_ASSETS`` names its binaries), in fresh namespaces. Reads come from an in-memory
cache that drops ``managedFields`` as the informer cache does (refreshed between phases by an
uncharged list, as informers would see the writes); every request the reconciler itself sends
is counted, including the reads server-side apply makes before a write.

Phases, in order, each reconciling every child once:

- ``converge``: nothing exists; every child is created.
- ``steady_state``: nothing changed (the echo of our own writes).
- ``resync``: nothing changed, after the cache was listed again (a periodic resync).
- ``drift_repair``: one child of each kind was edited by hand first (another field manager).
- ``spec_change``: every Deployment's image changed in the builders.

Per server, strategy and phase: ``requests`` (by verb and ``total``), ``bytes_sent`` (the
request bodies of the writes) and ``cpu_seconds`` (this thread's CPU in the reconcile calls).

Run: ``python -m benchmarks.apply [--json] [--children 60] [--servers embedded,real]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from builders import DesiredState
from reconciler import (
    KubernetesClient,
    ResourceReconciler,
    ResourceSettings,
    ServerSideApply,
    ThreeWayMerge,
)
from reconciler._cache.stores import compact
from reconciler._client.counting import recording
from reconciler._client.protocol import ForwardingClient

MERGE = "application/merge-patch+json"
PHASES = ("converge", "steady_state", "resync", "drift_repair", "spec_change")
STRATEGIES = {"three_way": ThreeWayMerge(), "server_side_apply": ServerSideApply()}
_KINDS = (("apps/v1", "Deployment"), ("v1", "Service"), ("v1", "ConfigMap"))


class _BodyBytes(ForwardingClient):
    """Counts the JSON bytes of every write body it passes on."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.sent = 0

    def create(self, obj: Any, *, dry_run: bool = False) -> dict[str, Any]:
        self.sent += len(json.dumps(obj))
        return super().create(obj, dry_run=dry_run)

    def patch(self, api_version: str, kind: str, name: str, patch: Any, **kwargs: Any
              ) -> dict[str, Any]:
        self.sent += len(json.dumps(patch))
        return super().patch(api_version, kind, name, patch, **kwargs)


class _Cache:
    """The reconciler's reads: objects as the informer cache keeps them (no managedFields)."""

    from_memory = True

    def __init__(self, client: KubernetesClient, namespace: str) -> None:
        self.client, self.namespace = client, namespace
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}

    def refresh(self) -> None:
        self.objects = {(item["kind"], item["metadata"]["name"]): compact(item)
                        for api_version, kind in _KINDS
                        for item in _items(self.client, api_version, kind, self.namespace)}

    def get(self, api_version: str, kind: str, name: str, *,
            namespace: str | None = None) -> dict[str, Any] | None:
        return self.objects.get((kind, name))

    def list(self, api_version: str, kind: str, *, namespace: str | None = None,
             label_selector: str | None = None) -> list[dict[str, Any]]:
        return [o for (k, _), o in self.objects.items() if k == kind]


def _items(client: KubernetesClient, api_version: str, kind: str, ns: str) -> list[Any]:
    listed = client.list(api_version, kind, namespace=ns, label_selector="bench=apply")
    return [{**item, "apiVersion": api_version, "kind": kind} for item in listed["items"]]


def children(ns: str, count: int, *, image: str) -> list[dict[str, Any]]:
    """``count`` children: half Deployments, a fifth Services, the rest ConfigMaps."""
    out: list[dict[str, Any]] = []
    for i in range(count):
        meta = {"name": f"c{i}", "namespace": ns, "labels": {"bench": "apply", "index": str(i)}}
        if i % 10 < 5:
            labels = {"app": f"c{i}"}
            out.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
                        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                                 "template": {"metadata": {"labels": labels}, "spec": {
                                     "containers": [{
                                         "name": "app", "image": image,
                                         "env": [{"name": "MODE", "value": "bench"}],
                                         "ports": [{"containerPort": 8080, "name": "http"}],
                                         "resources": {"requests": {"cpu": "100m"}}}]}}}})
        elif i % 10 < 7:
            out.append({"apiVersion": "v1", "kind": "Service", "metadata": meta,
                        "spec": {"selector": {"app": f"c{i}"},
                                 "ports": [{"port": 80, "targetPort": 8080, "name": "http"}]}})
        else:
            out.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                        "data": {"mode": "bench", "index": str(i)}})
    return out


def _phase(reconciler: ResourceReconciler, sink: _BodyBytes,
           desired: list[dict[str, Any]]) -> dict[str, Any]:
    sent, cpu = sink.sent, time.thread_time()
    with recording() as calls:
        for obj in desired:
            reconciler.reconcile_resource(obj, DesiredState.PRESENT)
    verbs = Counter(call.verb for call in calls)
    return {"requests": {**dict(sorted(verbs.items())), "total": sum(verbs.values())},
            "bytes_sent": sink.sent - sent,
            "cpu_seconds": round(time.thread_time() - cpu, 4)}


def run_strategy(api_client: Any, strategy: Any, count: int) -> dict[str, Any]:
    """Every phase with one strategy in a fresh namespace."""
    client = KubernetesClient(api_client, operator_name="bench-apply")
    ns = f"bench-apply-{uuid.uuid4().hex[:6]}"
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    try:
        sink = _BodyBytes(client)
        cache = _Cache(client, ns)
        reconciler = ResourceReconciler(
            sink, reader=cache,
            settings=ResourceSettings(apply=strategy, field_manager="bench-apply"),
        )
        result: dict[str, Any] = {}
        desired = children(ns, count, image="nginx:1.25")
        result["converge"] = _phase(reconciler, sink, desired)
        cache.refresh()
        result["steady_state"] = _phase(reconciler, sink, desired)
        cache.refresh()
        result["resync"] = _phase(reconciler, sink, desired)
        editor = KubernetesClient(api_client, operator_name="bench-editor")
        for kind, field in (("Deployment", {"spec": {"replicas": 3}}),
                            ("Service", {"metadata": {"labels": {"bench": "apply",
                                                                 "edited": "yes"}}}),
                            ("ConfigMap", {"data": {"mode": "edited"}})):
            for obj in [o for o in desired if o["kind"] == kind][:1]:
                editor.patch(obj["apiVersion"], kind, obj["metadata"]["name"], field,
                             patch_type=MERGE, namespace=ns)
        cache.refresh()
        result["drift_repair"] = _phase(reconciler, sink, desired)
        cache.refresh()
        result["spec_change"] = _phase(reconciler, sink,
                                       children(ns, count, image="nginx:1.27"))
        return result
    finally:
        client.delete("v1", "Namespace", ns)


@contextmanager
def _servers(names: list[str]) -> Iterator[dict[str, Any]]:
    from reconciler.embedded import EmbeddedApiServer

    found: dict[str, Any] = {}
    with EmbeddedApiServer() as embedded:
        if "embedded" in names:
            found["embedded"] = embedded
        if "real" in names and (os.environ.get("OPTK_KUBE_ASSETS")
                                or os.environ.get("KUBEBUILDER_ASSETS")):
            from reconciler.envtest import ControlPlane

            with ControlPlane() as plane:
                found["real"] = plane
                yield found
                return
        yield found


def measure(*, count: int, servers: list[str]) -> dict[str, Any]:
    """The figures of every server and strategy."""
    report: dict[str, Any] = {"benchmark": "apply", "children": count,
                              "python": platform.python_version(), "cpus": os.cpu_count(),
                              "phases": list(PHASES), "servers": {}}
    with _servers(servers) as running:
        for server_name, server in running.items():
            api_client = server.api_client()
            report["servers"][server_name] = {
                name: run_strategy(api_client, strategy, count)
                for name, strategy in STRATEGIES.items()
            }
    return report


def _table(report: Mapping[str, Any]) -> str:
    rows = [f"{'server':<9} {'strategy':<18} {'phase':<13} {'requests':>8} {'bytes':>8} "
            f"{'cpu s':>7}"]
    for server, strategies in report["servers"].items():
        for strategy, phases in strategies.items():
            for phase in PHASES:
                figures = phases[phase]
                rows.append(f"{server:<9} {strategy:<18} {phase:<13} "
                            f"{figures['requests']['total']:>8} {figures['bytes_sent']:>8} "
                            f"{figures['cpu_seconds']:>7.3f}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print a table, or with ``--json`` one JSON object on the last line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.apply")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON last")
    parser.add_argument("--children", type=int, default=60)
    parser.add_argument("--servers", default="embedded,real")
    args = parser.parse_args(argv)
    report = measure(count=args.children, servers=args.servers.split(","))
    print(_table(report))
    if "real" in args.servers and "real" not in report["servers"]:
        print("real control plane: skipped (no OPTK_KUBE_ASSETS or KUBEBUILDER_ASSETS)")
    if args.json:
        print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
