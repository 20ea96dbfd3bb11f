"""Benchmark: the parent reconcile against the naive CreateOrUpdate loop a Python user writes today.

For 1, 100 and 1,000 children (half Deployments, a tenth Services, the rest ConfigMaps) of one
custom-resource parent, against the embedded API server run as a subprocess (``optk apiserver``,
a fresh one per size and configuration, so this process's CPU is the client's own and one side's
objects never load the other's server), it measures three cases: the first reconcile (everything
is created), a reconcile with nothing changed, and a reconcile after one child's spec changed.

Three configurations, each in the same run:

- ``ours``: ``ParentReconciler`` doing the peer's job (no Events, no parent status) and reading
  children as the driver does in production: from informer caches (``InformerManager`` +
  ``InformerReader``, writes fed back through ``RecordingClient``). The informers are started
  and synced before the measured window; their one-off list+watch per type is reported as
  ``informer_setup``.
- ``ours_full``: the whole bookkeeping: Events and parent status on, reads passed through to the
  server (one LIST per kind per reconcile), so readers see the price of each part.
- ``peer``: typed official-client calls per child (read, copy the desired fields over the live
  object, compare whole objects, replace when different, create on 404), as controller-runtime's
  ``CreateOrUpdate`` does.

Both sides build their desired children inside the measured window. Requests come from the
server's request counts; ``seconds`` is wall time of the reconcile call, ``cpu_seconds`` the
calling thread's CPU time, ``process_cpu_seconds`` the whole client process's (for ``ours`` this
includes the informer threads decoding the watch events of its own writes: the window closes
when every informer has seen them). Each cycle (first, unchanged, resync: a second unchanged
reconcile as a periodic resync makes it, one_changed) runs ``repeats``
times in fresh namespaces; figures are medians.

``--reuse-builds`` adds ``ours_reuse``: ``ours`` with ``ParentReconciler(reuse_builds=True)``
(the build memo, ``reconciler._reconcile.memo.BuildMemo``; its builders read ``changed``, outside
the parent, so changing it drops the kept builds).

Run: ``python -m benchmarks.reconcile [--json] [--sizes 1,100,1000] [--repeats 51,5,2]
[--reuse-builds]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from benchmarks.driver import apiserver
from builders import DesiredState, ResourceBuilder
from builders.names import MANAGED_BY_LABEL
from reconciler import (
    KubernetesClient,
    ParentReconciler,
    ParentResult,
    ParentSettings,
    ResourceReconciler,
)
from reconciler.informers import InformerManager, InformerReader, RecordingClient

_WRITES = ("create", "update", "patch", "delete", "deletecollection")
_READS = ("get", "list", "watch")
CHILD_TYPES = (("apps/v1", "Deployment"), ("v1", "Service"), ("v1", "ConfigMap"))
OPERATOR = "bench"
CONFIGS = ("ours", "ours_full", "peer")
DEFAULT_REPEATS = {1: 51, 100: 5, 1000: 2}
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


Counts = Callable[[], dict[str, int]]


def _measure(
    counts: Counts, action: Callable[[], Any], settle: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Requests, wall time and CPU of ``action``; ``settle(outcome)`` waits for the client's
    background work caused by the action (informer events), inside the process CPU window."""
    before = counts()
    wall, cpu, process = time.perf_counter(), time.thread_time(), time.process_time()
    outcome = action()
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    if settle is not None:
        settle(outcome)
    process = time.process_time() - process
    after = counts()
    delta = {verb: after.get(verb, 0) - before.get(verb, 0) for verb in set(after) | set(before)}
    return {
        "writes": sum(delta.get(v, 0) for v in _WRITES),
        "reads": sum(delta.get(v, 0) for v in _READS),
        "seconds": wall,
        "cpu_seconds": cpu,
        "process_cpu_seconds": process,
    }


def _median(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Per key, the median of the samples (requests as the lower median: they are integers)."""
    out: dict[str, Any] = {}
    for key in samples[0]:
        values = [s[key] for s in samples]
        if isinstance(values[0], float):
            out[key] = round(statistics.median(values), 5)
        else:
            out[key] = statistics.median_low(values)
    out["repeats"] = len(samples)
    return out


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


class Side:
    """What the configurations under test share: their subclasses' ``reconcile(parent)`` builds
    the parent's children (at ``changed``'s version for the changed child) and brings them to
    the cluster; ``settle`` and ``close`` do nothing unless there is background work."""

    def __init__(self, client: KubernetesClient, size: int) -> None:
        self.client = client
        self.size = size
        self.changed: int | None = None

    def desired(self, parent: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The parent's children as built now."""
        return children(str(parent["metadata"]["namespace"]), self.size, self.changed)

    def settle(self, outcome: Any) -> None:
        """Wait for the background work ``outcome`` caused (nothing by default)."""

    def close(self) -> None:
        """Stop background work."""


