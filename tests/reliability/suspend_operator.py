"""The elected example operator on a machine whose ``CLOCK_MONOTONIC`` stops while it is stopped.

A system suspend stops every process and ``CLOCK_MONOTONIC`` with them; ``CLOCK_BOOTTIME`` counts
the time suspended. A test cannot suspend the machine, so this module makes a SIGSTOP of the
process look like one from inside it: ``time.monotonic()`` and
``time.clock_gettime(CLOCK_MONOTONIC)`` leave out every gap of more than ``GAP`` seconds between
two readings (no thread of a running operator goes that long without one: the ticker below reads
every 50 ms), while ``CLOCK_BOOTTIME`` and the wall clock run on. The kernel does exactly this
across a suspend. The operator is ``leader_operator``'s (public names only). Run it as
``python -m reconciler run tests.reliability.suspend_operator:operator``.
"""

from __future__ import annotations

import threading
import time

from tests.reliability.leader_operator import operator

__all__ = ["GAP", "operator"]

GAP = 2.0
"""Seconds without a reading that count as a suspend (a SIGSTOP) rather than a busy machine."""

_lock = threading.Lock()
_real_monotonic = time.monotonic
_real_gettime = time.clock_gettime
_state = {"last": _real_monotonic(), "frozen": 0.0}


def _frozen_monotonic() -> float:
    """The real reading less every gap longer than ``GAP`` (the time "suspended")."""
    with _lock:
        now = _real_monotonic()
        gap = now - _state["last"]
        if gap > GAP:
            _state["frozen"] += gap
        _state["last"] = now
        return now - _state["frozen"]


def _clock_gettime(clock_id: int) -> float:
    if clock_id == time.CLOCK_MONOTONIC:
        return _frozen_monotonic()
    return _real_gettime(clock_id)


def _tick() -> None:
    while True:
        _frozen_monotonic()
        time.sleep(0.05)


time.monotonic = _frozen_monotonic
time.clock_gettime = _clock_gettime
threading.Thread(target=_tick, name="suspend-clock", daemon=True).start()
