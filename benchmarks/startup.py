"""Benchmark: what a process pays before its operator does anything (issue 39, "Start-up").

Run as ``python -m benchmarks.startup [--runs 9] [--against REV] [--parents 0] [--json]``.
Three figures, each the user + system CPU of a fresh interpreter (``os.wait4``'s resource
usage: other work on the machine inflates it far less than the wall time), its median over
``--runs`` processes (with the smallest and the largest):

- ``imports``: ``python -c 'import reconciler, builders, objectmatcher'`` (goal: at most
  0.25 s);
- ``operator_module``: ``python -c 'import examples.thanos.operator'``, what an operator's own
  module loads when it is defined (the ``Operator`` value, its builders, its webhooks);
- ``to_watching``: ``optk run examples.thanos.operator:operator --kubeconfig ...`` from exec to
  its first watch request (goal: at most 0.35 s). The embedded API server runs in this process
  (the operator in its own), its Thanos CRD, namespace, Secret and ``--parents`` parents
  created first; this process polls the server's request counts every millisecond and, once
  it has started the operator's first watch stream, kills the operator (SIGKILL) and reads its
  resource usage: the CPU it spent from exec to watching, plus at most the poll interval.
  ``wall_s`` is the time from spawn to the watch seen (load-sensitive); ``peak_rss_mib`` the
  process's peak resident set (``VmHWM``) at that moment, or at the program's end.

Each figure is measured twice (``--bytecode``): ``cached``, the bytecode caches written by an
unmeasured warm-up run and read (as an installed operator starts: pip compiles at install, an
image holds the caches), kept under a temporary ``PYTHONPYCACHEPREFIX`` so no tree is written;
and ``source``, ``PYTHONDONTWRITEBYTECODE=1`` with no prefix, as this machine's environment
runs: the installed packages' caches are read, but the toolkit's own modules (a checkout holding
no ``__pycache__``) are compiled from source at every start (about 0.2 s of CPU for an
operator's modules, ``builtins.compile`` in a profile). A tree holding ``__pycache__`` has its
caches read in this mode too.

``python -m benchmarks.regress --against REV --only startup`` runs it on REV and here as well
(both sides' working-tree figures, ``work.<mode>.<figure>.cpu_s``).

With ``--against REV``, REV is checked out into a temporary git worktree
(``benchmarks.regress.worktree``) and every sample runs there and here alternately (REV
first), each process with ``PYTHONPATH`` and the working directory set to its tree, so that a
drift of the machine's speed falls on both sides; ``ratio`` is here / REV of the medians. One
unmeasured warm-up run per tree, mode and figure comes first.

The boundary: this module starts processes and reads their resource usage; it imports no part
of the toolkit before the server starts, and the profile of where the time goes is
``python -X importtime`` (docs/benchmarks.md, "Issue 39: start-up").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

IMPORTS = "import reconciler, builders, objectmatcher"
OPERATOR_MODULE = "import examples.thanos.operator"
OPERATOR = "examples.thanos.operator:operator"
FIGURES = ("imports", "operator_module", "to_watching")
GOALS = {"imports": 0.25, "to_watching": 0.35}
"""Issue 39's bounds on the median CPU seconds."""

POLL = 0.001
"""How often the harness reads the server's watch count (s): the bound of the overshoot."""


_PEAK = """
for _line in open("/proc/self/status"):
    if _line.startswith("VmHWM:"):
        print(_line.split()[1])
"""
"""Appended to a program: its peak resident set (KiB) on stdout. ``ru_maxrss`` cannot say: a
child's counts the harness's resident set it was forked from."""


def _cpu(rusage: Any) -> float:
    return float(rusage.ru_utime + rusage.ru_stime)


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status")


MODES = ("cached", "source")
"""The bytecode modes (see the module docstring)."""


