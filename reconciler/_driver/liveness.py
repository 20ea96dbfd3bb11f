"""Liveness: what ``/healthz`` answers, so that a kubelet restart is asked for only when it helps.

A restart cures a process that is stuck, not a cluster that is away: ``ProgressWatch.failing``
says why the process is stuck ("" while it is live), from two cheap looks (counters and thread
states, no request):

- an informer made no progress for longer than ``bound`` seconds: no list succeeded, no event
  and no bookmark (a new ``resourceVersion``) arrived, and no watch ended normally (a quiet
  type's watch ends after its timeout and starts again: that is progress, and is why the bound
  must be well above the watch timeout). A watch that hangs on a connection that relays nothing
  stays silent; one that fails counts as a failure, not as progress. A type whose lists are
  refused (403, say) is left out: a restart would not grant the rule (``/readyz`` says
  ``degraded``);
- a loop thread of the runtime (a worker, the resync timer, the heartbeat, the elector) ended
  while the runtime was not stopping.

A slow API server answers, however late, and so makes progress; one that is away for longer than
the bound (15 minutes by default) leaves the informers failing: a restart then costs nothing
the outage has not cost already.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Protocol

import attrs

from reconciler._base.clocks import Clock
from reconciler._cache.informers import InformerStats

__all__ = ["DEFAULT_WATCH_TIMEOUT", "ProgressWatch", "Progressing", "liveness_bound"]

DEFAULT_WATCH_TIMEOUT = 300
"""The informers' server-side watch timeout (seconds) unless the runtime is given another."""


def liveness_bound(watch_timeout: float, bound: float | None = None) -> float:
    """The bound (seconds) for informers at ``watch_timeout``: three watch timeouts unless
    given; a ``ValueError`` for one not above twice the watch timeout (a quiet type's
    informer shows progress only once per watch timeout)."""
    chosen = 3.0 * watch_timeout if bound is None else float(bound)
    if chosen <= 2.0 * watch_timeout:
        raise ValueError(f"the liveness bound ({chosen:g}s) must be above twice the watch "
                         f"timeout ({watch_timeout:g}s)")
    return chosen


class Progressing(Protocol):
    """What ``ProgressWatch`` reads of an informer (``reconciler._cache.informers.Informer``)."""

    @property
    def kind(self) -> str: ...

    @property
    def stats(self) -> InformerStats: ...

    @property
    def resource_version(self) -> str: ...

    @property
    def list_refused(self) -> Exception | None: ...


@attrs.define
class _Seen:
    """What an informer showed when it last made progress, and when."""

    at: float
    marks: tuple[int, int, str]
    ended: int


def _look(informer: Progressing) -> tuple[tuple[int, int, str], int]:
    """(lists, events, resourceVersion) and the watches that ended normally so far, or one
    more while a watch runs: watches started less failed ones (reconnects, 410s). Read
    ``watches`` first: a failure and the next start between the reads then lower the count,
    never raise it."""
    stats = informer.stats
    started = stats.watches
    ended = started - stats.reconnects - stats.relists_after_gone
    return (stats.lists, stats.events, informer.resource_version), ended


class ProgressWatch:
    """The ``/healthz`` check of a runtime (a ``reconciler._base.metrics.Liveness``).

    ``informers()`` are the running informers, ``loops()`` the threads that must live until
    ``stopping()``; ``bound`` in seconds of ``clock``."""

    def __init__(self, *, informers: Callable[[], Iterable[Progressing]],
                 loops: Callable[[], Iterable[threading.Thread]], stopping: Callable[[], bool],
                 bound: float, clock: Clock) -> None:
        self._informers = informers
        self._loops = loops
        self._stopping = stopping
        self.bound = bound
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[int, tuple[Progressing, _Seen]] = {}

    def failing(self) -> str:
        """Why the process should be restarted; "" while it is live."""
        if self._stopping():
            return ""
        dead = sorted(thread.name for thread in self._loops() if not thread.is_alive())
        if dead and not self._stopping():
            return f"thread {', '.join(dead)} ended"
        now = self._clock.monotonic()
        stalled: list[str] = []
        with self._lock:
            seen: dict[int, tuple[Progressing, _Seen]] = {}
            for informer in self._informers():
                marks, ended = _look(informer)
                known = self._seen.get(id(informer))
                if known is None or known[0] is not informer:
                    last = _Seen(at=now, marks=marks, ended=ended)
                else:
                    last = known[1]
                    if marks != last.marks or ended > last.ended:
                        last = _Seen(at=now, marks=marks, ended=max(ended, last.ended))
                seen[id(informer)] = (informer, last)
                if now - last.at > self.bound and informer.list_refused is None:
                    stalled.append(f"{informer.kind} ({now - last.at:.0f}s)")
            self._seen = seen
        if stalled:
            return (f"no progress of the informers of {', '.join(sorted(stalled))} for longer "
                    f"than {self.bound:g}s")
        return ""
