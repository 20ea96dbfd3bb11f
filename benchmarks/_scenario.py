"""One operator through every phase of ``benchmarks.compare``, against a fresh API server.

``run_scenario`` starts ``optk apiserver`` in its own process, installs the Thanos CRD and N
parents, starts the operator process (the clock starts at its spawn: a cold start includes the
interpreter and imports), then measures, in order: convergence; a quiet steady-state window; a
forced resync of every parent (the ``optk.dev/reconcile-requested-at`` annotation set on each:
ours reconciles on it, kopf's ``on.update`` handler runs on any annotation change); random drifts
repaired one at a time; a spec change (a new image) reflected in every workload child. Requests
are the server's counts by verb minus the harness's own. Every wait is bounded; every process
is stopped when it returns or fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from benchmarks import _fleet as fleet
from benchmarks._child_watch import ChildWatch
from benchmarks._kube import JSON_PATCH, MERGE_PATCH, Cluster, collection_path, object_path
from benchmarks._processes import Processes, cpu_seconds, peak_rss_bytes, start_apiserver
from examples.thanos.crds import API_VERSION, THANOS_CRD
from reconciler import REQUESTED_AT_ANNOTATION

PARENTS_PLURAL = "thanoses"
REQUESTED_AT = REQUESTED_AT_ANNOTATION
RESYNC_SECONDS = 600
"""Both operators' periodic resync: longer than a run, so no timer fires inside a phase."""


@attrs.frozen(kw_only=True)
class Peer:
    """How to start one operator: its name, command line and environment."""

    name: str
    argv: Sequence[str]
    env: Mapping[str, str]


OURS = "examples.thanos.operator:operator"
"""Our operator as it is; ``benchmarks.gates:ungated_operator`` is the same without its gate
(``compare --gates off``: the work of kopf's peer, which waits for nothing)."""


def peers(kubeconfig: Path, *, ours: str = OURS) -> dict[str, Peer]:
    """The two operators, started against ``kubeconfig`` (``ours``: our operator's target)."""
    return {
        "ours": Peer(
            name="ours",
            argv=[sys.executable, "-m", "reconciler", "run", ours,
                  "--kubeconfig", str(kubeconfig)],
            env={"OPTK_RESYNC_INTERVAL": f"{RESYNC_SECONDS}s"},
        ),
        "kopf": Peer(
            name="kopf",
            argv=[sys.executable, "-m", "kopf", "run", "--standalone", "--all-namespaces",
                  "-m", "benchmarks.peers.kopf_thanos.handlers"],
            env={"KUBECONFIG": str(kubeconfig),
                 "KOPF_THANOS_RESYNC_SECONDS": str(RESYNC_SECONDS)},
        ),
    }


@attrs.frozen(kw_only=True)
class Options:
    """The knobs of one run."""

    size: int
    steady_seconds: float = 10.0
    drifts: int = 200
    """Drifts repaired one at a time: 200 samples make the nearest-rank p99 the third worst."""
    seed: int = 14
    drift_gap: float = 0.2
    """Seconds between a repair and the next drift (drifts are apart in real clusters)."""
    converge_only: bool = False
    """Stop after the convergence (profiling runs)."""
    profile: Path | None = None
    """Run the operator under ``py-spy record`` writing raw stacks here (profiling runs)."""
    converge_timeout: float = 120.0
    ours: str = OURS
    """Our operator's ``optk run`` target (see :data:`OURS`)."""


