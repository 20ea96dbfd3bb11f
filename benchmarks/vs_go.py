"""Ours against Go: client-go's reference ``sample-controller`` and the same Foo operator.

Run as ``python -m benchmarks.vs_go [--sizes 100,1000] [--rounds 2] [--server real|embedded]
[--json] [--plot] [--out FILE]``. The Go peer is ``sample-controller`` (Kubernetes 1.25's
``k8s.io/sample-controller`` with three flags added), found as the real control plane's binaries
are found (``reconciler.envtest.find_binary``: ``OPTK_KUBE_ASSETS``, else ``KUBEBUILDER_ASSETS``);
without it, or without the control plane's binaries, the benchmark says so in one line and exits
0. Ours is ``benchmarks.peers.client_go.operator`` under ``optk run``.

For each size N and round, each operator runs alone on a fresh server (a real control plane with
its audit log, or ``optk apiserver`` with ``--server embedded``), the order alternating between
rounds. Both run with client-side rate limits lifted (Go: ``-kube-api-qps=-1``) and a 30 s resync
(Go's informer resync; ours ``ResyncPolicy(interval=30)``). Phases, timed from the operator's
spawn: convergence (every Foo's Deployment as the Go controller builds it), then idle; steady
state (``--steady-seconds``, default 120: four resyncs); drifts one at a time (a Deployment
deleted or its replicas changed; ``--drifts``; ``drift_after_idle_ms`` is the first, after the
steady state's idle window); 20 Deployments' container image changed by hand (repaired within
10 s or not); a spec change (``spec.replicas``) of the first 100 parents
(``spec_change_unconverged`` counts the Deployments still not changed after 120 s).
Requests are the operator's own (its user in the audit log; on the embedded server the server's
counts minus the harness's). With ``--json`` the last line of stdout is one JSON object:
``figures`` by size, then ``ours``, ``go`` (medians over the rounds; drift percentiles over the
pooled samples) and ``ratio`` (ours / Go), and ``runs``.

Over 500 lines because one module holds the whole comparison (the two servers, the phases of a
run, the command line and the table) as ``benchmarks.compare`` and ``_scenario`` do for kopf;
the shared parts (summaries, plots, installs, watches) are imported from them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from benchmarks import _fleet as fleet
from benchmarks import compare
from benchmarks._child_watch import ChildWatch, ConvergenceTimeout
from benchmarks._kube import MERGE_PATCH, Cluster, collection_path, object_path, verb_totals
from benchmarks._processes import Processes, cpu_seconds, peak_rss_bytes, start_apiserver
from benchmarks._profile import summarize as summarize_profile
from benchmarks._scenario import bounded, create_when_served, drift_percentiles
from benchmarks.compare import machine
from benchmarks.peers.client_go import operator as foo

PEERS = ("ours", "go")
NAMESPACE = "bench"
CRD_FILE = Path(foo.__file__).resolve().parent / "foo-crd.yaml"
PLURAL = "foos"
DEPLOYMENTS = {"Deployment": ("apps/v1", "deployments")}
RESYNC_SECONDS = foo.RESYNC_SECONDS
OPERATOR_USER = "bench-operator"
IMAGE_DRIFTS = 20
DRIFTED_IMAGE = "nginx:1.0-by-hand"
SPEC_CHANGED = 100
HEADLINE = (
    ("converge_wall_s", "converge: wall (s)"),
    ("converge_cpu_s", "converge: operator CPU (s)"),
    ("converge_requests_total", "converge: requests"),
    ("peak_rss_mib", "peak RSS (MiB)"),
    ("spec_change_wall_s", "spec change of 100 parents: wall (s)"),
    ("spec_change_requests", "spec change of 100 parents: requests"),
    ("spec_change_cpu_s", "spec change of 100 parents: CPU (s)"),
    ("drift_p50_ms", "drift repair p50 (ms)"),
    ("drift_p99_ms", "drift repair p99 (ms)"),
    ("steady_requests", "steady state: requests"),
    ("steady_cpu_s", "steady state: CPU (s)"),
    ("image_repaired", f"hand-changed image repaired (of {IMAGE_DRIFTS})"),
)

PLOTTED = ("converge_wall_s", "converge_cpu_s", "converge_requests_total", "peak_rss_mib",
           "spec_change_wall_s", "spec_change_requests", "drift_p50_ms", "drift_p99_ms",
           "steady_requests", "steady_cpu_s")
GOALS = (
    ("converge_wall_s", "converge wall", 1.0),
    ("converge_cpu_s", "converge CPU", 1.5),
    ("spec_change_wall_s", "spec change wall", 1.0),
    ("drift_p99_ms", "drift repair p99", 1.0),
)
"""Issue 30's goals: ours / Go at most."""


