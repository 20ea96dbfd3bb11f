"""Plots of ``benchmarks.compare`` results (each headline figure against N, ours and kopf) and,
with a ``Chart`` of its own, of ``benchmarks.vs_go`` (ours and Go).

Run as ``python -m benchmarks.plot RESULTS.json [--out DIR]`` on the JSON that
``python -m benchmarks.compare --out RESULTS.json`` (or ``--json``, its last line) wrote, or
through ``python -m benchmarks.compare --plot``. Writes one PNG per figure
(``compare-<key>.png``) into ``docs/benchmarks/`` by default, with matplotlib's Agg backend (no
display needed); matplotlib comes with the ``bench`` extra.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from benchmarks.compare import HEADLINE, PEERS

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"
PLOTTED = (
    "converge_wall_s", "converge_cpu_s", "converge_requests_total", "peak_rss_mib",
    "steady_requests", "resync_cpu_per_parent_ms", "drift_p50_ms", "drift_p95_ms",
    "drift_p99_ms",
    "spec_change_wall_s", "spec_change_requests", "spec_change_cpu_s",
)
"""The figures drawn (the others are in the table and the JSON)."""
GOALS = (
    ("converge_cpu_s", "converge CPU", 0.33),
    ("converge_wall_s", "converge wall", 0.5),
    ("drift_p99_ms", "drift repair p99", 0.5),
)
"""The ratios of ``compare-ratios.png``: key, label and issue 14's goal (ours / kopf at most)."""


@attrs.frozen(kw_only=True)
class Chart:
    """What one benchmark's plots show: its peers, figures, goals, file prefix and axis."""

    peers: Sequence[str] = PEERS
    labels: Mapping[str, str] = attrs.field(factory=lambda: dict(HEADLINE))
    plotted: Sequence[str] = PLOTTED
    goals: Sequence[tuple[str, str, float]] = GOALS
    prefix: str = "compare"
    x_label: str = "parents N (10 children each)"
    versus: str = "kopf"


def plot(result: Mapping[str, Any], *, out: Path = DEFAULT_OUT,
         chart: Chart | None = None) -> list[Path]:
    """Draw every figure of ``chart.plotted`` (``PLOTTED`` of ``benchmarks.compare`` by
    default) against N; returns the files written."""
    chart = chart or Chart()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = chart.labels
    figures = result["figures"]
    sizes = sorted(int(size) for size in figures)
    load = (result.get("machine") or {}).get("loadavg")
    machine = f"Python {result.get('python')}, {result.get('cpu_count')} CPUs" + (
        f", load {load[0]} at the end" if load else "")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for key in chart.plotted:
        fig, ax = plt.subplots(figsize=(5.5, 3.6), dpi=100)
        every: list[float] = []  # the y axis is linear from 0: ratios read off at a glance
        for peer, marker in zip(chart.peers, ("o", "s"), strict=True):
            points = [(n, (figures[str(n)].get(peer) or {}).get(key)) for n in sizes]
            xs = [n for n, v in points if v is not None]
            ys = [v for _, v in points if v is not None]
            every += ys
            if xs:
                ax.plot(xs, ys, marker=marker, label=peer)
        ax.set_xscale("log")
        ax.set_ylim(bottom=0, top=max(every, default=0) * 1.1 or 1)
        ax.set_xlabel(chart.x_label)
        ax.set_title(labels.get(key, key), fontsize=10)
        ax.set_xticks(sizes, [str(n) for n in sizes])
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.text(0.99, 0.01, machine, ha="right", va="bottom", fontsize=7, alpha=0.6)
        fig.tight_layout()
        path = out / f"{chart.prefix}-{key.replace('_', '-')}.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    written.append(_ratios(plt, figures, sizes, machine, out, chart))
    return written


def _ratios(plt: Any, figures: Mapping[str, Any], sizes: list[int], machine: str,
            out: Path, chart: Chart) -> Path:
    """``<prefix>-ratios.png``: ours / the peer for the goal figures, each with its goal line."""
    fig, ax = plt.subplots(figsize=(5.5, 3.6), dpi=100)
    top = 1.0
    for (key, label, goal), marker in zip(chart.goals, ("o", "s", "^", "D", "v"), strict=False):
        points = [(n, (figures[str(n)].get("ratio") or {}).get(key)) for n in sizes]
        xs = [n for n, v in points if v is not None]
        ys = [v for _, v in points if v is not None]
        if xs:
            line = ax.plot(xs, ys, marker=marker, label=f"{label} (goal {goal}x)")[0]
            ax.axhline(goal, color=line.get_color(), linestyle=":", alpha=0.7)
            top = max(top, *ys)
    ax.set_xscale("log")
    ax.set_ylim(bottom=0, top=top * 1.1)
    ax.set_xlabel(chart.x_label)
    ax.set_title(f"ours / {chart.versus} (below the dotted line: goal met)", fontsize=10)
    ax.set_xticks(sizes, [str(n) for n in sizes])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.text(0.99, 0.01, machine, ha="right", va="bottom", fontsize=7, alpha=0.6)
    fig.tight_layout()
    path = out / f"{chart.prefix}-ratios.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.plot", description=__doc__)
    parser.add_argument("results", help="JSON written by benchmarks.compare")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="directory for the PNGs")
    args = parser.parse_args(argv)
    text = Path(args.results).read_text()
    try:
        result = json.loads(text)
    except json.JSONDecodeError:  # the captured stdout of --json: the object is the last line
        result = json.loads(text.strip().splitlines()[-1])
    if result.get("benchmark") == "vs_go":
        from benchmarks.vs_go import vs_go_chart

        paths = plot(result, out=Path(args.out), chart=vs_go_chart())
    else:
        paths = plot(result, out=Path(args.out))
    for path in paths:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