class Probe:
    """Server counts (minus the harness's) and operator CPU at one instant."""

    def __init__(self, cluster: Cluster, pid: int) -> None:
        self.cluster, self.pid = cluster, pid

    async def snapshot(self) -> tuple[dict[str, int], dict[str, int], float]:
        """``(server by verb, harness's own by verb, operator CPU seconds)``."""
        counts = await self.cluster.server_counts()
        return (fleet_verbs(counts), dict(self.cluster.own), cpu_seconds(self.pid))

    @staticmethod
    def delta(
        before: tuple[dict[str, int], dict[str, int], float],
        after: tuple[dict[str, int], dict[str, int], float],
    ) -> tuple[dict[str, int], float]:
        """The operator's requests by verb and CPU seconds between two snapshots."""
        own = {verb: after[1].get(verb, 0) - before[1].get(verb, 0) for verb in after[1]}
        return fleet.verb_delta(before[0], after[0], own), round(after[2] - before[2], 4)

    async def quiet(self, *, idle: float = 1.0, timeout: float = 60.0) -> float:
        """Wait until the operator is idle for ``idle`` s; the time its activity last showed.

        Idle: under 5% of a core and at most 2 requests over the window (lease renewals and
        the like pass). Returns at the bound if it never goes quiet.
        """
        step = 0.25
        start = time.monotonic()
        history: list[tuple[float, int, float]] = []
        last_busy = start
        while time.monotonic() - start < timeout:
            counts, own, cpu = await self.snapshot()
            total = sum(counts.values()) - sum(own.values())
            now = time.monotonic()
            if history:
                prev = history[-1]
                if total - prev[1] > 0 or cpu - prev[2] > 0.05 * (now - prev[0]):
                    last_busy = now
            history.append((now, total, cpu))
            old = [h for h in history if now - h[0] >= idle]
            if old and total - old[-1][1] <= 2 and cpu - old[-1][2] <= 0.05 * (now - old[-1][0]):
                return last_busy
            await asyncio.sleep(step)
        return time.monotonic()


def drift_percentiles(samples: Sequence[float]) -> dict[str, float | int | None]:
    """p50, p90, p95, p99 (nearest rank) and the worst of the drift latencies, and how many."""
    return {"drift_samples": len(samples),
            **{f"drift_p{q}_ms": fleet.percentile(samples, q) for q in (50, 90, 95, 99)},
            "drift_max_ms": max(samples) if samples else None}


def fleet_verbs(counts: Mapping[str, Any]) -> dict[str, int]:
    """The server's requests by verb, as ints."""
    return {str(k): int(v) for k, v in dict(counts.get("byVerb") or {}).items()}


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


def _by_resource(after: Any, before: Any) -> dict[str, int]:
    """``verb resource`` -> requests between two breakdowns of the server (codes together)."""
    totals: dict[str, int] = {}
    for cells, sign in ((after, 1), (before, -1)):
        for cell in cells:
            key = f"{cell['verb']} {cell['resource']}"
            totals[key] = totals.get(key, 0) + sign * int(cell["count"])
    return {key: n for key, n in sorted(totals.items()) if n}


async def bounded(coros: Sequence[Any], *, limit: int = 8) -> list[Any]:
    """Await ``coros``, at most ``limit`` at a time; their results in order."""
    gate = asyncio.Semaphore(limit)

    async def one(coro: Any) -> Any:
        async with gate:
            return await coro

    return list(await asyncio.gather(*(one(c) for c in coros)))