def vs_go_chart() -> Any:
    from benchmarks.plot import Chart

    return Chart(peers=PEERS, labels=dict(HEADLINE), plotted=PLOTTED, goals=GOALS,
                 prefix="vs-go", x_label="Foos N (one Deployment each)", versus="Go")


def foo_object(index: int, *, replicas: int = 1) -> dict[str, Any]:
    """The ``index``-th Foo."""
    name = f"foo-{index:04d}"
    return {"apiVersion": foo.API_VERSION, "kind": foo.KIND,
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"deploymentName": f"{name}-nginx", "replicas": replicas}}


def desired(foos: Sequence[Mapping[str, Any]]) -> dict[fleet.ChildKey, dict[str, Any] | None]:
    """What both operators must hold each Foo's Deployment to (what the Go controller sets)."""
    result: dict[fleet.ChildKey, dict[str, Any] | None] = {}
    for obj in foos:
        name, spec = obj["metadata"]["name"], obj["spec"]
        result[("Deployment", NAMESPACE, spec["deploymentName"])] = {
            "metadata": {"name": spec["deploymentName"], "ownerReferences": [
                {"kind": foo.KIND, "name": name, "controller": True}]},
            "spec": {"replicas": spec["replicas"], "template": {"spec": {"containers": [
                {"name": "nginx", "image": foo.IMAGE}]}}},
        }
    return result


# --- the servers ---------------------------------------------------------------------------


class Server:
    """A fresh API server for one operator: its kubeconfigs and the operator's request counts."""

    admin: Path
    operator: Path

    async def operator_counts(self, cluster: Cluster) -> dict[str, int]:
        """The operator's requests by verb so far."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop it."""


class RealServer(Server):
    """``reconciler.envtest.ControlPlane``: the operator's requests from the audit log, by user."""

    def __init__(self) -> None:
        from reconciler.envtest import ControlPlane

        self.plane = ControlPlane(users={OPERATOR_USER: ["system:masters"]}).start()
        self.admin = self.plane.kubeconfig_path
        self.operator = self.plane.kubeconfig_for(OPERATOR_USER)

    async def operator_counts(self, cluster: Cluster) -> dict[str, int]:
        return await asyncio.to_thread(self.plane.request_counts, user=OPERATOR_USER)

    def close(self) -> None:
        self.plane.stop()


class EmbeddedServer(Server):
    """``optk apiserver`` in its own process: the server's counts minus the harness's."""

    def __init__(self, processes: Processes) -> None:
        _, self.admin = start_apiserver(processes)
        self.operator = self.admin

    async def operator_counts(self, cluster: Cluster) -> dict[str, int]:
        """The server's counts minus the harness's own."""
        server = verb_totals(await cluster.server_counts())
        return {verb: n - cluster.own.get(verb, 0) for verb, n in server.items()}