def _environment(tree: Path, cache: Path | None) -> dict[str, str]:
    """The child's environment: TREE first on the path; with CACHE, bytecode read and written
    under it; without, none written and the tree's sources compiled (no prefix)."""
    environment = dict(os.environ, PYTHONPATH=str(tree), OPTK_RESYNC_INTERVAL="600s")
    environment.pop("PYTHONPYCACHEPREFIX", None)
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    if cache is None:
        environment["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        environment["PYTHONPYCACHEPREFIX"] = str(cache)
    return environment


def run_program(tree: Path, cache: Path | None, program: str) -> dict[str, float]:
    """``python -c PROGRAM`` in TREE (bytecode under CACHE, or none): its CPU seconds, peak
    RSS (MiB) and wall seconds."""
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-c", program + _PEAK], cwd=tree,
                               env=_environment(tree, cache), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE)
    _, status, rusage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    assert process.stdout is not None
    output = process.stdout.read().split()
    process.stdout.close()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0 or not output:
        raise RuntimeError(f"python -c {program!r} in {tree} exited {process.returncode}")
    return {"cpu_s": _cpu(rusage), "peak_rss_mib": int(output[-1]) / 1024, "wall_s": wall}


def run_to_watching(tree: Path, cache: Path | None, server: Any, kubeconfig: Path,
                    log: Path) -> dict[str, float]:
    """``optk run`` of the Thanos example in TREE (bytecode under CACHE, or none) until
    ``server`` starts its first watch stream; then SIGKILL. Its CPU seconds, peak RSS (MiB) and
    wall seconds to watching."""
    before = server.request_counts()["watch"]
    argv = [sys.executable, "-m", "reconciler", "run", OPERATOR, "--kubeconfig", str(kubeconfig)]
    with open(log, "ab") as output:
        started = time.monotonic()
        process = subprocess.Popen(argv, cwd=tree, env=_environment(tree, cache), stdout=output,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = started + 60
        while server.request_counts()["watch"] == before:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"optk run in {tree} did not watch (see {log})")
            time.sleep(POLL)
        wall = time.monotonic() - started
        peak = _peak_rss_mib(process.pid)
        process.send_signal(signal.SIGKILL)
        _, _, rusage = os.wait4(process.pid, 0)
        process.returncode = -signal.SIGKILL
    finally:
        if process.returncode is None:
            process.kill()
            process.wait()
    return {"cpu_s": _cpu(rusage), "peak_rss_mib": peak, "wall_s": wall}


