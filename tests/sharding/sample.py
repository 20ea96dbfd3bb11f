"""A sharded sample operator, and a replica process that runs it and reports its figures.

``Item`` (``shardtest.optk.dev/v1``) parents each get one ConfigMap ``<name>-cfg`` holding
``spec.value``. ``python -m tests.sharding.sample --kubeconfig K --shard ID --namespace NS
--status FILE`` runs one replica: its client's user agent is ``optk-shard/<ID>`` (so the
server's request log tells the replicas' writes apart), and every quarter second it writes its
figures (CPU seconds, peak RSS, cached parents and children (and, on the replica that runs the
assigner, the parents and Leases it caches), reconciles, drains acknowledged,
whether it runs the assigner and what the assigner did) as JSON to FILE. SIGTERM stops it
gracefully; ``kill -9`` is a crash. The integration test and ``benchmarks.sharding`` use it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import kubernetes.config

from builders import DesiredState, ResourceBuilder, child_name, resource_builder
from builders.objects import config_map
from reconciler import (
    KubernetesClient,
    LeaderElection,
    Operator,
    Policies,
    Reporting,
    ResyncPolicy,
    Sharding,
)
from reconciler._driver.runtime import OperatorRuntime

GROUP = "shardtest.optk.dev"
API_VERSION = f"{GROUP}/v1"
USER_AGENT_PREFIX = "optk-shard/"

ITEM_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"items.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "items", "singular": "item", "kind": "Item", "listKind": "ItemList"},
        "versions": [{
            "name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": True,
            }},
        }],
    },
}


@resource_builder
def settings(parent: Any) -> dict[str, Any] | tuple[dict[str, Any], DesiredState]:
    """The parent's ConfigMap (ABSENT when the value is ``absent``)."""
    value = str((parent.get("spec") or {}).get("value", ""))
    obj = config_map(metadata={"name": child_name(parent["metadata"]["name"], "cfg")},
                     data={"value": value})
    return (obj, DesiredState.ABSENT) if value == "absent" else obj


def build(parent: Any) -> Sequence[ResourceBuilder]:
    """One ConfigMap per Item."""
    return [settings(parent)]


@resource_builder
def extra(parent: Any, index: int) -> dict[str, Any]:
    """One more ConfigMap, ``<parent>-cfg-<index>`` (benchmarks with more children)."""
    value = str((parent.get("spec") or {}).get("value", ""))
    return config_map(metadata={"name": child_name(parent["metadata"]["name"], f"cfg-{index}")},
                      data={"value": value})


def build_with(children: int) -> Callable[[Any], Sequence[ResourceBuilder]]:
    """``children`` ConfigMaps per Item: ``<parent>-cfg``, then ``<parent>-cfg-1``, ..."""
    if children == 1:
        return build

    def build_n(parent: Any) -> Sequence[ResourceBuilder]:
        return [settings(parent), *(extra(parent, i) for i in range(1, children))]
    return build_n


OPERATOR_NAME = "shards"


def replica_client(api: Any, shard: str) -> KubernetesClient:
    """A client for one replica: named for the operator (its field manager), with the user
    agent ``optk-shard/<shard>`` so that the server's request log tells the replicas apart (the
    runtime keeps a client that already names its operator as it is)."""
    client = KubernetesClient(api, operator_name=OPERATOR_NAME)
    client.user_agent = f"{USER_AGENT_PREFIX}{shard}"
    return client


def make_operator(
    *, namespace: str, name: str = OPERATOR_NAME, lease_duration: float = 2.0,
    replicas_hint: int | None = None, workers: int = 4, heartbeat: float | None = None,
    prune: Sequence[tuple[str, str]] = (), children: int = 1,
) -> Operator:
    """The sharded Item operator watching ``namespace``, with short leases for tests
    (``prune``: the kinds whose unbuilt children it deletes; ``children``: ConfigMaps per
    Item)."""
    renew_deadline = lease_duration * 0.7
    period = lease_duration / 8
    return Operator(
        api_version=API_VERSION, kind="Item", build=build_with(children), name=name,
        namespace=namespace, workers=workers, install=[ITEM_CRD],
        resync=ResyncPolicy(heartbeat=heartbeat),
        leader_election=LeaderElection(namespace=namespace, lease_duration=lease_duration,
                                       renew_deadline=renew_deadline, retry_period=period),
        sharding=Sharding(namespace=namespace, lease_duration=lease_duration,
                          renew_deadline=renew_deadline, renew_period=period,
                          drain_timeout=max(10.0, 5 * lease_duration),
                          replicas_hint=replicas_hint),
        reporting=Reporting(events=False), policies=Policies(prune=tuple(prune)),
    )


