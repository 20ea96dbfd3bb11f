"""Benchmark: the cost of declared inputs (issue 25).

Against the embedded API server run as a subprocess (``optk apiserver``), one operator of
``benchmarks.driver``'s kind (``Drive``) with ``Operator(inputs=...)``: each of ``--parents``
parents reads its own Secret (``spec.secret``) and builds ``benchmarks.driver``'s five children
plus a Deployment whose pod template carries the Secret's digest (``optk.dev/inputs-digest``).
It measures:

- ``bytes_per_watched_secret``: traced memory (tracemalloc) of the input informer's cache per
  Secret (a Secret of one 64-byte key), with the index input -> parents;
- ``reconciles_per_input_change``: ``--changes`` Secrets rotated one at a time; the reconciles
  of every parent they caused, divided by the changes (1.0 is exact: no other parent looked at),
  and ``requests_per_input_change`` (writes: the Deployment's PATCH; the benchmark's own
  rotation not counted);
- ``resync_cpu_ms``: the operator's process CPU per reconcile of an unchanged parent (a manual
  resync of every parent, ``runtime.request``), with ``reuse_builds`` on (the default: the kept
  build, keyed on the parent's and its Secret's versions) and off.

Run: ``python -m benchmarks.inputs [--json] [--parents 100] [--changes 20]``. JSON keys: the
figures above, ``parents``, ``changes``, ``python``, ``cpus``.
"""

from __future__ import annotations

import argparse
import base64
import gc
import json
import os
import platform
import sys
import time
import tracemalloc
from typing import Any

import builders as b
from benchmarks.driver import API_VERSION, CRD, WRITES, apiserver, children
from builders import objects
from builders.inputs import inputs_digest, with_inputs_digest
from reconciler import Applying, KubernetesClient, Operator, Reporting
from reconciler.informers import Informer, WatchOptions
from reconciler.testing import wait_idle, wait_synced

NAMESPACE = "inputs-bench"


def _ref(parent: dict[str, Any]) -> b.ObjectRef:
    return b.ObjectRef(api_version="v1", kind="Secret", name=parent["spec"]["secret"],
                       namespace=parent["metadata"]["namespace"])


def declare(parent: dict[str, Any]) -> list[b.ObjectRef]:
    """A Drive's one input: the Secret its spec names."""
    return [_ref(parent)]


def build(parent: dict[str, Any], inputs: b.Inputs) -> list[b.ResourceBuilder]:
    """``benchmarks.driver``'s children and a Deployment rolled by the Secret's digest."""
    ref, name = _ref(parent), parent["metadata"]["name"]

    @b.resource_builder
    def rolled(parent: dict[str, Any]) -> dict[str, Any]:
        inputs.require(ref)
        dep = objects.deployment(
            metadata={"name": f"{name}-rolled"}, selector_labels={"app": f"{name}-rolled"},
            containers=[objects.container(name="app", image="registry.k8s.io/pause:3.9")],
            replicas=0)
        return with_inputs_digest(dep, inputs_digest(inputs, [ref]))

    return [*children(parent), rolled(parent)]


def _secret(i: int, value: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": f"s{i}", "namespace": NAMESPACE},
            "data": {"key": base64.b64encode(value.encode()).decode()}}


def _writes(counts: dict[str, int]) -> int:
    return sum(counts.get(verb, 0) for verb in WRITES)


def _bytes_per_secret(client: KubernetesClient, count: int) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        informer = Informer(client, "v1", "Secret", namespace=NAMESPACE,
                            options=WatchOptions(initial_events=False))
        informer.start()
        assert informer.wait_synced(60)
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - base
        informer.stop()
    finally:
        tracemalloc.stop()
    return used / count


def _resync_cpu(client: KubernetesClient, parents: int, *, reuse: bool) -> float:
    operator = Operator(
        api_version=API_VERSION, kind="Drive", build=build, inputs=declare, namespace=NAMESPACE,
        name=f"inputs-{'on' if reuse else 'off'}", reporting=Reporting(events=False),
        applying=Applying(reuse_builds=reuse),
    )
    runtime = operator.start(client)
    try:
        assert wait_synced(runtime, 60)
        assert wait_idle(runtime, 120, settle=0.5)
        for _ in range(2):  # the first pass after the status writes rebuilds once
            for i in range(parents):
                runtime.request(NAMESPACE, f"p{i}")
            assert wait_idle(runtime, 120, settle=0.3)
        started = time.process_time()
        for i in range(parents):
            runtime.request(NAMESPACE, f"p{i}")
        assert wait_idle(runtime, 120, settle=0.3)
        return (time.process_time() - started - 0.0) * 1000 / parents
    finally:
        runtime.stop(5)


def run(parents: int, changes: int) -> dict[str, Any]:
    """Every figure, on a fresh embedded server."""
    with apiserver() as (client, counts):
        client.create(CRD)
        deadline = time.monotonic() + 30
        while not client.is_served(API_VERSION, "Drive") and time.monotonic() < deadline:
            time.sleep(0.05)
        client.create({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": NAMESPACE}})
        for i in range(parents):
            client.create(_secret(i, "x" * 64))
        figures: dict[str, Any] = {
            "bytes_per_watched_secret": round(_bytes_per_secret(client, parents))}
        for i in range(parents):
            client.create({"apiVersion": API_VERSION, "kind": "Drive",
                           "metadata": {"name": f"p{i}", "namespace": NAMESPACE},
                           "spec": {"size": 1, "secret": f"s{i}"}})
        operator = Operator(
            api_version=API_VERSION, kind="Drive", build=build, inputs=declare,
            namespace=NAMESPACE, name="inputs-bench", reporting=Reporting(events=False),
        )
        runtime = operator.start(client)
        try:
            assert wait_synced(runtime, 60)
            assert wait_idle(runtime, 300, settle=1.0)
            reconciles, writes = 0, 0
            for change in range(changes):
                before, seen = counts(), sum(runtime.stats.reconciles.values())
                client.patch("v1", "Secret", f"s{change % parents}",
                             {"stringData": {"key": f"rotated-{change}"}},
                             patch_type="application/merge-patch+json", namespace=NAMESPACE)
                deadline = time.monotonic() + 30
                while (sum(runtime.stats.reconciles.values()) == seen
                       and time.monotonic() < deadline):
                    time.sleep(0.005)
                assert wait_idle(runtime, 60, settle=0.3)
                reconciles += sum(runtime.stats.reconciles.values()) - seen
                writes += _writes(counts()) - _writes(before) - 1  # not our rotation
            figures["reconciles_per_input_change"] = round(reconciles / changes, 3)
            figures["requests_per_input_change"] = round(writes / changes, 3)
        finally:
            runtime.stop(5)
        figures["resync_cpu_ms"] = {
            "reuse_builds_on": round(_resync_cpu(client, parents, reuse=True), 3),
            "reuse_builds_off": round(_resync_cpu(client, parents, reuse=False), 3)}
    return figures


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.inputs``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.inputs")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--parents", type=int, default=100)
    parser.add_argument("--changes", type=int, default=20)
    args = parser.parse_args(argv)
    figures = run(args.parents, args.changes)
    figures |= {"parents": args.parents, "changes": args.changes,
                "python": platform.python_version(), "cpus": os.cpu_count()}
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
