"""Benchmark regressions in one command: the chosen benchmarks on an older commit and on the
working tree, alternating, with the ratio of each figure and its spread.

Why it exists: a 10x drift-repair regression (p99 11-16 ms to 140-151 ms at 1,000 parents)
passed every test, because tests bound behaviour, not speed. Before merging driver work, run

    python -m benchmarks.regress --against v-last-release --only driver

REV is checked out into a temporary git worktree (removed afterwards) and each benchmark runs
there and here as its own process with the same interpreter, ``PYTHONPATH`` set to the tree
under test so that tree's ``builders``, ``objectmatcher``, ``reconciler`` and ``benchmarks`` are
the ones imported (the editable install's finder comes after the path). Runs alternate, REV
first: A B A B ..., at least three rounds, so a drift of the machine's speed falls on both
sides. Every numeric leaf of each benchmark's JSON line is a figure (``drift_repair_ms.watch.p99``);
per figure: the median on each side, the ratio of the medians (working tree / REV), and the
smallest and largest ratio of the rounds' pairs (the spread). A ratio outside 0.8-1.25 whose
every pair lies on the same side of 1 is flagged ``changed``; whether higher is worse depends on
the figure (milliseconds, CPU seconds, requests and bytes: higher is worse).

The boundary: this module only runs processes and does arithmetic on their JSON; what is
measured, and how, stays in each benchmark's own module. A benchmark missing at REV is reported
as such, not compared.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

BENCHMARKS: dict[str, tuple[str, ...]] = {
    # name: the arguments of `python -m benchmarks.<name>` (``--json`` is added)
    "driver": ("--sizes", "1000", "--samples", "100"),
    "reconcile": ("--sizes", "100,1000"),
    "objectmatcher": (),
    "readiness": ("--changes", "100"),
    "inputs": ("--parents", "100", "--changes", "20"),
    "apiserver": ("--seconds", "2"),
    "startup": ("--runs", "7"),
    "gates": ("--parents", "100", "--rounds", "1"),
}
"""The arguments a benchmark runs with by default: sizes that show a regression (1,000 parents
for the driver) in a few minutes a run. ``--args NAME=...`` replaces them; a module not named
here runs with ``--json`` alone."""

DEFAULT = ("driver",)
"""What runs without ``--only``: the driver benchmark, whose drift repair regressed unseen."""

LOW, HIGH = 0.8, 1.25
"""A ratio outside this band, with every pair on the same side of 1, is flagged ``changed``."""


def flatten(value: Any, prefix: str = "") -> dict[str, float]:
    """Every numeric leaf of a JSON value by its dotted path (booleans, strings and the
    ``python``/``cpus`` fields are not figures)."""
    figures: dict[str, float] = {}
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not prefix and key in ("python", "cpus"):
                continue
            figures.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            figures.update(flatten(item, f"{prefix}.{index}" if prefix else str(index)))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        figures[prefix] = float(value)
    return figures


def compare(base: Sequence[Mapping[str, float]],
            work: Sequence[Mapping[str, float]]) -> dict[str, dict[str, Any]]:
    """Per figure present on both sides: the medians, the ratio of the medians (work / base),
    the smallest and largest ratio of the rounds' pairs, and the verdict (``changed`` when the
    ratio is outside ``LOW``-``HIGH`` and every pair agrees on the side of 1, else ``same``).
    A figure that is 0 on the base side has no ratio (``None``)."""
    names = sorted(set().union(*base) & set().union(*work)) if base and work else []
    result: dict[str, dict[str, Any]] = {}
    for name in names:
        a = [round_[name] for round_ in base if name in round_]
        b = [round_[name] for round_ in work if name in round_]
        median_a, median_b = statistics.median(a), statistics.median(b)
        pairs = [y / x for x, y in zip(a, b, strict=False) if x]
        ratio = median_b / median_a if median_a else None
        verdict = "same"
        outside = ratio is not None and (ratio < LOW or ratio > HIGH)
        agreed = bool(pairs) and (all(p > 1 for p in pairs) or all(p < 1 for p in pairs))
        if outside and agreed:
            verdict = "changed"
        result[name] = {
            "base": median_a, "work": median_b, "ratio": ratio,
            "ratio_min": min(pairs) if pairs else None,
            "ratio_max": max(pairs) if pairs else None,
            "rounds": min(len(a), len(b)), "verdict": verdict,
        }
    return result


@contextmanager
def worktree(root: Path, rev: str) -> Iterator[Path]:
    """REV of the repository at ROOT checked out (detached) into a temporary git worktree,
    removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="optk-regress-"))
    target = folder / "tree"
    subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", "--quiet",
                    str(target), rev], check=True)
    try:
        yield target
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(target)],
                       check=False)
        shutil.rmtree(folder, ignore_errors=True)


def run_once(tree: Path, name: str, args: Sequence[str], *, timeout: float) -> dict[str, Any]:
    """``python -m benchmarks.NAME ARGS --json`` in TREE; its last stdout line as JSON. Raises
    ``RuntimeError`` with the tail of its output when it fails or prints no JSON."""
    environ = dict(os.environ, PYTHONPATH=str(tree))
    command = [sys.executable, "-m", f"benchmarks.{name}", *args, "--json"]
    done = subprocess.run(command, cwd=tree, env=environ, capture_output=True, text=True,
                          timeout=timeout, check=False)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode == 0 and lines:
        try:
            parsed = json.loads(lines[-1])
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    tail = (done.stderr or done.stdout)[-2000:]
    raise RuntimeError(f"benchmarks.{name} in {tree} exited {done.returncode}: {tail}")