class Arrivals:
    """When (wall clock) each parent last arrived in a replica's parent cache (an ADDED event):
    the benchmark's takeover timeline reads it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._at: dict[str, float] = {}

    def __call__(self, event: str, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        if event == "ADDED":
            with self._lock:
                self._at[str(new["metadata"]["name"])] = time.time()

    def snapshot(self) -> dict[str, float]:
        """Name -> wall time of its last arrival."""
        with self._lock:
            return dict(self._at)


def figures(runtime: OperatorRuntime, base: dict[str, float] | None = None,
            arrivals: Arrivals | None = None) -> dict[str, Any]:
    """What the replica reports: resources (and ``base``, those before the runtime started,
    i.e. the interpreter and its imports), caches, work and the assigner's counters."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = sum(len(informer.cache.keys()) for key in runtime.informers.types()
                   if (informer := runtime.informers.informer(*key)) is not None)
    parents = len(runtime.parents.cache.keys())
    shards = runtime.shards
    assert shards is not None
    assigner = shards.assigner
    assigned = 0 if assigner is None else (len(assigner.parents.cache.keys())
                                           + len(assigner.leases.cache.keys()))
    return {
        "shard": shards.shard, "pid": os.getpid(), "time": time.time(),
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": _peak_rss_mb() or usage.ru_maxrss / 1024.0,
        "rss_mb": _rss_mb(), "base": base or {},
        "cached_parents": parents, "cached_children": children,
        "cached_objects": parents + children + assigned, "assigner_cached": assigned,
        "reconciles": sum(runtime.stats.reconciles.values()),
        "releases": shards.releases, "adopted": shards.adopted,
        "arrivals": {} if arrivals is None else arrivals.snapshot(),
        "idle": runtime.idle, "ready": runtime.ready,
        "leading": assigner is not None,
        "assigner": None if assigner is None else {
            "moves": assigner.moves, "drains": assigner.drains,
            "assignments": assigner.assignments, "forced": assigner.forced,
            "live": sorted(assigner.live), "live_changed_at": assigner.live_changed_at,
        },
    }


def _peak_rss_mb() -> float:
    """This process's peak RSS (``VmHWM``; ``ru_maxrss`` keeps the forking parent's peak across
    ``exec``, so it would report the benchmark's memory, not the replica's)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _rss_mb() -> float:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def main(argv: list[str] | None = None) -> int:
    """Run one replica until SIGTERM; write figures to ``--status`` as it goes."""
    parser = argparse.ArgumentParser(description="one replica of the sharded sample operator")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--shard", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--status", required=True)
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--replicas-hint", type=int, default=None)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--children", type=int, default=1, help="ConfigMaps per Item")
    args = parser.parse_args(argv)
    api = kubernetes.config.new_client_from_config(config_file=args.kubeconfig)
    operator = make_operator(namespace=args.namespace, lease_duration=args.lease,
                             children=args.children,
                             replicas_hint=args.replicas_hint, workers=args.workers)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    usage = resource.getrusage(resource.RUSAGE_SELF)
    base = {"cpu_s": usage.ru_utime + usage.ru_stime, "rss_mb": _rss_mb()}
    runtime = operator.start(replica_client(api, args.shard), identity=args.shard,
                             environ={"OPTK_SHARD_ID": args.shard})
    arrivals = Arrivals()
    runtime.parents.add_handler(arrivals)
    status = Path(args.status)
    lost = False
    try:
        while not stop.is_set():
            if runtime.finished:  # stopped itself: its shard Lease could not be renewed
                lost = True
                break
            temp = status.with_suffix(".tmp")
            temp.write_text(json.dumps(figures(runtime, base, arrivals)))
            temp.replace(status)
            stop.wait(0.25)
    finally:
        clean = runtime.stop(5.0)
    return 0 if clean and not lost else 1


if __name__ == "__main__":
    sys.exit(main())
