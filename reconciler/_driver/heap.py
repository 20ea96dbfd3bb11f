"""The garbage-collector policy of a process running one operator (``optk run``, ``Operator.run``).

CPython's cyclic collector scans, on each full (generation 2) collection, every container object
the process holds: the imported modules (the official client alone brings tens of thousands) and
every cached Kubernetes object. A full collection of a fresh operator's 50,000 objects takes about
10 ms, of an operator caching 100 parents of ten children 20-35 ms, and it runs on whichever
thread allocates at that moment: a watch event or a drift repair then waits for it (the tail of
``benchmarks.compare``'s drift repair latency was such collections).

``HeapSettler.poll`` freezes (``gc.freeze``) what is alive at two moments: once the runtime has
started (imports, configuration, the connection), and once the runtime first goes idle after its
workers started with its caches synced (the cold start reconciled). Later collections skip
frozen objects. Frozen objects are still freed by reference counting (cached objects are acyclic
JSON trees); only a reference cycle among frozen objects that becomes garbage later is never
collected, which is why it freezes at those two moments only, never periodically. Only the
process shell calls it (``reconciler._driver.process``, so every form of ``optk run`` and
``Operator.run``); a library user embedding ``Operator.start`` keeps its own collector policy.

Just before the second freeze it runs one three-way match of a changed object
(``warm_repair_path``): the first drift repair used to pay for what the matcher loads on
first use, the built-in kinds' schema definitions (about 0.13 s and 8 MiB) and ``dictdiffer``
(which imports ``numpy`` when it is installed: 15 MiB more), 0.15-0.25 s on the repair's path
after a cold start that only created children (issue 39's "first drift after a long idle
period"); now the idle process pays for it, and what it loaded is frozen with the rest.

Each freeze logs one DEBUG line on the ``optk.heap`` logger with ``gc.get_freeze_count()``, the
objects frozen so far: ``heap frozen at start: N objects frozen`` and ``heap frozen after the
cold start: N objects frozen`` (``optk run -v`` shows them; docs/driver.md documents them).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable
from typing import Protocol

__all__ = ["HeapSettler", "warm_repair_path"]

_log = logging.getLogger("optk.heap")


class _Runtime(Protocol):
    @property
    def leading(self) -> bool: ...

    @property
    def ready(self) -> bool: ...

    @property
    def idle(self) -> bool: ...


def warm_repair_path() -> None:
    """One three-way match of a changed ConfigMap: what a drift repair runs, so that what it
    loads on first use is loaded now (``objectmatcher``'s schema definitions of the built-in
    kinds, its diff's ``dictdiffer``)."""
    from objectmatcher import calculate_patch

    live = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "warm", "namespace": "warm"}, "data": {"key": "drifted"}}
    calculate_patch(live, {**live, "data": {"key": "built"}})


class HeapSettler:
    """Freezes the long-lived heap of an operator process at start and after its cold start.

    ``freeze`` is ``gc.freeze`` unless a caller (a test) injects another; ``warm`` runs just
    before the second freeze (:func:`warm_repair_path`).
    """

    def __init__(self, *, freeze: Callable[[], None] = gc.freeze,
                 warm: Callable[[], None] = warm_repair_path) -> None:
        self._freeze = freeze
        self._warm = warm
        self.frozen = 0
        """How many times it froze (0, 1 after ``started``, 2 after the cold start)."""

    def started(self) -> None:
        """The runtime started: freeze what the imports and the start left."""
        if self.frozen == 0:
            self._freeze()
            self.frozen = 1
            _log.debug("heap frozen at start: %d objects frozen", gc.get_freeze_count())

    def poll(self, runtime: _Runtime) -> bool:
        """Called periodically while the operator runs: freeze once the runtime leads, its caches
        synced, and nothing is queued or reconciling; whether it froze now."""
        if self.frozen >= 2 or not (runtime.leading and runtime.ready and runtime.idle):
            return False
        try:
            self._warm()
        except Exception:  # only a head start: the first repair loads what it needs itself
            _log.debug("warming the repair path failed", exc_info=True)
        self._freeze()
        self.frozen = 2
        _log.debug("heap frozen after the cold start: %d objects frozen", gc.get_freeze_count())
        return True