def _summary(samples: Sequence[dict[str, float]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for key in samples[0]:
        values = [sample[key] for sample in samples]
        summary[key] = round(statistics.median(values), 4)
        if key == "cpu_s":
            summary["cpu_s_min"] = round(min(values), 4)
            summary["cpu_s_max"] = round(max(values), 4)
    summary["runs"] = len(samples)
    return summary


def _install(kubeconfig: Path, parents: int) -> None:
    from benchmarks._kube import Cluster
    from benchmarks._scenario import install_parents

    async def install() -> None:
        async with Cluster(kubeconfig) as cluster:
            await install_parents(cluster, parents)

    asyncio.run(install())


def run(*, runs: int, against: str | None = None, parents: int = 0,
        only: Sequence[str] = FIGURES, modes: Sequence[str] = MODES,
        progress: bool = True) -> dict[str, Any]:
    """Every figure (see the module docstring); JSON-ready: ``work`` (and ``base`` with
    AGAINST), each by mode then figure; ``ratio`` (work / base of the CPU medians) and
    ``goals`` likewise by mode."""
    load_before = [round(x, 2) for x in os.getloadavg()]
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="optk-startup-") as tmp:
        trees: dict[str, Path] = {"work": ROOT}
        if against is not None:
            from benchmarks.regress import worktree

            trees = {"base": stack.enter_context(worktree(ROOT, against)), "work": ROOT}
        caches = {(side, mode): (Path(tmp) / f"pyc-{side}" if mode == "cached" else None)
                  for side in trees for mode in modes}
        measures: dict[str, Callable[[Path, Path | None], dict[str, float]]] = {
            "imports": lambda tree, cache: run_program(tree, cache, IMPORTS),
            "operator_module": lambda tree, cache: run_program(tree, cache, OPERATOR_MODULE),
        }
        if "to_watching" in only:
            from reconciler.embedded import EmbeddedApiServer

            kubeconfig = Path(tmp) / "kubeconfig"
            server = stack.enter_context(EmbeddedApiServer(kubeconfig_path=kubeconfig))
            _install(kubeconfig, parents)
            log = Path(tmp) / "operator.log"
            measures["to_watching"] = lambda tree, cache: run_to_watching(
                tree, cache, server, kubeconfig, log)
        samples: dict[str, dict[str, dict[str, list[dict[str, float]]]]] = {
            side: {mode: {name: [] for name in only} for mode in modes} for side in trees}
        for mode in modes:
            for name in only:
                for side, tree in trees.items():  # warm-up: not measured
                    measures[name](tree, caches[side, mode])
                for index in range(runs):
                    for side, tree in trees.items():
                        samples[side][mode][name].append(measures[name](tree, caches[side, mode]))
                    if progress:
                        print(f"[{mode} {name}] {index + 1}/{runs}", file=sys.stderr, flush=True)
    figures: dict[str, Any] = {
        side: {mode: {name: _summary(values) for name, values in by_name.items()}
               for mode, by_name in by_mode.items()}
        for side, by_mode in samples.items()}
    if "base" in figures:
        figures["ratio"] = {
            mode: {name: round(figures["work"][mode][name]["cpu_s"]
                               / figures["base"][mode][name]["cpu_s"], 3) for name in only}
            for mode in modes}
    figures["goals"] = {
        mode: {name: {"bound_cpu_s": bound, "cpu_s": figures["work"][mode][name]["cpu_s"],
                      "met": figures["work"][mode][name]["cpu_s"] <= bound}
               for name, bound in GOALS.items() if name in only}
        for mode in modes}
    figures.update(against=against, parents=parents, python=platform.python_version(),
                   cpus=os.cpu_count(), loadavg=load_before,
                   loadavg_after=[round(x, 2) for x in os.getloadavg()])
    return figures


def report(figures: dict[str, Any]) -> str:
    """The figures as text: one line per figure, mode and side."""
    lines = [f"start-up, load {figures['loadavg'][0]}-{figures['loadavg_after'][0]}, "
             f"{figures['cpus']} CPUs, Python {figures['python']}"]
    for mode, goals in figures["goals"].items():
        lines.append(f"bytecode {mode}:")
        for name in figures["work"][mode]:
            for side in ("base", "work"):
                if side not in figures:
                    continue
                summary = figures[side][mode][name]
                label = figures["against"] if side == "base" else "working tree"
                lines.append(
                    f"  {name:<16} {label:<14} CPU {summary['cpu_s']:.3f} s "
                    f"[{summary['cpu_s_min']:.3f}-{summary['cpu_s_max']:.3f}], "
                    f"wall {summary['wall_s']:.3f} s, peak RSS "
                    f"{summary['peak_rss_mib']:.1f} MiB ({summary['runs']} runs)")
            if "ratio" in figures:
                lines.append(f"  {name:<16} ratio {figures['ratio'][mode][name]:.2f}x")
        for name, goal in goals.items():
            verdict = ("met" if goal["met"] else
                       f"missed by {goal['cpu_s'] - goal['bound_cpu_s']:.3f} s")
            lines.append(f"  goal {name}: <= {goal['bound_cpu_s']} s CPU: {verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print (the JSON line last with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=9, help="processes per figure (at least 7)")
    parser.add_argument("--against", default=None, help="a commit to compare, alternating")
    parser.add_argument("--parents", type=int, default=0, help="Thanos parents before the run")
    parser.add_argument("--only", nargs="+", default=list(FIGURES), choices=FIGURES)
    parser.add_argument("--bytecode", nargs="+", default=list(MODES), choices=MODES,
                        help="cached: bytecode caches read; source: the toolkit compiled")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args(argv)
    if args.runs < 7:
        parser.error("--runs must be at least 7 (a median of fewer moves with the machine's load)")
    figures = run(runs=args.runs, against=args.against, parents=args.parents, only=args.only,
                  modes=args.bytecode)
    print(report(figures))
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
