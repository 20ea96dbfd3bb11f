"""The shared counter file of the reliability suite: what each phase tried and what it found.

Every phase (pytest test or soak step) adds to one JSON file: faults injected by kind, crashes
survived, failovers, bad inputs tried, objects lost or duplicated, overlapping writers, plus
measured figures (seconds, MiB). ``tests.reliability.report`` prints it. The file is
``tests/reliability/counts.json`` unless ``OPTK_RELIABILITY_COUNTS`` names another; writers take
an ``fcntl`` lock so that processes (the soak, a test and its subprocesses) can add at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["COUNTS_FILE", "add", "figure", "load", "reset"]

COUNTS_FILE = Path(
    os.environ.get("OPTK_RELIABILITY_COUNTS") or Path(__file__).with_name("counts.json")
)
"""Where the counts live (``OPTK_RELIABILITY_COUNTS`` overrides)."""

_EMPTY: dict[str, Any] = {"counts": {}, "figures": {}, "phases": []}


@contextlib.contextmanager
def _locked() -> Iterator[dict[str, Any]]:
    COUNTS_FILE.parent.mkdir(parents=True, exist_ok=True)
    lock_path = COUNTS_FILE.with_name(COUNTS_FILE.name + ".lock")
    with open(lock_path, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = load()
        yield data
        tmp = COUNTS_FILE.with_name(COUNTS_FILE.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(COUNTS_FILE)


def load() -> dict[str, Any]:
    """The counts so far (empty sections when no run recorded anything)."""
    try:
        data = json.loads(COUNTS_FILE.read_text())
    except (FileNotFoundError, ValueError):
        return json.loads(json.dumps(_EMPTY))
    for key, value in _EMPTY.items():
        data.setdefault(key, type(value)())
    return dict(data)


def reset() -> None:
    """Start a new run: forget every count."""
    with _locked() as data:
        data.clear()
        data.update(json.loads(json.dumps(_EMPTY)))


def add(phase: str, counts: Mapping[str, int]) -> None:
    """Add ``counts`` (e.g. ``{"faults.http_500": 12}``) under the totals and note ``phase``."""
    with _locked() as data:
        totals = data["counts"]
        for key, value in counts.items():
            totals[key] = int(totals.get(key, 0)) + int(value)
        if phase not in data["phases"]:
            data["phases"].append(phase)


def figure(name: str, value: float) -> None:
    """Record a measured figure (the worst seen: the largest value is kept)."""
    with _locked() as data:
        figures = data["figures"]
        figures[name] = max(float(value), float(figures.get(name, value)))