class Peer(Side):
    """The naive CreateOrUpdate loop."""

    def __init__(self, client: KubernetesClient, size: int) -> None:
        super().__init__(client, size)
        self.peers: dict[str, NaivePeer] = {}

    def reconcile(self, parent: Mapping[str, Any]) -> Any:
        """Read, compare, replace or create, child by child (one ``NaivePeer`` per parent)."""
        uid = str(parent["metadata"]["uid"])
        if uid not in self.peers:
            self.peers[uid] = NaivePeer(self.client.api_client, parent)
        self.peers[uid].reconcile(self.desired(parent))


def _checked(result: ParentResult) -> ParentResult:
    if not result.ok:
        problem = result.errors or result.status_error
        raise RuntimeError(f"benchmark reconcile failed: {problem}")
    return result


class OursFull(Side):
    """``ParentReconciler`` with Events and status, reading through to the server."""

    def __init__(self, client: KubernetesClient, size: int) -> None:
        super().__init__(client, size)
        self.reconciler = ParentReconciler(client, self.builders, operator_name=OPERATOR)

    def builders(self, parent: Mapping[str, Any]) -> list[ResourceBuilder]:
        """The builder list ``ParentReconciler`` calls."""
        return _builders(self.desired(parent))

    def reconcile(self, parent: Mapping[str, Any]) -> Any:
        """One parent reconcile (raises when a child failed)."""
        return _checked(self.reconciler.reconcile(parent))


class Ours(OursFull):
    """``ParentReconciler`` doing the peer's job, reading from synced informer caches."""

    reuse_builds = False

    def __init__(self, client: KubernetesClient, size: int) -> None:
        Side.__init__(self, client, size)
        self.manager = InformerManager(
            client, handler=lambda *_: None, label_selector=f"{MANAGED_BY_LABEL}={OPERATOR}",
        )
        writer = RecordingClient(client, informers=self.manager.informer)
        reader = InformerReader(client, self.manager)
        self.reconciler = ParentReconciler(
            writer, self.builders, operator_name=OPERATOR, reader=reader,
            resources=ResourceReconciler(writer, reader=reader),
            settings=ParentSettings(events=False, write_status=False,
                                    reuse_builds=self.reuse_builds),
        )

    def start_informers(self) -> None:
        """Start one informer per child type and wait for their first lists."""
        for api_version, kind in CHILD_TYPES:
            self.manager.ensure(api_version, kind)
        for api_version, kind in CHILD_TYPES:
            informer = self.manager.informer(api_version, kind)
            if informer is None or not informer.wait_synced(60):
                raise RuntimeError(f"the {kind} informer did not sync")

    def settle(self, outcome: Any) -> None:
        """Wait until each informer has seen the last write of its type (its echo decoded)."""
        newest: dict[tuple[str, str], int] = {}
        for result in outcome.children:
            rv = (result.live or {}).get("metadata", {}).get("resourceVersion")
            if result.writes and rv:
                key = (result.ref.api_version, result.ref.kind)
                newest[key] = max(newest.get(key, 0), int(rv))
        deadline = time.monotonic() + 30
        for (api_version, kind), rv in newest.items():
            informer = self.manager.informer(api_version, kind)
            while informer is not None and int(informer.resource_version or 0) < rv:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the {kind} informer never saw version {rv}")
                time.sleep(0.0005)

    def close(self) -> None:
        """Stop the informers."""
        self.manager.stop()


class OursReuse(Ours):
    """``Ours`` with ``reuse_builds=True``: what it builds depends on ``changed`` (outside the
    parent), so setting it drops the kept builds, as the option's contract asks."""

    reuse_builds = True

    built_with: int | None = None

    def reconcile(self, parent: Mapping[str, Any]) -> Any:
        """One parent reconcile; a change of ``changed`` since the last drops the kept builds."""
        if self.built_with != self.changed:
            self.reconciler.forget_builds()  # the outside state the builders read changed
            self.built_with = self.changed
        return super().reconcile(parent)


SIDES: dict[str, type[Peer | OursFull]] = {"ours": Ours, "ours_full": OursFull, "peer": Peer,
                                           "ours_reuse": OursReuse}


@contextmanager
def _server() -> Iterator[tuple[KubernetesClient, Counts]]:
    """A fresh ``optk apiserver`` subprocess serving the ``Bench`` kind."""
    with apiserver() as (client, counts):
        client.create(parent_crd())
        deadline = time.monotonic() + 30
        while not client.is_served(PARENT_API, "Bench"):
            if time.monotonic() > deadline:
                raise RuntimeError("the Bench CRD never became served")
            time.sleep(0.05)
        yield client, counts


