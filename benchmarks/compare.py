"""Ours against kopf: the Thanos example operator and the same operator written with kopf.

Run as ``python -m benchmarks.compare [--sizes 10,100,1000] [--repeats N] [--drifts N]
[--gates on|off] [--json] [--plot] [--out FILE]`` (kopf comes with the ``bench`` extra:
``pip install -e '.[bench]'``). ``--gates on`` (the default) runs the Thanos example as it is:
its query frontend waits for the query Deployment, so it reconciles each parent twice and flips
``Ready`` once more, which kopf's peer does not; ``--gates off`` runs it without that gate
(``benchmarks.gates``): the same work as kopf's peer.
For each size N (parents of ten children each) and each repeat, each operator runs in its own
process against a fresh ``optk apiserver`` in its own process, one at a time, the order alternating
between repeats; ``benchmarks._scenario`` has the phases. Figures per operator are medians over
the repeats, except the drift repair percentiles, taken over the samples of every repeat pooled
(``drift_samples`` says how many); ``ratio`` is ours / kopf for every number (below 1: ours is
cheaper or faster).
With ``--json`` the last line of stdout is one JSON object: ``figures`` (by size, then ``ours``,
``kopf``, ``ratio``), ``runs`` (every repeat), ``peers``, ``python``, ``cpu_count``, ``machine``.
``--plot`` draws each figure against N into ``docs/benchmarks/`` (see ``benchmarks.plot``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks import _fleet as fleet
from benchmarks._profile import summarize as summarize_profile
from benchmarks._scenario import (
    OURS,
    RESYNC_SECONDS,
    Options,
    drift_percentiles,
    run_paired,
    run_scenario,
)

PEERS = ("ours", "kopf")
UNGATED = "benchmarks.gates:ungated_operator"
"""Ours with ``--gates off``: the example without its gate, the same work as kopf's peer."""
HEADLINE = (
    ("converge_wall_s", "converge: wall time (s)"),
    ("converge_cpu_s", "converge: operator CPU (s)"),
    ("converge_cpu_ms_per_extra_parent", "converge: CPU per extra parent (ms)"),
    ("converge_requests_total", "converge: requests"),
    ("peak_rss_mib", "peak RSS (MiB)"),
    ("steady_requests", "steady state: requests"),
    ("steady_cpu_s", "steady state: CPU (s)"),
    ("resync_writes", "forced resync: writes"),
    ("resync_cpu_per_parent_ms", "forced resync: CPU per parent (ms)"),
    ("drift_p50_ms", "drift repair p50 (ms)"),
    ("drift_p95_ms", "drift repair p95 (ms)"),
    ("drift_p99_ms", "drift repair p99 (ms)"),
    ("drift_samples", "drift repair: samples"),
    ("spec_change_wall_s", "spec change: wall time (s)"),
    ("spec_change_requests", "spec change: requests"),
    ("spec_change_cpu_s", "spec change: CPU (s)"),
)
"""The figures of the table and the plots: key and label."""


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    memory = None
    try:
        with open("/proc/meminfo") as meminfo:
            memory = round(int(meminfo.readline().split()[1]) / 2**20, 1)
    except OSError:
        pass
    return {"platform": platform.platform(), "memory_gib": memory,
            "loadavg": [round(x, 2) for x in os.getloadavg()]}


def summarize(
    runs: list[dict[str, Any]], *, peers: tuple[str, ...] = PEERS, baseline: str = "kopf",
    ranges: bool = False,
) -> dict[str, Any]:
    """Medians per size and peer over the repeats, and the ratios ours / ``baseline``; with
    ``ranges`` also each figure's ``[min, max]`` over the repeats as ``<key>_range``."""
    figures: dict[str, Any] = {}
    for size in sorted({run["size"] for run in runs}):
        entry: dict[str, Any] = {}
        for peer in peers:
            mine = [run["figures"] for run in runs
                    if run["size"] == size and run["peer"] == peer and "figures" in run]
            if not mine:
                continue
            numbers = {
                key for figures_ in mine for key, value in figures_.items()
                if isinstance(value, int | float) and not isinstance(value, bool)
            }
            medians: dict[str, Any] = {}
            for key in sorted(numbers):
                values = [f[key] for f in mine if isinstance(f.get(key), int | float)]
                medians[key] = fleet.median(values)
                if ranges and len(values) > 1:
                    medians[f"{key}_range"] = [min(values), max(values)]
            medians["converge_requests"] = mine[0].get("converge_requests")
            pooled = [v for f in mine for v in f.get("drift_samples_ms") or ()]
            if pooled:  # percentiles over every repeat's samples, not a median of percentiles
                medians.update(drift_percentiles(pooled))
            entry[peer] = medians
        if "ours" in entry and baseline in entry:
            entry["ratio"] = {
                key: fleet.ratio(value, entry[baseline].get(key))
                for key, value in entry["ours"].items()
                if isinstance(value, int | float)
            }
        figures[str(size)] = entry
    _marginal(figures, peers=peers, baseline=baseline)
    return figures


