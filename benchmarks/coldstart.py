"""Benchmark: cold start of the Thanos example operator at 1,000 parents, its peak memory, and
the memory of an informer cache per cached object against the object's JSON size.

Issue 14's size goals in one command: ``python -m benchmarks.driver --cold-start --parents 1000
--json`` (or ``python -m benchmarks.coldstart --parents 1000 --json``). ``optk apiserver`` runs
in its own process; the CRD and N ``Thanos`` parents of ten children each
(``benchmarks._fleet``) are created first; then ``optk run examples.thanos.operator:operator``
is spawned in its own process and the clock runs until every child exists and holds every field
the builders set (the harness watches the four child kinds, ``benchmarks._child_watch``).

Figures (the last line of stdout with ``--json`` is one JSON object):

- ``cold_start_s``: from the operator's spawn to the last child matching (so it includes the
  interpreter start and imports, as ``benchmarks.compare`` does);
- ``operator_cpu_s``: the operator process's user + system CPU at that moment (``/proc``);
- ``server_cpu_s``, ``harness_cpu_s``: the CPU the server process and this process (its watch
  of the children) used meanwhile: on two cores the three share them, so the wall time is
  bounded by their sum over two, not by the operator's CPU alone;
- ``peak_rss_mb``: its peak resident set (``VmHWM``, MiB) after convergence;
- ``cached_objects``, ``bytes_per_cached_object``: after the operator is stopped, this process
  starts one ``Informer`` per child kind on the namespace (the operator's own cache type,
  ``IndexedCache``) under ``tracemalloc``; the traced memory they hold once synced, per object;
- ``json_bytes_per_cached_object``: the same objects' compact JSON as the server sent them (the
  harness's copies), per object; ``memory_ratio`` is the quotient (goal: at most 2).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import signal
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from benchmarks import _fleet as fleet
from benchmarks._child_watch import ChildWatch
from benchmarks._kube import Cluster
from benchmarks._processes import Processes, cpu_seconds, peak_rss_bytes, start_apiserver
from benchmarks._profile import summarize
from benchmarks._scenario import install_parents

PARENTS_PLURAL = "thanoses"
RESYNC = "600s"
"""The operator's periodic resync: longer than a run, so no timer fires while it is measured."""


