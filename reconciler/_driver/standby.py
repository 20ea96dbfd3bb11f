"""Standby and takeover: what a runtime that does not lead does, and how it starts leading.

With leader election on, a standby keeps its informers warm and its schedule current but
reconciles nothing: it remembers the parents of the events it sees instead of queueing them
(``holds``) and starts the child informers its parents' builders need (``warm_children``), so a
takeover reconciles from warm caches. ``take_over`` resumes the schedule from the previous
leader's heartbeat, queues the parents whose status or grid time calls for it, and replays only
the held events newer than one lease duration (earlier ones the old leader handled while it
renewed): no herd. ``lost_leadership`` stops the runtime so that a restart campaigns afresh.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from builders import ObjectRef
from reconciler._base.errors import KindUnlistableError
from reconciler._cache.informers import TypeKey
from reconciler._client.protocol import KubeObject
from reconciler._driver.triggers import ParentKey, parent_needs_reconcile

if TYPE_CHECKING:
    from reconciler._driver.runtime import OperatorRuntime

__all__ = ["Standby"]

_log = logging.getLogger("optk.operator")

_WARM_SYNC_SECONDS = 30.0
"""How long the start-up drift look waits for the warmed child informers to list."""


class Standby:
    """The standby side of one runtime; shares the runtime's lock."""

    def __init__(self, runtime: OperatorRuntime) -> None:
        self._runtime = runtime
        self._lock = runtime.lock
        self._held: dict[ParentKey, float] = {}
        self._taking_over = False

    @property
    def taking_over(self) -> bool:
        """Whether a takeover started (from then on events are queued, not held)."""
        with self._lock:
            return self._taking_over

    def holds(self, key: ParentKey) -> bool:
        """On a standby, remember an event's parent instead of queueing it (the leader handles
        it; ``take_over`` replays the recent ones); whether it was held."""
        rt = self._runtime
        if rt.elector is None:
            return False
        with self._lock:
            if rt.workers.started or self._taking_over:
                return False
            self._held[key] = rt.clock.monotonic()
            return True

    def take_over(self) -> None:
        """Becoming leader: resume from the heartbeat, queue what is due, replay recent events."""
        rt = self._runtime
        with self._lock:
            self._taking_over = True
            held, self._held = self._held, {}
        rt.resync.resume()
        known = rt.parents.cache.keys()  # a snapshot: the cache is not iterable
        for key in known:
            parent = rt.parents.cache.get(*key)
            if parent is not None:
                rt.router.first_sight(key, parent)
        election = rt.operator.election
        horizon = rt.clock.monotonic() - (election.lease_duration if election else 0.0)
        for key, seen in held.items():
            if seen >= horizon:
                rt.stats.triggers["standby-event"] += 1
                rt.queue.add(key)

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
        rt = self._runtime
        if not rt.parents.wait_synced(None):
            return
        warmed: list[tuple[ParentKey, KubeObject]] = []
        parents = rt.parents.cache.keys()
        for key in parents:
            if rt.stopping:
                return
            if rt.stats.reconciles.get(key) or rt.queue.is_pending(key):
                continue  # its reconcile declared (or is about to declare) its types
            parent = rt.parents.cache.get(*key)
            if parent is None:
                continue
            declared = rt.reconciler.declared(parent)
            for error in declared.errors:  # the leader reports build failures; this only warms
                _log.debug("warming for %s/%s: build failed: %s", key[0], key[1], error)
            if declared.build_error is not None:
                continue
            rt.informers.use(key, declared.types)
            warmed.append((key, parent))
        deadline = rt.clock.monotonic() + _WARM_SYNC_SECONDS
        for informer in [rt.informers.informer(*t) for t in rt.informers.types()]:
            if informer is not None:  # a kind whose list is refused is not waited for
                informer.wait_synced(max(0.0, deadline - rt.clock.monotonic()),
                                     until_refused=True)
        for key, seen in warmed:
            if rt.stopping:
                return
            if not rt.stats.reconciles.get(key) and self.drifted(seen):
                rt.stats.triggers["drift-at-start"] += 1
                rt.router.queue_for_event(key)

    def recheck(self, type_key: TypeKey) -> None:
        """A child kind listed for the first time after its lists were refused (``403``, say):
        the parents that use it were planned (at start) or reconciled without it, so each is
        looked at again, from the caches, and queued when a child would be written or its last
        reconcile failed (its status still says so). Runs in a thread of its own."""
        rt = self._runtime
        if rt.stopping:
            return
        thread = threading.Thread(target=self._recheck, args=(type_key,),
                                  name=f"optk-recheck-{type_key[1]}", daemon=True)
        rt.track(thread)
        thread.start()

    def _recheck(self, type_key: TypeKey) -> None:
        rt = self._runtime
        _log.info("%s %s can be listed again: looking at the parents that use it",
                  type_key[1], type_key[0])
        for key in sorted(k for k in rt.informers.users_of(*type_key) if isinstance(k, tuple)):
            if rt.stopping:
                return
            parent = rt.parents.cache.get(*key)
            if parent is None:
                continue
            if parent_needs_reconcile(parent) or self.drifted(parent):
                rt.stats.triggers["drift-at-sync"] += 1
                rt.router.queue_for_event(key)

    def drifted(self, parent: KubeObject) -> bool:
        """Whether a reconcile of ``parent`` would write a child (planned from the caches, no
        request): at start, when a sharded replica adopts a moved-in parent, and when a kind
        lists again. A kind that cannot be listed counts as drift: the reconcile says why on
        the parent rather than leave it claiming its children are as desired."""
        rt = self._runtime
        uid = str((parent.get("metadata") or {}).get("uid") or "")
        declared = rt.reconciler.declared(parent)  # builders get a private copy of parent
        for error in declared.errors:  # a failing build: its reconcile will say so
            _log.debug("drift check of %s: %s", ObjectRef.of(parent), error)
        try:
            for child in declared.children:
                if rt.reconciler.resources.plan(child.obj, child.state, owner_uid=uid).writes:
                    return True
        except KindUnlistableError as error:
            _log.debug("drift check of %s: %s", ObjectRef.of(parent), error)
            return True
        except Exception as error:  # a failing read: its reconcile will say so
            _log.debug("drift check of %s: %s", ObjectRef.of(parent), error)
            return False
        return False

    def lost_leadership(self) -> None:
        """The elector's ``on_stopped``: stop the runtime unless it is stopping already."""
        rt = self._runtime
        if rt.elector is not None:
            rt.metrics.set_leader(rt.elector.config.name, False)
        if not rt.stopping:
            _log.error("leadership lost; stopping so that a restart campaigns afresh")
            threading.Thread(target=rt.stop, name="optk-stop", daemon=True).start()