def _cycle(
    side: Peer | OursFull, counts: Counts, parent: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """First, unchanged, resync (unchanged again) and one_changed reconciles of one fresh
    parent."""
    figures: dict[str, dict[str, Any]] = {}
    for case, changed in (("first", None), ("unchanged", None), ("resync", None),
                          ("one_changed", 0)):
        side.changed = changed
        outcome: list[Any] = []

        def act(parent: dict[str, Any] = parent, outcome: list[Any] = outcome) -> Any:
            outcome.append(side.reconcile(parent))
            return outcome[-1]

        figures[case] = _measure(counts, act, side.settle)
        if isinstance(outcome[-1], ParentResult):
            # Of the writes, how many were the parent's Events and status (the peer has neither).
            figures[case]["event_and_status_writes"] = sum(
                1 for c in outcome[-1].api_calls
                if c.ref.kind == "Event" or (c.verb == "patch" and c.ref.kind == "Bench")
            )
        # The driver hands each reconcile the parent as its watch last saw it.
        parent = side.client.get(PARENT_API, "Bench", "bench",
                                 namespace=parent["metadata"]["namespace"])
    return figures


def run_side(name: str, size: int, repeats: int) -> tuple[dict[str, dict[str, Any]], Any]:
    """``repeats`` cycles of one configuration on its own server: median figures per case,
    and (for ``ours``) the informers' setup cost."""
    with _server() as (client, counts):
        side = SIDES[name](client, size)
        setup = None
        try:
            if isinstance(side, Ours):
                setup = _measure(counts, side.start_informers)
                setup["types"] = len(CHILD_TYPES)
            # Unmeasured warm-up (connections, schema loading): a running operator paid it
            # long ago. Four children, reconciled twice.
            side.size = 4
            warm_parent = _parent(client, _namespace(client, "warm"))
            for _ in range(2):
                side.settle(side.reconcile(warm_parent))
            side.size = size
            samples: dict[str, list[dict[str, Any]]] = {}
            for _ in range(repeats):
                parent = _parent(client, _namespace(client, name.replace("_", "-")))
                side.changed = None
                for case, figures in _cycle(side, counts, parent).items():
                    samples.setdefault(case, []).append(figures)
        finally:
            side.close()
    return {case: _median(s) for case, s in samples.items()}, setup


def run_size(
    size: int, repeats: int, configs: tuple[str, ...] = CONFIGS
) -> tuple[dict[str, dict[str, Any]], Any]:
    """The cases for one size, each configuration on its own server."""
    figures: dict[str, dict[str, Any]] = {}
    setup = None
    for name in configs:
        per_case, side_setup = run_side(name, size, repeats)
        setup = setup or side_setup
        for case, values in per_case.items():
            figures.setdefault(case, {})[name] = values
    return figures, setup


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print a table, or with ``--json`` one JSON object on the last line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reconcile")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON last")
    parser.add_argument("--sizes", default="1,100,1000", help="comma-separated child counts")
    parser.add_argument("--repeats", default="",
                        help="cycles per size, comma-separated (default 51 / 5 / 2 for 1 / 100 "
                             "/ 1000 children, 1 for other sizes)")
    parser.add_argument("--reuse-builds", action="store_true",
                        help="also run ours_reuse: ours with ParentReconciler(reuse_builds=True)")
    args = parser.parse_args(argv)
    configs = (*CONFIGS, "ours_reuse") if args.reuse_builds else CONFIGS
    sizes = [int(s) for s in args.sizes.split(",") if s]
    given = [int(r) for r in args.repeats.split(",") if r]
    repeats = {size: given[i] if i < len(given) else DEFAULT_REPEATS.get(size, 1)
               for i, size in enumerate(sizes)}
    report: dict[str, Any] = {
        "python": platform.python_version(), "cpus": os.cpu_count(), "informer_setup": {},
    }
    for size in sizes:
        report[str(size)], report["informer_setup"][str(size)] = run_size(
            size, repeats[size], configs)
        if not args.json:
            for case, by_side in report[str(size)].items():
                for who, f in by_side.items():
                    print(f"{size:>5} {case:<12} {who:<10} writes={f['writes']:<5} "
                          f"reads={f['reads']:<5} seconds={f['seconds']:<8} "
                          f"cpu={f['cpu_seconds']:<8} process_cpu={f['process_cpu_seconds']}")
            print(f"{size:>5} informer setup: {report['informer_setup'][str(size)]}")
    if args.json:
        print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
