"""Standby and takeover: what a runtime that does not lead does, and how it starts leading.

With leader election on, a standby keeps its informers warm and its schedule current but
reconciles nothing: it remembers the parents of the events it sees instead of queueing them
(the ``LeaderGate``, ``reconciler._driver.leading``, holds them) and starts the child informers its
parents' builders need (``warm_children``), so a takeover reconciles from warm caches.
``take_over`` resumes the schedule from the previous leader's heartbeat, queues the parents whose
status or grid time calls for it, and replays only the held events newer than one lease duration
(earlier ones the old leader handled while it renewed): no herd. Losing the lead is the gate's
(``LeaderGate.lost_leadership``). Whether a child drifted is ``reconciler._driver.drift``'s.

What it receives from the runtime (``reconciler._driver.runtime`` wires it; it never sees the
runtime): the ``gate`` (the held events, the takeover), the ``queue``, the ``caches``
(``Caches``: the ``parents`` informer and the child ``informers``, warmed, rechecked), the parent
``reconciler`` (what a parent declares, and the drift plan), the ``telemetry`` (its ``clock``
and ``stats``), the ``lifecycle`` (``stopping()``, and ``track(thread)``: the runtime joins its
recheck threads when it stops); and callables: the router's ``first_sight`` and
``queue_for_event`` (a takeover and a drift look queue through them) and the resync loop's
``resume``. It is built after the router, and neither the router nor the workers call it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from reconciler._base.lifecycle import Lifecycle
from reconciler._cache.children import Caches
from reconciler._cache.informers import TypeKey
from reconciler._client.protocol import KubeObject
from reconciler._driver.drift import drifted
from reconciler._driver.leading import LeaderGate
from reconciler._driver.parts import Telemetry
from reconciler._driver.triggers import ParentKey, parent_needs_reconcile
from reconciler._reconcile.declared import DeclaredChildren
from reconciler._reconcile.parents import ParentReconciler
from reconciler._workqueue.queues import WorkQueue

__all__ = ["Standby"]

_log = logging.getLogger("optk.operator")

_WARM_SYNC_SECONDS = 30.0
"""How long the start-up drift look waits for the warmed child informers to list."""


class Standby:
    """The standby side of one runtime: the takeover, the warm start and the drift looks."""

    def __init__(
        self,
        gate: LeaderGate,
        *,
        queue: WorkQueue[ParentKey],
        caches: Caches,
        reconciler: ParentReconciler,
        telemetry: Telemetry,
        lifecycle: Lifecycle,
        first_sight: Callable[[ParentKey, KubeObject], None],
        queue_for_event: Callable[[ParentKey], None],
        resume: Callable[[], None],
    ) -> None:
        self._gate = gate
        self._queue = queue
        self._parents = caches.parents
        self._informers = caches.informers
        self._reconciler = reconciler
        self._clock = telemetry.clock
        self._stats = telemetry.stats
        self._first_sight = first_sight
        self._queue_for_event = queue_for_event
        self._resume = resume
        self._stopping = lifecycle.stopping
        self._track = lifecycle.track
        self._lock = threading.Lock()
        self._warming = True  # the runtime runs warm_children once, on start

    @property
    def warming(self) -> bool:
        """Whether the start-up look (``warm_children``) has yet to finish: the runtime is not
        idle until it has (it builds every parent and plans their children: a benchmark or a
        test that starts measuring before it ends measures it too)."""
        with self._lock:
            return self._warming

    def take_over(self) -> None:
        """Becoming leader: resume from the heartbeat, queue what is due, replay recent events
        (the gate's held ones)."""
        held = self._gate.take_over()
        self._resume()
        cache = self._parents.cache
        known = cache.keys()  # a snapshot: the cache is not iterable
        for key in known:
            parent = cache.get(*key)
            if parent is not None:
                self._first_sight(key, parent)
        horizon = self._gate.replay_horizon()
        for key, seen in held.items():
            if seen >= horizon:
                self._stats.triggers["standby-event"] += 1
                self._queue.add(key)

    def warm_children(self) -> None:
        """Start the child informers the parents' builders need, so that a takeover reconciles
        from warm caches and, after a restart, drift of children whose parents are not due yet is
        seen at once (builders are pure, so building costs no request). A parent already
        reconciled by this runtime, or queued for a worker now (a cold start), declares its own
        types and is skipped.

        Then, once those informers have listed, queue each parent whose children drifted while
        no runtime watched them (edited, deleted, or an edit whose event a stopping runtime
        dropped): a child informer's first list reports nothing, so without this look such
        drift would wait for the periodic resync. The look plans each child against the caches
        (no request, no write); only parents with a child to write are queued: no herd.
        """
        try:
            self._warm_children()
        finally:
            with self._lock:
                self._warming = False

    def _warm_children(self) -> None:
        if not self._parents.wait_synced(None):
            return
        warmed: list[tuple[ParentKey, KubeObject, DeclaredChildren]] = []
        cache, informers = self._parents.cache, self._informers
        parents = cache.keys()
        for key in parents:
            if self._stopping():
                return
            if self._stats.reconciles.get(key) or self._queue.is_pending(key):
                continue  # its reconcile declared (or is about to declare) its types
            parent = cache.get(*key)
            if parent is None:
                continue
            declared = self._reconciler.declared(parent)
            for error in declared.errors:  # the leader reports build failures; this only warms
                _log.debug("warming for %s/%s: build failed: %s", key[0], key[1], error)
            if declared.build_error is not None:
                continue
            informers.use(key, declared.types)
            warmed.append((key, parent, declared))
        deadline = self._clock.monotonic() + _WARM_SYNC_SECONDS
        for informer in [informers.informer(*t) for t in informers.types()]:
            if informer is not None:  # a kind whose list is refused is not waited for
                informer.wait_synced(max(0.0, deadline - self._clock.monotonic()),
                                     until_refused=True)
        for key, seen, declared in warmed:  # as declared above: its builders run once here
            if self._stopping():
                return
            if not self._stats.reconciles.get(key) and drifted(self._reconciler, seen, declared):
                self._stats.triggers["drift-at-start"] += 1
                self._queue_for_event(key)

    def recheck(self, type_key: TypeKey) -> None:
        """A child kind listed for the first time after its lists were refused (``403``, say):
        the parents that use it were planned (at start) or reconciled without it, so each is
        looked at again, from the caches, and queued when a child would be written or its last
        reconcile failed (its status still says so). Runs in a thread of its own."""
        if self._stopping():
            return
        thread = threading.Thread(target=self._recheck, args=(type_key,),
                                  name=f"optk-recheck-{type_key[1]}", daemon=True)
        self._track(thread)
        thread.start()

    def _recheck(self, type_key: TypeKey) -> None:
        _log.info("%s %s can be listed again: looking at the parents that use it",
                  type_key[1], type_key[0])
        for key in sorted(k for k in self._informers.users_of(*type_key) if isinstance(k, tuple)):
            if self._stopping():
                return
            parent = self._parents.cache.get(*key)
            if parent is None:
                continue
            if parent_needs_reconcile(parent) or drifted(self._reconciler, parent):
                self._stats.triggers["drift-at-sync"] += 1
                self._queue_for_event(key)