def _marginal(figures: dict[str, Any], *, peers: tuple[str, ...], baseline: str) -> None:
    """Add ``converge_cpu_ms_per_extra_parent``: the convergence CPU slope from the smallest size
    (start-up and imports cancel out), per peer, and its ratio."""
    sizes = sorted(int(size) for size in figures)
    if len(sizes) < 2:
        return
    smallest = figures[str(sizes[0])]
    for size in sizes[1:]:
        entry = figures[str(size)]
        for peer in peers:
            low, high = smallest.get(peer), entry.get(peer)
            if low and high and low.get("converge_cpu_s") is not None:
                slope = (high["converge_cpu_s"] - low["converge_cpu_s"]) / (size - sizes[0])
                high["converge_cpu_ms_per_extra_parent"] = round(slope * 1000, 2)
        if "ratio" in entry and "ours" in entry and baseline in entry:
            entry["ratio"]["converge_cpu_ms_per_extra_parent"] = fleet.ratio(
                entry["ours"].get("converge_cpu_ms_per_extra_parent"),
                entry[baseline].get("converge_cpu_ms_per_extra_parent"),
            )


def table(figures: dict[str, Any]) -> str:
    """The headline figures as a Markdown table per size."""
    lines = []
    for size, entry in figures.items():
        lines += [f"\nN = {size} parents ({int(size) * 10} children)", "",
                  "| figure | ours | kopf | ours / kopf |", "| --- | ---: | ---: | ---: |"]
        for key, label in HEADLINE:
            ours = (entry.get("ours") or {}).get(key)
            kopf = (entry.get("kopf") or {}).get(key)
            ratio = (entry.get("ratio") or {}).get(key)
            lines.append(f"| {label} | {_fmt(ours)} | {_fmt(kopf)} | {_fmt(ratio)}x |"
                         if ratio is not None else f"| {label} | {_fmt(ours)} | {_fmt(kopf)} | - |")
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def profile(sizes: list[int], chosen: list[str], out: Path) -> int:
    """Profile each peer's convergence under py-spy; write one text summary per peer and size."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="optk-profile-") as scratch:
        for size in sizes:
            for peer in chosen:
                workdir = Path(scratch) / f"{peer}-{size}"
                workdir.mkdir()
                raw = workdir / "profile.raw"
                figures = run_scenario(peer, Options(
                    size=size, converge_only=True, profile=raw,
                    converge_timeout=60.0 + 0.3 * size,
                ), workdir)
                title = (f"py-spy record --rate 250 --nonblocking --gil: {peer}, cold start to "
                         f"convergence, N={size} parents ({size * 10} children); under the "
                         f"profiler: {figures['converge_wall_s']} s wall, "
                         f"{figures['converge_cpu_s']} s CPU; Python {platform.python_version()},"
                         f" {os.cpu_count()} CPUs")
                path = out / f"profile-{peer}-converge-n{size}.txt"
                path.write_text(summarize_profile(raw.read_text(), title=title))
                print(f"wrote {path}", file=sys.stderr)
    return 0


def _repeat(
    order: list[str], options: Options, workdir: Path, *, repeat: int, paired: bool
) -> list[dict[str, Any]]:
    """One repeat of every peer at one size: paired (``run_paired``) or one after the other."""
    size, started = options.size, time.monotonic()
    try:
        if paired:
            by_peer = run_paired(order, options, workdir)
        else:
            by_peer = {}
            for peer in order:
                (workdir / peer).mkdir()
                by_peer[peer] = run_scenario(peer, options, workdir / peer)
    except Exception as error:  # recorded in the JSON; the other runs go on
        print(f"N={size} repeat {repeat}: FAILED: {error}", file=sys.stderr, flush=True)
        failed = f"{type(error).__name__}: {error}"[:2000]
        return [{"peer": peer, "size": size, "repeat": repeat, "error": failed}
                for peer in order]
    seconds = round(time.monotonic() - started, 1)
    for peer, figures in by_peer.items():
        print(f"{peer} N={size} repeat {repeat}: converged in {figures['converge_wall_s']} s",
              file=sys.stderr, flush=True)
    print(f"N={size} repeat {repeat}: {seconds} s", file=sys.stderr, flush=True)
    return [{"peer": peer, "size": size, "repeat": repeat, "run_s": seconds,
             "paired": paired, "figures": by_peer[peer]} for peer in order]


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare", description=__doc__)
    parser.add_argument("--sizes", default="10,100,1000",
                        help="parent counts (default 10,100,1000; the embedded server's /16 "
                             "service range holds about 32,000 parents of this shape)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per operator and size")
    parser.add_argument("--peers", default=",".join(PEERS), help="ours,kopf (default both)")
    parser.add_argument("--steady-seconds", type=float, default=10.0)
    parser.add_argument("--drifts", type=int, default=200,
                        help="drifts per run (default 200, bounded: 1000); percentiles pool "
                             "the samples of every repeat")
    parser.add_argument("--sequential", action="store_true",
                        help="run the operators one after the other, drifts included (default: "
                             "the second starts while the first idles, and the drifts take "
                             "turns between them, so both sample the same background load)")
    parser.add_argument("--gates", choices=("on", "off"), default="on",
                        help="on: the Thanos example as it is (its query frontend waits for the "
                             "query Deployment); off: the same without that gate, the work of "
                             "kopf's peer (benchmarks.gates:ungated_operator)")
    parser.add_argument("--json", action="store_true", help="one JSON object on the last line")
    parser.add_argument("--out", default=None, help="also write the JSON to this file")
    parser.add_argument("--plot", action="store_true", help="draw PNGs into docs/benchmarks/")
    parser.add_argument("--profile", default=None, metavar="DIR",
                        help="instead: profile each peer's convergence with py-spy and write "
                             "profile-<peer>-converge-n<N>.txt summaries into DIR")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    chosen = [p for p in args.peers.split(",") if p]
    if any(p not in PEERS for p in chosen) or not sizes or min(sizes) < 1:
        parser.error(f"--peers takes {', '.join(PEERS)}; --sizes positive integers")
    if "kopf" in chosen and _version("kopf") == "not installed":
        parser.error("kopf is not installed: pip install -e '.[bench]'")
    if args.profile:
        return profile(sizes, chosen, Path(args.profile))
    runs: list[dict[str, Any]] = []
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="optk-compare-") as scratch:
        for size in sizes:
            for repeat in range(max(1, args.repeats)):
                order = chosen if repeat % 2 == 0 else list(reversed(chosen))
                options = Options(size=size, steady_seconds=args.steady_seconds,
                                  drifts=min(max(0, args.drifts), 1000),
                                  converge_timeout=60.0 + 0.3 * size,
                                  ours=OURS if args.gates == "on" else UNGATED)
                workdir = Path(scratch) / f"{size}-{repeat}"
                workdir.mkdir()
                runs += _repeat(order, options, workdir, repeat=repeat,
                                paired=not args.sequential)
                if args.out:  # partial results survive an interrupted run
                    Path(args.out).write_text(json.dumps({"runs": runs}, indent=1) + "\n")
    figures = summarize(runs)
    result = {
        "benchmark": "compare",
        "sizes": sizes, "repeats": max(1, args.repeats),
        "drifts_per_run": min(max(0, args.drifts), 1000), "paired": not args.sequential,
        "gates": args.gates,
        "elapsed_s": round(time.monotonic() - began, 1),
        "children_per_parent": 10,
        "figures": figures,
        "runs": runs,
        "peers": {
            "ours": {"name": "operator-toolkit", "version": _version("operator-toolkit"),
                     "operator": "examples.thanos.operator:operator (optk run)",
                     "resync_interval_s": RESYNC_SECONDS},
            "kopf": {"name": "kopf", "version": _version("kopf"),
                     "client": f"kubernetes {_version('kubernetes')}",
                     "operator": "benchmarks.peers.kopf_thanos.handlers (kopf run --standalone -A)",
                     "resync_interval_s": RESYNC_SECONDS},
        },
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "machine": machine(),
    }
    print(table(figures))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    if args.plot:
        from benchmarks.plot import plot

        for path in plot(result):
            print(f"wrote {path}", file=sys.stderr)
    if args.json:
        print(json.dumps(result, separators=(",", ":")))
    return 1 if any("error" in run for run in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
