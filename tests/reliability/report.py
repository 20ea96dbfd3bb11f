"""``python -m tests.reliability.report [--json | --markdown]``: what the last run tried and found.

Reads the counter file of ``_counts`` (written by ``make test``'s reliability tests, and by
``make soak``) and prints the summary the issue asks for: faults injected by kind, crashes
survived, failovers, bad inputs tried, objects lost or duplicated, overlapping writers, writes of
a suspended leader after the standby held the lease, plus the measured figures. ``--json``
prints one JSON object on the last line; ``--markdown`` prints the table of
``docs/reliability.md``; without either, aligned text.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from tests.reliability import _counts

__all__ = ["main", "summary"]


def _sum(counts: Mapping[str, int], prefix: str) -> int:
    return sum(v for k, v in counts.items() if k.startswith(prefix))


def summary(data: Mapping[str, Any]) -> dict[str, Any]:
    """The report's JSON object from the counter file's data."""
    counts: Mapping[str, int] = data.get("counts", {})
    faults = {k.split(".", 1)[1]: v for k, v in sorted(counts.items()) if k.startswith("faults.")}
    faults["state_machine"] = counts.get("state_machine.faults", 0)
    return {
        "faults_injected": faults,
        "faults_injected_total": sum(faults.values()),
        "crashes_survived": counts.get("crashes.survived", 0)
        + counts.get("state_machine.restarts", 0),
        "failovers": counts.get("failovers", 0),
        "bad_inputs_tried": counts.get("bad_inputs.tried", 0) + _sum(counts, "security."),
        "objects_lost": counts.get("objects.lost", 0),
        "objects_duplicated": counts.get("objects.duplicated", 0),
        "overlapping_writers": counts.get("writers.overlapping", 0),
        "secrets_leaked": counts.get("secrets.leaked", 0),
        "restart_reconciles": counts.get("restart.reconciles", 0),
        "suspended_leader_writes": counts.get("suspend.writes_after_takeover", 0),
        "counts": dict(sorted(counts.items())),
        "figures": dict(sorted(data.get("figures", {}).items())),
        "phases": list(data.get("phases", [])),
    }


def markdown(report: Mapping[str, Any]) -> str:
    """The two tables (counts, figures) as Markdown."""
    lines = ["| what | count |", "| --- | ---: |"]
    for kind, count in report["faults_injected"].items():
        lines.append(f"| faults injected: {kind} | {count} |")
    for key in ("crashes_survived", "failovers", "bad_inputs_tried", "objects_lost",
                "objects_duplicated", "overlapping_writers", "secrets_leaked",
                "restart_reconciles", "suspended_leader_writes"):
        lines.append(f"| {key.replace('_', ' ')} | {report[key]} |")
    lines += ["", "| figure | value |", "| --- | ---: |"]
    lines += [f"| {name} | {value:g} |" for name, value in report["figures"].items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the report; exit 1 when the counter file holds nothing."""
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.report")
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="one JSON object (last line)")
    form.add_argument("--markdown", action="store_true", help="the docs/reliability.md tables")
    args = parser.parse_args(argv)
    data = _counts.load()
    report = summary(data)
    if args.json:
        print(json.dumps(report, sort_keys=True))
    elif args.markdown:
        print(markdown(report))
    else:
        width = max(len(k) for k in report["counts"]) if report["counts"] else 10
        print(f"reliability counts ({_counts.COUNTS_FILE}):")
        for key, value in report["counts"].items():
            print(f"  {key:<{width}}  {value}")
        for key, value in report["figures"].items():
            print(f"  {key:<{width}}  {value:g}")
    if not data.get("phases"):
        print("no reliability run recorded yet: run make test or make soak", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
