"""Benchmark: the parent reconcile against the naive CreateOrUpdate loop a Python user writes today.

For 1, 100 and 1,000 children (half Deployments, a tenth Services, the rest ConfigMaps) of one
custom-resource parent, against the embedded API server over HTTPS (a fresh one per size), it
measures three cases: the first reconcile (everything is created), a reconcile with nothing
changed, and a reconcile after one child's spec changed. Each case runs for ``ParentReconciler``
("ours", events and status on) and for the peer: typed official-client calls per child (read,
compare the whole object after copying the desired fields over the live one, replace when
different, create on 404), as controller-runtime's ``CreateOrUpdate`` does. Requests come from
the server's ``request_counts()``; ``seconds`` is wall time of the client loop; ``cpu_seconds``
is the client thread's CPU time (the server runs in other threads of the same process).

Run: ``python -m benchmarks.reconcile [--json] [--sizes 1,100,1000]``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import platform
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from builders import DesiredState, ResourceBuilder
from reconciler import KubernetesClient, NotFoundError, ParentReconciler
from reconciler.embedded import EmbeddedApiServer

_WRITES = ("create", "update", "patch", "delete", "deletecollection")
_READS = ("get", "list", "watch")
GROUP = "bench.optk.dev"
PARENT_API = f"{GROUP}/v1"


def parent_crd() -> dict[str, Any]:
    """A namespaced ``Bench`` kind with a status subresource and free-form spec and status."""
    free = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"benches.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": "Bench", "plural": "benches", "singular": "bench"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": True, "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object", "properties": {"spec": free, "status": free},
                }},
            }],
        },
    }


def child(index: int, namespace: str, *, version: int) -> dict[str, Any]:
    """Child ``index``: a Deployment (even), a Service (one in ten) or a ConfigMap (the rest).

    Services are kept to a tenth so that ours and the peer's together stay within the 254
    cluster IPs of the server's 10.0.0.0/24 service range at 1,000 children.
    """
    name = f"child-{index}"
    labels = {"app": name}
    meta = {"name": name, "namespace": namespace, "labels": dict(labels)}
    match 0 if index % 2 == 0 else (1 if index % 10 == 1 else 2):
        case 0:
            return {
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
                "spec": {
                    "replicas": 1 + version,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{
                            "name": "app", "image": f"registry.example/app:{version}",
                            "ports": [{"containerPort": 8080}],
                        }]},
                    },
                },
            }
        case 1:
            return {
                "apiVersion": "v1", "kind": "Service", "metadata": meta,
                "spec": {
                    "selector": labels,
                    "ports": [{"name": "http", "port": 80 + version, "targetPort": 8080}],
                },
            }
        case _:
            return {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                "data": {"config.yaml": f"version: {version}\n"},
            }


def children(namespace: str, size: int, changed: int | None) -> list[dict[str, Any]]:
    """All children; child ``changed`` (if any) at version 1, the others at version 0."""
    return [child(i, namespace, version=int(i == changed)) for i in range(size)]


class NaivePeer:
    """The CreateOrUpdate loop with the official typed API: read, mutate, compare, replace."""

    def __init__(self, api_client: Any, owner: Mapping[str, Any]) -> None:
        from kubernetes import client as k8s

        self.api = api_client
        self.core = k8s.CoreV1Api(api_client)
        self.apps = k8s.AppsV1Api(api_client)
        self.owner = owner

    def _ops(self, kind: str) -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
        if kind == "Deployment":
            return (self.apps.read_namespaced_deployment, self.apps.create_namespaced_deployment,
                    self.apps.replace_namespaced_deployment)
        if kind == "Service":
            return (self.core.read_namespaced_service, self.core.create_namespaced_service,
                    self.core.replace_namespaced_service)
        return (self.core.read_namespaced_config_map, self.core.create_namespaced_config_map,
                self.core.replace_namespaced_config_map)

    def reconcile(self, desired_children: list[dict[str, Any]]) -> None:
        """Bring every child to its desired form the way CreateOrUpdate does."""
        from kubernetes.client.exceptions import ApiException

        meta = self.owner["metadata"]
        owner_ref = {
            "apiVersion": self.owner["apiVersion"], "kind": self.owner["kind"],
            "name": meta["name"], "uid": meta["uid"], "controller": True,
        }
        for desired in desired_children:
            read, create, replace = self._ops(desired["kind"])
            name, namespace = desired["metadata"]["name"], desired["metadata"]["namespace"]
            body = copy.deepcopy(desired)
            body["metadata"]["ownerReferences"] = [owner_ref]
            try:
                live_model = read(name, namespace)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                create(namespace, body)
                continue
            live = self.api.sanitize_for_serialization(live_model)
            mutated = copy.deepcopy(live)
            mutated["metadata"]["labels"] = body["metadata"]["labels"]
            mutated["metadata"]["ownerReferences"] = body["metadata"]["ownerReferences"]
            for field in ("spec", "data"):
                if field in body:
                    mutated[field] = body[field]
            if mutated != live:
                replace(name, namespace, mutated)


def _measure(server: Any, action: Callable[[], Any]) -> dict[str, Any]:
    before = dict(server.request_counts())
    wall, cpu = time.perf_counter(), time.thread_time()
    action()
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    after = server.request_counts()
    delta = {verb: after.get(verb, 0) - before.get(verb, 0) for verb in set(after) | set(before)}
    return {
        "writes": sum(delta.get(v, 0) for v in _WRITES),
        "reads": sum(delta.get(v, 0) for v in _READS),
        "seconds": round(wall, 4),
        "cpu_seconds": round(cpu, 4),
    }


def _present(obj: dict[str, Any]) -> ResourceBuilder:
    return lambda: (obj, DesiredState.PRESENT)


def _builders(objs: list[dict[str, Any]]) -> list[ResourceBuilder]:
    return [_present(o) for o in objs]


def _namespace(client: KubernetesClient, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def _parent(client: KubernetesClient, namespace: str) -> dict[str, Any]:
    return client.create({
        "apiVersion": PARENT_API, "kind": "Bench",
        "metadata": {"name": "bench", "namespace": namespace}, "spec": {},
    })


def warm_up(client: KubernetesClient) -> None:
    """Pay one-time costs (discovery, schema loading, connections) for both sides, unmeasured:
    a running operator has paid them long before."""
    namespace = _namespace(client, "warm")
    parent = _parent(client, namespace)
    objs = children(namespace, 4, None)
    ours = ParentReconciler(client, lambda p: _builders(objs), operator_name="warm")
    for _ in range(2):
        ours.reconcile(parent)
    peer_objs = [{**o, "metadata": {**o["metadata"], "name": f"peer-{o['metadata']['name']}"}}
                 for o in objs]
    for _ in range(2):
        NaivePeer(client.api_client, parent).reconcile(peer_objs)


def run_size(server: Any, client: KubernetesClient, size: int) -> dict[str, dict[str, Any]]:
    """The three cases for one size, ours and the peer's, each in its own namespace."""
    warm_up(client)
    ours_ns, peer_ns = _namespace(client, "ours"), _namespace(client, "peer")
    parent, peer_parent = _parent(client, ours_ns), _parent(client, peer_ns)
    state: dict[str, int | None] = {"changed": None}

    def build(p: Mapping[str, Any]) -> list[ResourceBuilder]:
        return _builders(children(ours_ns, size, state["changed"]))

    ours = ParentReconciler(client, build, operator_name="bench")
    peer = NaivePeer(client.api_client, peer_parent)

    bookkeeping: list[int] = []

    def reconcile_ours() -> None:
        result = ours.reconcile(parent)
        if not result.ok:
            problem = result.errors or result.status_error
            raise RuntimeError(f"benchmark reconcile failed: {problem}")
        bookkeeping.append(sum(
            1 for c in result.api_calls
            if c.ref.kind == "Event" or (c.verb == "patch" and c.ref.kind == "Bench")
        ))

    figures: dict[str, dict[str, Any]] = {}
    for case, changed in (("first", None), ("unchanged", None), ("one_changed", 0)):
        state["changed"] = changed
        peer_children = children(peer_ns, size, changed)
        figures[case] = {
            "ours": _measure(server, reconcile_ours),
            "peer": _measure(server, partial(peer.reconcile, peer_children)),
        }
        # Of ours' writes, how many were the parent's Events and status (the peer has neither).
        figures[case]["ours"]["event_and_status_writes"] = bookkeeping[-1]
        # The driver hands each reconcile the parent as its watch last saw it.
        parent = client.get(PARENT_API, "Bench", "bench", namespace=ours_ns)
    for ns in (ours_ns, peer_ns):
        with contextlib.suppress(NotFoundError):
            client.delete("v1", "Namespace", ns)
    return figures


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print a table, or with ``--json`` one JSON object on the last line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reconcile")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON last")
    parser.add_argument("--sizes", default="1,100,1000", help="comma-separated child counts")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    report: dict[str, Any] = {
        "python": platform.python_version(), "cpus": os.cpu_count(),
    }
    for size in sizes:
        with EmbeddedApiServer() as server:  # a fresh server per size: no state carried over
            client = KubernetesClient(server.api_client())
            client.create(parent_crd())
            deadline = time.monotonic() + 30
            while not client.is_served(PARENT_API, "Bench"):
                if time.monotonic() > deadline:
                    raise RuntimeError("the Bench CRD never became served")
                time.sleep(0.05)
            report[str(size)] = run_size(server, client, size)
            if not args.json:
                for case, pair in report[str(size)].items():
                    for who in ("ours", "peer"):
                        f = pair[who]
                        print(f"{size:>5} {case:<12} {who:<5} writes={f['writes']:<5} "
                              f"reads={f['reads']:<5} seconds={f['seconds']:<8} "
                              f"cpu={f['cpu_seconds']}")
    if args.json:
        print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