async def _until_counted(cluster: Cluster, *, watches: int) -> None:
    """Wait (bounded) until the server has counted the harness's watches: it counts a watch
    when its stream starts, which may be after the request returned."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if fleet_verbs(await cluster.server_counts()).get("watch", 0) >= watches:
            return
        await asyncio.sleep(0.02)


async def install_parents(cluster: Cluster, size: int) -> list[dict[str, Any]]:
    """The Thanos CRD, the namespace and ``size`` parents (8 creates at a time); the parents
    as created. Shared by ``benchmarks.compare`` and ``benchmarks.coldstart``."""
    await cluster.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                          verb="create", body=THANOS_CRD)
    return await create_when_served(
        cluster, collection_path(API_VERSION, PARENTS_PLURAL, fleet.NAMESPACE),
        [fleet.parent(i) for i in range(size)], first=[(
            f"/api/v1/namespaces/{fleet.NAMESPACE}/secrets", fleet.object_storage_secret())])


async def create_when_served(
    cluster: Cluster, path: str, objects: Sequence[Mapping[str, Any]], *,
    namespace: str = fleet.NAMESPACE, first: Sequence[tuple[str, Mapping[str, Any]]] = (),
) -> list[dict[str, Any]]:
    """Create ``namespace`` and the ``first`` objects (collection path, body: what the parents
    read, such as their Secret), wait (bounded) until the collection ``path`` of a new CRD is
    served, then create ``objects`` there (8 at a time); the objects as created."""
    await cluster.request("POST", "/api/v1/namespaces", verb="create",
                          body={"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": namespace}})
    for where, body in first:
        await cluster.request("POST", where, verb="create", body=dict(body))
    deadline = time.monotonic() + 30
    while True:  # the CRD serves its kind once established
        try:
            await cluster.request("GET", path, verb="list")
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)
    return await bounded([cluster.request("POST", path, verb="create", body=dict(obj))
                          for obj in objects])


async def _drift(
    cluster: Cluster, watch: ChildWatch, rng: random.Random, number: int, timeout: float
) -> tuple[str, float | None]:
    present = sorted(k for k, v in watch.desired.items() if v is not None)
    kind_of_drift = ("delete", "edit", "unlabel")[number % 3]
    pool = [k for k in present if k[0] in fleet.WORKLOADS] if kind_of_drift == "edit" else present
    key = rng.choice(pool)
    api_version, plural = fleet.CHILD_KINDS[key[0]]
    path = object_path(api_version, plural, key[1], key[2])
    watch.expect_drift(key)
    sent = time.monotonic()
    if kind_of_drift == "delete":
        await cluster.request("DELETE", path, verb="delete")
    elif kind_of_drift == "edit":
        await cluster.request("PATCH", path, verb="patch", content_type=MERGE_PATCH,
                              body={"spec": {"replicas": 7}})
    else:
        label = fleet.DRIFT_LABEL.replace("~", "~0").replace("/", "~1")
        await cluster.request("PATCH", path, verb="patch", content_type=JSON_PATCH,
                              body=[{"op": "remove", "path": f"/metadata/labels/{label}"}])
    done = await watch.repaired(key, timeout=timeout)
    return kind_of_drift, None if done is None else round((done - sent) * 1000, 2)


class Session:
    """One operator against its own server, phase by phase (``run_scenario``, ``run_paired``).

    ``start`` installs the parents, spawns the operator and measures the cold start, the steady
    state and the forced resync; ``drift`` makes one drift and waits for its repair;
    ``drift_figures`` summarises the drifts made; ``finish`` measures the spec change and stops
    the operator. The caller enters it as an async context (the server and the harness's
    watches) and keeps the order.
    """

    def __init__(self, peer_name: str, options: Options, workdir: Path) -> None:
        self.name, self.options, self.workdir = peer_name, options, workdir
        self.figures: dict[str, Any] = {}
        self.latencies: dict[str, list[float]] = {"delete": [], "edit": [], "unlabel": []}
        self.missed = 0
        self.rng = random.Random(options.seed + options.size)
        self._stack = contextlib.AsyncExitStack()
        self._drifts_before: tuple[dict[str, int], dict[str, int], float] | None = None

    async def __aenter__(self) -> Session:
        processes = self._stack.enter_context(Processes(self.workdir))
        _, kubeconfig = start_apiserver(processes)
        self.processes = processes
        self.peer = peers(kubeconfig, ours=self.options.ours)[self.name]
        self.cluster = await self._stack.enter_async_context(Cluster(kubeconfig))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def start(self) -> None:
        """Cold start, steady state and forced resync; the figures so far."""
        cluster, options, figures = self.cluster, self.options, self.figures
        self.parents = await install_parents(cluster, options.size)
        self.watch = watch = ChildWatch(cluster)
        self._stack.push_async_callback(watch.stop)
        watch.set_desired(fleet.desired_children(self.parents))
        await watch.start()
        await _until_counted(cluster, watches=len(fleet.CHILD_KINDS))
        base = await cluster.server_counts()
        base_counts = fleet_verbs(base)
        base_own = dict(cluster.own)
        argv = list(self.peer.argv)
        if options.profile is not None:
            argv = [str(Path(sys.executable).parent / "py-spy"), "record", "--format", "raw",
                    "--rate", "250", "--nonblocking", "--gil", "-o", str(options.profile),
                    "--", *argv]
        spawned = time.monotonic()
        self.process = process = self.processes.start(self.peer.name, argv, env=self.peer.env)
        self.pid = process.pid if options.profile is None else _child_pid(process.pid)
        self.probe = probe = Probe(cluster, self.pid)
        converging = asyncio.create_task(watch.converged(timeout=options.converge_timeout))
        while not converging.done():
            self.processes.check_alive(self.peer.name, process)
            await asyncio.wait({converging}, timeout=0.5)
        converged_at = converging.result()
        after = await probe.snapshot()
        breakdown = (await cluster.server_counts()).get("breakdown") or ()
        cpu = after[2]
        own = {verb: after[1].get(verb, 0) - base_own.get(verb, 0) for verb in after[1]}
        by_verb = fleet.verb_delta(base_counts, after[0], own)
        figures.update(
            converge_wall_s=round(converged_at - spawned, 3), converge_cpu_s=round(cpu, 3),
            converge_requests=by_verb, converge_requests_total=sum(by_verb.values()),
            converge_writes=fleet.writes(by_verb),
            converge_requests_by_resource=_by_resource(breakdown, base.get("breakdown") or ()),
            converge_cpu_per_child_ms=round(cpu * 1000 / max(1, len(watch.desired)), 3),
        )
        if options.converge_only:
            return
        await probe.quiet(timeout=30 + options.size * 0.05)

        before = await probe.snapshot()
        await asyncio.sleep(options.steady_seconds)
        steady, steady_cpu = Probe.delta(before, await probe.snapshot())
        figures.update(steady_window_s=options.steady_seconds,
                       steady_requests=sum(steady.values()), steady_requests_by_verb=steady,
                       steady_cpu_s=steady_cpu)

        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        before = await probe.snapshot()
        started = time.monotonic()
        await self._patch_parents({"metadata": {"annotations": {REQUESTED_AT: stamp}}})
        last = await probe.quiet(timeout=30 + options.size * 0.2)
        resync, resync_cpu = Probe.delta(before, await probe.snapshot())
        figures.update(
            resync_wall_s=round(last - started, 3), resync_requests=sum(resync.values()),
            resync_writes=fleet.writes(resync), resync_requests_by_verb=resync,
            resync_cpu_s=resync_cpu,
            resync_cpu_per_parent_ms=round(resync_cpu * 1000 / options.size, 3),
        )

    async def _patch_parents(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        return await bounded([
            self.cluster.request(
                "PATCH", object_path(API_VERSION, PARENTS_PLURAL, fleet.NAMESPACE,
                                     p["metadata"]["name"]),
                verb="patch", content_type=MERGE_PATCH, body=body)
            for p in self.parents
        ])

    async def drift(self, number: int) -> None:
        """Drift one random child (the kind cycling with ``number``) and wait for its repair."""
        self.processes.check_alive(self.peer.name, self.process)
        if self._drifts_before is None:
            self._drifts_before = await self.probe.snapshot()
        kind_of_drift, latency = await _drift(self.cluster, self.watch, self.rng, number,
                                              timeout=15.0)
        if latency is None:
            self.missed += 1
        else:
            self.latencies[kind_of_drift].append(latency)

    async def drift_figures(self) -> None:
        """The drift repair figures of the drifts made so far."""
        if self._drifts_before is None:
            return
        drift_requests, drift_cpu = Probe.delta(self._drifts_before, await self.probe.snapshot())
        every = [v for values in self.latencies.values() for v in values]
        self.figures.update(
            drift_count=len(every) + self.missed, drift_missed=self.missed,
            **drift_percentiles(every),
            drift_p50_ms_by_kind={k: fleet.percentile(v, 50) for k, v in self.latencies.items()},
            drift_p99_ms_by_kind={k: fleet.percentile(v, 99) for k, v in self.latencies.items()},
            drift_samples_ms=every,
            drift_requests=sum(drift_requests.values()), drift_cpu_s=drift_cpu,
        )
        await self.probe.quiet(timeout=30)

    async def finish(self) -> dict[str, Any]:
        """The spec change, peak RSS and total CPU; stops the operator; every figure."""
        options, figures, probe, watch = self.options, self.figures, self.probe, self.watch
        if options.converge_only:
            figures["peak_rss_mib"] = round(peak_rss_bytes(self.pid) / 2**20, 1)
            if options.profile is not None:
                os.kill(self.pid, signal.SIGTERM)  # py-spy writes its file once the child exits
                self.process.wait(timeout=60)
            self.processes.stop(self.process)
            return figures
        before = await probe.snapshot()
        started = time.monotonic()
        changed = await self._patch_parents({"spec": {"image": fleet.NEW_IMAGE}})
        watch.set_desired(fleet.desired_children(changed))
        done = await watch.converged(timeout=options.converge_timeout)
        await probe.quiet(timeout=30 + options.size * 0.2)
        spec, spec_cpu = Probe.delta(before, await probe.snapshot())
        figures.update(
            spec_change_wall_s=round(done - started, 3), spec_change_requests=sum(spec.values()),
            spec_change_writes=fleet.writes(spec), spec_change_requests_by_verb=spec,
            spec_change_cpu_s=spec_cpu,
        )
        figures["peak_rss_mib"] = round(peak_rss_bytes(self.pid) / 2**20, 1)
        figures["total_cpu_s"] = round(cpu_seconds(self.pid), 3)
        self.processes.stop(self.process)
        return figures


async def _drifts(sessions: Sequence[Session], options: Options) -> None:
    """``options.drifts`` drifts per session, taking turns: one drift at a time overall, so
    every session's samples span the same stretch of time and the same background load."""
    for number in range(options.drifts):
        for session in sessions:
            await session.drift(number)
            await asyncio.sleep(options.drift_gap / len(sessions))
    for session in sessions:
        await session.drift_figures()