def peer_argv(name: str, *, kubeconfig: Path, go_binary: Path | None,
              content_type: str | None) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one operator."""
    if name == "go":
        assert go_binary is not None
        argv = [str(go_binary), f"-kubeconfig={kubeconfig}", "-kube-api-qps=-1"]
        if content_type:
            argv.append(f"-kube-api-content-type={content_type}")
        return argv, {}
    return ([sys.executable, "-m", "reconciler", "run",
             "benchmarks.peers.client_go.operator:operator", "--kubeconfig", str(kubeconfig)],
            {})


@contextlib.contextmanager
def profiled(pid: int, out: Path | None, *, title: str, gil: bool = False) -> Iterator[None]:
    """``py-spy record`` attached to ``pid`` for the block (nothing when ``out`` is None); the
    summary (``benchmarks._profile``) written to ``out``. With ``gil``, only samples of the
    thread holding the GIL (Python's CPU; waits on the server left out)."""
    if out is None:
        yield
        return
    raw = out.with_suffix(".raw")
    spy = subprocess.Popen(
        [str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(pid), "--format",
         "raw", "--rate", "250", "--nonblocking", *(["--gil"] if gil else []), "-o", str(raw)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)  # attached
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        try:
            spy.wait(timeout=30)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait(timeout=10)
    if raw.exists():
        out.write_text(summarize_profile(raw.read_text(), title=title))
        raw.unlink()


def _go_content_type(options: argparse.Namespace) -> str | None:
    """The Go clientset's content type: client-go's default (protobuf for built-in kinds) on
    the real server; JSON on the embedded one unless ``--go-protobuf``."""
    if options.server == "embedded" and not getattr(options, "go_protobuf", False):
        return "application/json"
    return None


# --- one run -------------------------------------------------------------------------------


class Run:
    """One operator against its own server, phase by phase; ``figures`` as they are measured."""

    def __init__(self, peer: str, options: argparse.Namespace, size: int, workdir: Path,
                 go_binary: Path | None) -> None:
        self.peer, self.options, self.size, self.workdir = peer, options, size, workdir
        self.go_binary = go_binary
        self.figures: dict[str, Any] = {}
        self.rng = random.Random(size)

    def profile(self, phase: str) -> contextlib.AbstractContextManager[None]:
        """Profile ours in ``phase`` when ``--profile DIR`` is given."""
        directory = getattr(self.options, "profile", None)
        if directory is None or self.peer != "ours":
            return contextlib.nullcontext()
        Path(directory).mkdir(parents=True, exist_ok=True)
        out = Path(directory) / f"profile-vs-go-{phase}-n{self.size}.txt"
        gil = phase == "converge"  # where the CPU goes; the other phases: where the time goes
        title = (f"py-spy record --rate 250 --nonblocking{' --gil' if gil else ''} (attached): "
                 f"ours, {phase}, "
                 f"N={self.size} Foos, real control plane; Python {platform.python_version()}, "
                 f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
        return profiled(self.pid, out, title=title, gil=gil)

    async def counts(self) -> dict[str, int]:
        """The operator's requests by verb so far."""
        return await self.server.operator_counts(self.cluster)

    async def snapshot(self) -> tuple[dict[str, int], float]:
        """Requests by verb and operator CPU seconds now."""
        return await self.counts(), cpu_seconds(self.pid)

    async def delta(self, before: tuple[dict[str, int], float], prefix: str) -> None:
        """Record ``<prefix>_requests`` (by verb and total) and ``<prefix>_cpu_s`` since then."""
        counts, cpu = await self.snapshot()
        by_verb = {v: counts.get(v, 0) - before[0].get(v, 0) for v in counts}
        by_verb = {v: n for v, n in by_verb.items() if n}
        self.figures[f"{prefix}_requests_by_verb"] = by_verb
        self.figures[f"{prefix}_requests"] = sum(by_verb.values())
        self.figures[f"{prefix}_cpu_s"] = round(cpu - before[1], 3)

    async def idle(self, *, window: float = 1.0, timeout: float = 60.0) -> None:
        """Wait until the operator uses under 3% of a core over ``window`` seconds (bounded)."""
        deadline = time.monotonic() + timeout
        last = (time.monotonic(), cpu_seconds(self.pid))
        while time.monotonic() < deadline:
            await asyncio.sleep(window)
            now = (time.monotonic(), cpu_seconds(self.pid))
            if now[1] - last[1] <= 0.03 * (now[0] - last[0]):
                return
            last = now

    async def run(self) -> dict[str, Any]:
        """Every phase; the figures."""
        with Processes(self.workdir) as processes:
            if self.options.server == "embedded":
                self.server: Server = EmbeddedServer(processes)
            else:
                self.server = await asyncio.to_thread(RealServer)
            try:
                async with Cluster(self.server.admin) as cluster:
                    self.cluster = cluster
                    await self._phases(processes)
            finally:
                await asyncio.to_thread(self.server.close)
        return self.figures

    async def _install(self) -> list[dict[str, Any]]:
        cluster = self.cluster
        await cluster.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                              verb="create", body=yaml.safe_load(CRD_FILE.read_text()))
        return await create_when_served(
            cluster, collection_path(foo.API_VERSION, PLURAL, NAMESPACE),
            [foo_object(i) for i in range(self.size)])

    async def _phases(self, processes: Processes) -> None:
        options, figures = self.options, self.figures
        self.foos = await self._install()
        self.watch = watch = ChildWatch(self.cluster, namespace=NAMESPACE, kinds=DEPLOYMENTS,
                              kubelet=False)
        watch.set_desired(desired(self.foos))
        await watch.start()
        try:
            argv, env = peer_argv(
                self.peer, kubeconfig=self.server.operator, go_binary=self.go_binary,
                content_type=_go_content_type(options))
            before_counts = await self.counts()
            spawned = time.monotonic()
            self.process = processes.start(self.peer, argv, env=env)
            self.pid = self.process.pid
            converging = asyncio.create_task(watch.converged(timeout=60 + 0.2 * self.size))
            with self.profile("converge"):
                while not converging.done():
                    processes.check_alive(self.peer, self.process)
                    await asyncio.wait({converging}, timeout=0.5)
                figures["converge_wall_s"] = round(converging.result() - spawned, 3)
                await self.idle(timeout=20 + 0.02 * self.size)
            await self.delta((before_counts, 0.0), "converge")
            figures["converge_requests_total"] = figures.pop("converge_requests")
            figures["converge_requests"] = figures.pop("converge_requests_by_verb")
            figures["converge_cpu_ms_per_request"] = round(
                figures["converge_cpu_s"] * 1000 / max(1, figures["converge_requests_total"]), 3)

            before = await self.snapshot()
            with self.profile("steady"):
                await asyncio.sleep(options.steady_seconds)
            await self.delta(before, "steady")
            figures["steady_window_s"] = options.steady_seconds
            resyncs = options.steady_seconds / RESYNC_SECONDS * self.size
            if resyncs >= self.size:  # at least one resync of every parent in the window
                figures["steady_cpu_per_parent_resync_ms"] = round(
                    figures["steady_cpu_s"] * 1000 / resyncs, 3)

            await self._drifts()
            await self._image_drifts()
            await self._spec_change()
            figures["peak_rss_mib"] = round(peak_rss_bytes(self.pid) / 2**20, 1)
            figures["total_cpu_s"] = round(cpu_seconds(self.pid), 3)
            processes.stop(self.process)
        finally:
            await watch.stop()

    def _deployment_path(self, key: fleet.ChildKey) -> str:
        return object_path("apps/v1", "deployments", key[1], key[2])

    async def _drifts(self) -> None:
        samples: list[float] = []
        missed = 0
        first: float | None = None
        keys = sorted(self.watch.desired)
        for number in range(self.options.drifts):
            key = self.rng.choice(keys)
            self.watch.expect_drift(key)
            sent = time.monotonic()
            if number % 2:
                await self.cluster.request("DELETE", self._deployment_path(key), verb="delete")
            else:
                await self.cluster.request("PATCH", self._deployment_path(key), verb="patch",
                                           content_type=MERGE_PATCH,
                                           body={"spec": {"replicas": 5}})
            done = await self.watch.repaired(key, timeout=15.0)
            if done is None:
                missed += 1
            else:
                samples.append(round((done - sent) * 1000, 2))
            if number == 0:
                first = samples[0] if samples else None
            await asyncio.sleep(0.2)
        self.figures.update(drift_missed=missed, drift_samples_ms=samples,
                            **drift_percentiles(samples))
        if samples and first is not None:  # the first drift after the steady state's idle
            self.figures["drift_after_idle_ms"] = first

    async def _image_drifts(self) -> None:
        keys = self.rng.sample(sorted(self.watch.desired), min(IMAGE_DRIFTS, self.size))
        for key in keys:
            self.watch.expect_drift(key)
        body = {"spec": {"template": {"spec": {"containers": [
            {"name": "nginx", "image": DRIFTED_IMAGE}]}}}}
        await bounded([self.cluster.request(
            "PATCH", self._deployment_path(key), verb="patch",
            content_type="application/strategic-merge-patch+json", body=body) for key in keys])
        timeout = getattr(self.options, "image_timeout", 10.0)
        done = await asyncio.gather(*(self.watch.repaired(key, timeout=timeout) for key in keys))
        self.figures["image_repaired"] = sum(1 for d in done if d is not None)
        self.figures["image_drifted"] = len(keys)

    async def _spec_change(self) -> None:
        changed = [foo_object(i, replicas=2) for i in range(min(SPEC_CHANGED, self.size))]
        await self.idle(timeout=30)
        before = await self.snapshot()
        with self.profile("spec-change"):
            started = time.monotonic()
            updated = await self._spec_writes(changed)
            # only the changed Foos' Deployments: the Go peer leaves the hand-changed images
            # of the others as they are
            self.watch.set_desired(desired(updated))
            try:
                done: float | None = await self.watch.converged(timeout=120)
            except ConvergenceTimeout as error:  # recorded: a peer that lags is a figure too
                done, self.figures["spec_change_unconverged"] = None, len(error.left)
        if done is not None:
            self.figures["spec_change_wall_s"] = round(done - started, 3)
        self.figures["spec_changed_parents"] = len(changed)
        await self.idle(timeout=30)
        await self.delta(before, "spec_change")

    async def _spec_writes(self, changed: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return await bounded([self.cluster.request(
            "PATCH", object_path(foo.API_VERSION, PLURAL, NAMESPACE, obj["metadata"]["name"]),
            verb="patch", content_type=MERGE_PATCH, body={"spec": {"replicas": 2}})
            for obj in changed], limit=16)


# --- summaries -----------------------------------------------------------------------------


def summarize(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per size: medians per peer over the rounds (drift percentiles over pooled samples), the
    range of each figure (``<key>_range``) and the ratios ours / Go."""
    return compare.summarize([dict(run) for run in runs], peers=PEERS, baseline="go",
                             ranges=True)


def table(figures: Mapping[str, Any]) -> str:
    """The headline figures as a Markdown table per size."""
    lines: list[str] = []
    for size, entry in figures.items():
        lines += [f"\nN = {size} Foos", "", "| figure | ours | Go | ours / Go |",
                  "| --- | ---: | ---: | ---: |"]
        for key, label in HEADLINE:
            cells = [_fmt((entry.get(peer) or {}).get(key), (entry.get(peer) or {}).get(
                f"{key}_range")) for peer in PEERS]
            ratio = (entry.get("ratio") or {}).get(key)
            lines.append(f"| {label} | {cells[0]} | {cells[1]} | "
                         f"{'-' if ratio is None else f'{ratio}x'} |")
    return "\n".join(lines)


def _fmt(value: Any, spread: Any = None) -> str:
    if value is None:
        return "-"
    if spread and spread[0] != spread[1]:
        return f"{spread[0]:.3g}-{spread[1]:.3g}"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


@contextlib.contextmanager
def _scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="optk-vs-go-") as scratch:
        yield Path(scratch)


def missing_assets(server: str) -> str | None:
    """Why the benchmark cannot run here (one line), or None."""
    from reconciler.envtest import AssetsNotFoundError, find_assets, find_binary

    if find_binary("sample-controller") is None:
        return ("no sample-controller (the Go peer) in OPTK_KUBE_ASSETS or KUBEBUILDER_ASSETS "
                "(see ../shared/kube-assets/README.md)")
    if server == "real":
        try:
            find_assets()
        except AssetsNotFoundError as error:
            return f"no real control plane: {str(error).splitlines()[0]}"
    return None


def main(argv: list[str] | None = None, *, echo: Callable[[str], None] = print) -> int:
    """The command line; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.vs_go", description=__doc__)
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--server", choices=("real", "embedded"), default="real")
    parser.add_argument("--steady-seconds", type=float, default=120.0)
    parser.add_argument("--drifts", type=int, default=40)
    parser.add_argument("--image-timeout", type=float, default=10.0,
                        help="seconds a hand-changed image has to be repaired (default 10)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--out", default=None)
    parser.add_argument("--plot", action="store_true")
    parser.add_argument("--go-protobuf", action="store_true",
                        help="on the embedded server too, let the Go peer ask for protobuf "
                             "(client-go's default for built-in kinds)")
    parser.add_argument("--profile", default=None, metavar="DIR",
                        help="profile ours with py-spy (attached) in the convergence, the steady "
                             "state and the spec change; profile-vs-go-<phase>-n<N>.txt "
                             "summaries into DIR")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    chosen = [p for p in args.peers.split(",") if p]
    if any(p not in PEERS for p in chosen) or not sizes or min(sizes) < 1:
        parser.error(f"--peers takes {', '.join(PEERS)}; --sizes positive integers")
    reason = missing_assets(args.server)
    if reason:
        echo(f"benchmarks.vs_go skipped: {reason}")
        return 0
    from reconciler.envtest import find_binary

    go_binary = find_binary("sample-controller")
    runs: list[dict[str, Any]] = []
    began = time.monotonic()
    with _scratch() as scratch:
        for size in sizes:
            for round_ in range(max(1, args.rounds)):
                order = chosen if round_ % 2 == 0 else list(reversed(chosen))
                for peer in order:
                    workdir = scratch / f"{size}-{round_}-{peer}"
                    workdir.mkdir()
                    started = time.monotonic()
                    try:
                        figures = asyncio.run(
                            Run(peer, args, size, workdir, go_binary).run())
                    except Exception as error:  # recorded; the other runs go on
                        print(f"{peer} N={size} round {round_}: FAILED: {error}",
                              file=sys.stderr, flush=True)
                        runs.append({"peer": peer, "size": size, "round": round_,
                                     "error": f"{type(error).__name__}: {error}"[:2000]})
                        continue
                    print(f"{peer} N={size} round {round_}: converged in "
                          f"{figures['converge_wall_s']} s ({time.monotonic() - started:.0f} s)",
                          file=sys.stderr, flush=True)
                    runs.append({"peer": peer, "size": size, "round": round_,
                                 "figures": figures})
                    if args.out:
                        Path(args.out).write_text(json.dumps({"runs": runs}, indent=1) + "\n")
    figures = summarize(runs)
    result = {
        "benchmark": "vs_go", "server": args.server, "sizes": sizes,
        "rounds": max(1, args.rounds), "steady_seconds": args.steady_seconds,
        "drifts_per_run": args.drifts, "elapsed_s": round(time.monotonic() - began, 1),
        "figures": figures, "runs": runs,
        "peers": {
            "ours": {"operator": "benchmarks.peers.client_go.operator:operator (optk run)",
                     "resync_interval_s": RESYNC_SECONDS},
            "go": {"operator": f"{go_binary} -kube-api-qps=-1",
                   "resync_interval_s": RESYNC_SECONDS},
        },
        "python": platform.python_version(), "cpu_count": os.cpu_count(), "machine": machine(),
    }
    echo(table(figures))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    if args.plot:
        from benchmarks.plot import plot

        for path in plot(result, chart=vs_go_chart()):
            print(f"wrote {path}", file=sys.stderr)
    if args.json:
        echo(json.dumps(result, separators=(",", ":")))
    return 1 if any("error" in run for run in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
