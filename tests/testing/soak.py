"""The machines' soak (``make soak``): the examples' operator state machines
(tests/testing/test_example_machines.py) run with fresh seeds, round after round, for
``OPTK_MACHINE_SOAK_SECONDS`` (default 1800) or ``--seconds``; then a report: each machine's
rounds, actions run (per rule), quiet points checked, and failures (the shrunk script and the
failed check's message). The report goes to ``--report`` (default
``.soak/machines.json``) and its summary to stdout; the exit code is 1 when a machine failed.
``--only NAME`` (repeatable) runs only those machines.

Not part of ``make test``: CI runs the same machines with fixed seeds and a few examples."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.testing.test_example_machines import MACHINES

SOAK = settings(max_examples=5, stateful_step_count=15, deadline=None, derandomize=False,
                phases=tuple(p for p in Phase if p is not Phase.explain),
                report_multiple_bugs=False, database=None)


def soak(seconds: float, only: list[str] | None = None,
         progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Round-robin over the machines (``only`` these names) until ``seconds`` pass (a round
    started runs to its end); the report, also given to ``progress`` after every round. A
    failure is any exception a round raises (a failed check, or an error of the machine or
    the operator), with Hypothesis' shrunk steps."""
    report: dict[str, Any] = {"seconds": seconds, "machines": {}}
    classes = {name: make() for name, make in MACHINES.items() if not only or name in only}
    for name in classes:
        report["machines"][name] = {"rounds": 0, "failures": []}
    deadline = time.monotonic() + seconds
    started = time.monotonic()
    while time.monotonic() < deadline:
        for name, machine in classes.items():
            if time.monotonic() >= deadline:
                break
            entry = report["machines"][name]
            entry["rounds"] += 1
            try:
                run_state_machine_as_test(machine, settings=SOAK)
            except Exception as failure:  # any error a machine meets is a failure
                entry["failures"].append(_described(failure))
            _counted(report, classes, started)
            if progress is not None:
                progress(report)  # written after every round: a crash loses nothing
    return report


def _described(failure: BaseException) -> str:
    """A failure with Hypothesis' shrunk steps (its notes) and, for a group (a
    ``FlakyFailure``: the first run failed, the replay did not), each failure inside it: the
    check that failed the first time is what a reader needs."""
    notes = "\n".join(getattr(failure, "__notes__", ()))
    text = f"{type(failure).__name__}: {failure}\n{notes}"
    for inner in getattr(failure, "exceptions", ()):
        text += f"\n--- within it: {_described(inner)}"
    return text


def _counted(report: dict[str, Any], classes: dict[str, Any], started: float) -> None:
    for name, machine in classes.items():
        stats = dict(machine.stats)
        report["machines"][name]["checks"] = stats.pop("checks", 0)
        report["machines"][name]["actions"] = stats
    report["elapsed"] = round(time.monotonic() - started, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float,
                        default=float(os.environ.get("OPTK_MACHINE_SOAK_SECONDS", "1800")))
    parser.add_argument("--report", type=Path, default=Path(".soak/machines.json"))
    parser.add_argument("--only", action="append", choices=sorted(MACHINES),
                        help="run only this machine (repeatable)")
    args = parser.parse_args(argv)
    args.report.parent.mkdir(parents=True, exist_ok=True)

    def write(report: dict[str, Any]) -> None:
        args.report.write_text(json.dumps(report, indent=2) + "\n")

    report = soak(args.seconds, args.only, progress=write)
    write(report)
    failed = 0
    for name, entry in report["machines"].items():
        actions = sum(entry["actions"].values())
        print(f"{name}: {entry['rounds']} rounds, {actions} actions, {entry['checks']} quiet "
              f"points checked, {len(entry['failures'])} failures")
        failed += len(entry["failures"])
    print(f"report: {args.report}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