def _child_pid(pid: int) -> int:
    """The first child of ``pid`` (the operator under py-spy), once it exists (bounded)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            children = []
        if children:
            return int(children[0])
        time.sleep(0.01)
    raise RuntimeError(f"py-spy (pid {pid}) started no operator within 30 s")


async def _converge(
    cluster: Cluster, processes: Processes, kubeconfig: Path, *, parents: int, timeout: float,
    profile: Path | None, server_pid: int,
) -> tuple[dict[str, Any], ChildWatch]:
    created = await install_parents(cluster, parents)
    watch = ChildWatch(cluster)
    watch.set_desired(fleet.desired_children(created))
    await watch.start()
    argv = [sys.executable, "-m", "reconciler", "run", "examples.thanos.operator:operator",
            "--kubeconfig", str(kubeconfig)]
    if profile is not None:  # py-spy samples only while a thread holds the GIL: Python CPU
        argv = [str(Path(sys.executable).parent / "py-spy"), "record", "--format", "raw",
                "--rate", "250", "--nonblocking", "--gil", "-o", str(profile), "--", *argv]
    spawned = time.monotonic()
    server_before, harness_before = cpu_seconds(server_pid), time.process_time()
    process = processes.start("operator", argv, env={"OPTK_RESYNC_INTERVAL": RESYNC})
    pid = process.pid if profile is None else _child_pid(process.pid)
    converging = asyncio.create_task(watch.converged(timeout=timeout))
    while not converging.done():
        processes.check_alive("operator", process)
        await asyncio.wait({converging}, timeout=0.5)
    converged_at = converging.result()
    figures = {
        "cold_start_s": round(converged_at - spawned, 3),
        "operator_cpu_s": round(cpu_seconds(pid), 3),
        "server_cpu_s": round(cpu_seconds(server_pid) - server_before, 3),
        "harness_cpu_s": round(time.process_time() - harness_before, 3),
        "children": len(watch.desired),
    }
    await asyncio.sleep(0.5)  # let the last status patches land before reading the peak
    figures["peak_rss_mb"] = round(peak_rss_bytes(pid) / 2**20, 1)
    if profile is not None:
        os.kill(pid, signal.SIGTERM)  # py-spy writes its file once the operator exits
        process.wait(timeout=60)
    processes.stop(process)
    await watch.stop()
    return figures, watch


def cache_memory(kubeconfig: Path, *, namespace: str = fleet.NAMESPACE) -> dict[str, int]:
    """Traced memory of one informer per child kind holding every child of ``namespace``."""
    import kubernetes.config

    from reconciler import KubernetesClient
    from reconciler.informers import Informer

    api_client = kubernetes.config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig)
    )
    client = KubernetesClient(api_client)
    for kind, (api_version, _) in fleet.CHILD_KINDS.items():
        client.resource(api_version, kind)  # discovery outside the measurement
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        informers = [Informer(client, api_version, kind, namespace=namespace).start()
                     for kind, (api_version, _) in fleet.CHILD_KINDS.items()]
        for informer in informers:
            if not informer.wait_synced(300):
                raise TimeoutError(f"the {informer.type_key} informer did not sync")
        for informer in informers:
            informer.stop()
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    objects = sum(len(informer.cache) for informer in informers)
    return {"cached_objects": objects, "bytes": used}


async def _run(
    parents: int, *, timeout: float, workdir: Path, profile: Path | None
) -> dict[str, Any]:
    with Processes(workdir) as processes:
        server, kubeconfig = start_apiserver(processes)
        async with Cluster(kubeconfig) as cluster:
            figures, watch = await _converge(cluster, processes, kubeconfig, parents=parents,
                                             timeout=timeout, profile=profile,
                                             server_pid=server.pid)
        encoded = [len(json.dumps(obj, separators=(",", ":"))) for obj in watch.live.values()]
        memory = await asyncio.to_thread(cache_memory, kubeconfig)
    objects = memory["cached_objects"]
    per_object = memory["bytes"] / max(objects, 1)
    json_bytes = sum(encoded) / max(len(encoded), 1)
    figures.update(
        cached_objects=objects,
        bytes_per_cached_object=round(per_object),
        json_bytes_per_cached_object=round(json_bytes),
        memory_ratio=round(per_object / json_bytes, 2) if json_bytes else None,
    )
    return figures


def run(parents: int, *, timeout: float = 300.0, profile: Path | None = None) -> dict[str, Any]:
    """Every figure for ``parents`` parents (see the module docstring); JSON-ready. With
    ``profile``, the operator runs under ``py-spy record`` and a summary of where its CPU went
    (``benchmarks._profile``) is written there, the raw stacks next to it (``.raw``)."""
    with tempfile.TemporaryDirectory(prefix="optk-coldstart-") as tmp:
        raw = None if profile is None else Path(tmp) / "operator.raw"
        figures = asyncio.run(_run(parents, timeout=timeout, workdir=Path(tmp), profile=raw))
        if profile is not None and raw is not None:
            text = raw.read_text()
            profile.with_suffix(".raw").write_text(text)
            profile.write_text(summarize(text, top=40, title=f"cold start, {parents} parents"))
    figures.update(parents=parents, python=platform.python_version(), cpus=os.cpu_count(),
                   loadavg=[round(x, 2) for x in os.getloadavg()])
    return figures


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of this benchmark (shared with ``benchmarks.driver --cold-start``)."""
    parser.add_argument("--parents", type=int, default=1000, help="Thanos parents (10 children)")
    parser.add_argument("--timeout", type=float, default=300.0, help="convergence bound (s)")
    parser.add_argument("--profile", type=Path, default=None,
                        help="run the operator under py-spy; write a summary to this file")


def report(figures: dict[str, Any], *, as_json: bool) -> None:
    """A summary line on stdout, then the JSON object with ``as_json``."""
    print(f"cold start of {figures['parents']} parents ({figures['children']} children): "
          f"{figures['cold_start_s']} s, operator CPU {figures['operator_cpu_s']} s, "
          f"peak RSS {figures['peak_rss_mb']} MiB; cache: {figures['bytes_per_cached_object']} "
          f"bytes per object for {figures['json_bytes_per_cached_object']} bytes of JSON "
          f"({figures['memory_ratio']}x, {figures['cached_objects']} objects)")
    if as_json:
        print(json.dumps(figures))


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print (the JSON line last with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    add_arguments(parser)
    args = parser.parse_args(argv)
    report(run(args.parents, timeout=args.timeout, profile=args.profile), as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