def run(rev: str, names: Sequence[str], *, rounds: int, arguments: Mapping[str, Sequence[str]],
        timeout: float, root: Path = ROOT, progress: bool = True) -> dict[str, Any]:
    """Each benchmark of NAMES on REV and on the working tree at ROOT, alternating, ROUNDS
    times, REV first."""
    resolved = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--verify", f"{rev}^{{commit}}"],
        capture_output=True, text=True, check=True).stdout.strip()
    report: dict[str, Any] = {
        "against": rev, "against_commit": resolved, "rounds": rounds,
        "python": platform.python_version(), "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()), "benchmarks": {},
    }
    with worktree(root, resolved) as base_tree:
        for name in names:
            args = list(arguments.get(name, BENCHMARKS.get(name, ())))
            entry: dict[str, Any] = {"args": args}
            if not (base_tree / "benchmarks" / f"{name}.py").exists():
                entry["error"] = f"benchmarks/{name}.py does not exist at {rev}"
                report["benchmarks"][name] = entry
                continue
            base: list[dict[str, float]] = []
            work: list[dict[str, float]] = []
            started = time.monotonic()
            try:
                for index in range(rounds):
                    for side, tree, into in (("base", base_tree, base), ("work", root, work)):
                        if progress:
                            print(f"[{name}] round {index + 1}/{rounds}: {side}",
                                  file=sys.stderr, flush=True)
                        into.append(flatten(run_once(tree, name, args, timeout=timeout)))
            except (RuntimeError, subprocess.TimeoutExpired) as error:
                entry["error"] = str(error)
            entry["seconds"] = round(time.monotonic() - started, 1)
            entry["figures"] = compare(base, work)
            report["benchmarks"][name] = entry
    report["load_average_after"] = list(os.getloadavg())
    return report


def table(report: Mapping[str, Any], *, everything: bool = False) -> str:
    """The report as text: per benchmark, the figures flagged ``changed`` (all with
    EVERYTHING), medians, ratio and spread."""
    lines = [f"against {report['against']} ({report['against_commit'][:12]}), "
             f"{report['rounds']} rounds, load {report['load_average'][0]:.1f}"]
    for name, entry in report["benchmarks"].items():
        lines.append(f"\n{name} {shlex.join(entry['args'])}")
        if "error" in entry:
            lines.append(f"  error: {entry['error']}")
        figures = entry.get("figures", {})
        shown = [(k, v) for k, v in figures.items() if everything or v["verdict"] == "changed"]
        if not shown:
            lines.append(f"  no figure changed ({len(figures)} compared)")
        for key, value in shown:
            ratio = "-" if value["ratio"] is None else f"{value['ratio']:.2f}x"
            spread = ("" if value["ratio_min"] is None else
                      f" [{value['ratio_min']:.2f}-{value['ratio_max']:.2f}]")
            lines.append(f"  {key:<55} {value['base']:>12.4g} -> {value['work']:>12.4g}  "
                         f"{ratio}{spread}  {value['verdict']}")
    return "\n".join(lines)


def parse_arguments(values: Sequence[str]) -> dict[str, list[str]]:
    """``NAME=ARGS`` pairs (ARGS split as a shell would) into a mapping."""
    parsed: dict[str, list[str]] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name:
            raise SystemExit(f"--args takes NAME=ARGS (a benchmark's module name): {value!r}")
        parsed[name] = shlex.split(rest)
    return parsed


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print the table (and the JSON line with ``--json``). Exit 0 when
    nothing changed, 1 when some figure changed, 2 when a benchmark failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--against", required=True, help="the commit (or tag, branch) to compare")
    parser.add_argument("--only", nargs="+", default=list(DEFAULT), metavar="NAME",
                        help=f"benchmark modules to run (with default arguments: "
                             f"{', '.join(BENCHMARKS)}; any other runs with none but --json); "
                             f"default {', '.join(DEFAULT)}")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (at least 3)")
    parser.add_argument("--args", action="append", default=[], metavar="NAME=ARGS",
                        help="arguments for one benchmark instead of its defaults")
    parser.add_argument("--timeout", type=float, default=1800.0, help="bound of one run (s)")
    parser.add_argument("--all-figures", action="store_true", help="list unchanged figures too")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    if args.rounds < 3:
        parser.error("--rounds must be at least 3 (the spread needs pairs to mean anything)")
    missing = [name for name in args.only if not (ROOT / "benchmarks" / f"{name}.py").exists()]
    if missing:
        parser.error(f"no such benchmark module in benchmarks/: {', '.join(missing)}")
    report = run(args.against, args.only, rounds=args.rounds,
                 arguments=parse_arguments(args.args), timeout=args.timeout)
    print(table(report, everything=args.all_figures))
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    if args.json:
        print(json.dumps(report))
    entries = report["benchmarks"].values()
    if any("error" in entry for entry in entries):
        return 2
    changed = any(v["verdict"] == "changed" for e in entries for v in e.get("figures", {}).values())
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