async def _run(peer_name: str, options: Options, workdir: Path) -> dict[str, Any]:
    async with Session(peer_name, options, workdir) as session:
        await session.start()
        if not options.converge_only:
            await _drifts([session], options)
        return await session.finish()


def run_scenario(peer_name: str, options: Options, workdir: Path) -> dict[str, Any]:
    """Every figure of one operator at one size (see the module docstring)."""
    return asyncio.run(_run(peer_name, options, workdir))


async def _run_paired(
    names: Sequence[str], options: Options, workdir: Path
) -> dict[str, dict[str, Any]]:
    async with contextlib.AsyncExitStack() as stack:
        sessions = []
        for name in names:  # one cold start at a time; the earlier operators idle meanwhile
            directory = workdir / name
            directory.mkdir(parents=True, exist_ok=True)
            session = await stack.enter_async_context(Session(name, options, directory))
            await session.start()
            sessions.append(session)
        await _drifts(sessions, options)
        return {session.name: await session.finish() for session in reversed(sessions)}


def run_paired(
    names: Sequence[str], options: Options, workdir: Path
) -> dict[str, dict[str, Any]]:
    """Every figure of each operator at one size, the drifts interleaved (see the module
    docstring): figures by peer name."""
    return asyncio.run(_run_paired(names, options, workdir))
