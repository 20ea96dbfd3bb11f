"""Event routing: from informer events to the work queue.

The handlers the runtime registers on its informers. A parent's event is dropped when it is the
echo of the toolkit's own write (``reconciler._cache.recording``), scheduled on first sight (queued
at once when ``parent_needs_reconcile`` or its grid time passed), and queued on a change that
``parent_event_triggers`` passes; a child's event is mapped to its parent by controller owner
reference or ``optk.dev/owner-uid`` and queued when ``child_event_triggers`` passes. Queueing
coalesces bursts (``Operator.watching.coalesce``); a child's event that changes the verdict a parent
waits on (``reconciler._reconcile.waits``: a dependency's readiness, a dependent being gone)
queues that parent whatever else the event is and, on a standby, is held instead
(``reconciler._driver.standby``). With sharding, a parent carrying the drain mark for this shard is
queued at once, whatever changed, so a worker acknowledges it, and one moved in from another
shard is queued so that a worker adopts its children (``reconciler._sharding.shards``). The
resync ConfigMap's events replace the schedule's policy. The rules
themselves are pure functions in ``reconciler._driver.triggers``.

What it receives from the runtime (``reconciler._driver.runtime`` wires it; it never sees the
runtime): the ``triggering`` (``Triggering``: the ``queue`` it feeds, the ``schedule`` of first
sights and the ConfigMap's policy, ``kick()`` to wake the resync timer); the ``caches``
(``Caches``: the ``parents`` informer, whose cache maps a child's owner uid to a parent and whose
``relisting`` says whether an echo may carry a lost change, and the child ``informers``, the same
for a child's type); the ``telemetry`` (its ``clock`` and ``stats``); the ``settings``
(``RoutingSettings``: the ``base_policy`` the ConfigMap overrides, the operator's
``event_coalesce`` and ``watch_children``); ``shards`` (drain marks and moved-in parents; None
without sharding); the leader ``gate`` (``reconciler._driver.leading``: whether a standby holds
an event instead of queueing it, whether a first sight waits for the takeover); and callables:
``decide_echo`` (the recording client's: it answers at once, or later for an event of an object
with an own write in flight, so that a late write answer never holds up the informer's other
events) and ``last_started`` (the workers', for coalescing); and the reconciler's ``waits``.
The standby queues through ``first_sight`` and ``queue_for_event``; the router calls no part
built after it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import attrs

from builders import ObjectRef
from builders.names import owner_uids
from reconciler._cache.children import Caches
from reconciler._cache.informers import TypeKey
from reconciler._cache.recording import EchoDecided
from reconciler._client.protocol import KubeObject
from reconciler._driver.leading import LeaderGate
from reconciler._driver.parts import Telemetry, Triggering
from reconciler._driver.resyncs import ResyncPolicy
from reconciler._driver.triggers import (
    ParentKey,
    child_event_triggers,
    parent_event_triggers,
    parent_needs_reconcile,
)
from reconciler._reconcile.sharing import shared_record
from reconciler._reconcile.waits import WaitRegistry
from reconciler._sharding.shards import Shards

__all__ = ["EventRouter", "RoutingSettings"]

_log = logging.getLogger("optk.operator")


@attrs.frozen(kw_only=True)
class RoutingSettings:
    """What the operator says of routing events."""

    base_policy: ResyncPolicy
    """The resync policy the ConfigMap overrides (its deletion restores this one)."""
    event_coalesce: float
    """Seconds a parent's events are coalesced after its last reconcile started."""
    watch_children: bool
    """Whether a child's change queues its parent."""


class EventRouter:
    """The informer handlers of one runtime."""

    def __init__(
        self,
        triggering: Triggering,
        *,
        caches: Caches,
        telemetry: Telemetry,
        settings: RoutingSettings,
        shards: Shards | None,
        gate: LeaderGate,
        decide_echo: Callable[[str, KubeObject, EchoDecided], None],
        last_started: Callable[[ParentKey], float | None],
        waits: WaitRegistry | None = None,
    ) -> None:
        self._queue = triggering.queue
        self._schedule = triggering.schedule
        self._kick = triggering.kick
        self._parents = caches.parents
        self._informers = caches.informers
        self._clock = telemetry.clock
        self._stats = telemetry.stats
        self._base_policy = settings.base_policy
        self._event_coalesce = settings.event_coalesce
        self._watch_children = settings.watch_children
        self._shards = shards
        self._holds = gate.holds
        self._standing_by = gate.standing_by
        self._decide_echo = decide_echo
        self._last_started = last_started
        self._waits = waits

    def queue_for_event(self, key: ParentKey) -> None:
        """Queue ``key`` for an event: at once after a quiet window, else at the window's end."""
        if self._holds(key):
            return
        window = self._event_coalesce
        last = self._last_started(key)
        elapsed = None if last is None else self._clock.monotonic() - last
        if elapsed is None or elapsed >= window:
            self._queue.add(key)
        else:
            self._queue.add_after(key, window - elapsed)

    def on_parent(self, event_type: str, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        """The parent informer's handler (the event is routed once its echo is decided)."""
        # A relist's difference may be an own write carrying a foreign change the stream lost.
        relisting = self._parents.relisting
        self._decide_echo(event_type, new, lambda own: self._parent_event(
            event_type, old, new, own=own and not relisting))

    def _parent_event(
        self, event_type: str, old: dict[str, Any] | None, new: dict[str, Any], *, own: bool,
    ) -> None:
        triggers = self._stats.triggers
        if own:
            triggers["own-echo"] += 1
            return
        key = ObjectRef.of(new).namespaced_name
        if event_type == "DELETED":
            triggers["parent-deleted"] += 1
            if not self._holds(key):
                self._queue.add(key)
            return
        shards = self._shards
        if shards is not None and shards.releasing(new):
            triggers["drain"] += 1
            self._queue.add(key)  # a worker acknowledges once no reconcile of it runs
            return
        if event_type == "ADDED" and old is None:  # first sight: startup, or a new parent
            if shards is not None and shards.moved_in(key, new):
                triggers["moved-in"] += 1
                self._queue.add(key)  # a worker adopts its children, then schedules it
                return
            self.first_sight(key, new)
            return
        if parent_event_triggers(event_type, new, old=old):
            triggers["parent-changed"] += 1
            self.queue_for_event(key)

    def first_sight(self, key: ParentKey, parent: KubeObject) -> None:
        """Schedule a parent seen for the first time (or afresh at a takeover): queue it now
        when it needs a reconcile or its grid time passed while no one was watching."""
        now = self._clock.time()
        due = self._schedule.observe(key, parent, now=now)
        # a standby leaves it to its takeover
        if (parent_needs_reconcile(parent) or due <= now) and not self._standing_by():
            self._stats.triggers["parent-new"] += 1
            self._schedule.take(key)  # in flight: the reconcile sets its next time
            self._queue.add(key)
        self._kick()

    def on_child(
        self, type_key: TypeKey, event_type: str, old: dict[str, Any] | None,
        new: dict[str, Any],
    ) -> None:
        """The child informers' handler (the event is routed once its echo is decided)."""
        informer = self._informers.informer(*type_key)
        relisting = informer is not None and informer.relisting  # see on_parent
        self._decide_echo(event_type, new, lambda own: self._child_event(
            event_type, old, new, own=own and not relisting))

    def _child_event(
        self, event_type: str, old: dict[str, Any] | None, new: dict[str, Any], *, own: bool,
    ) -> None:
        # A parent waiting on this child's readiness (or on its being gone) is woken by exactly
        # the change of that verdict, status-only or our own delete's echo included.
        woken = self.on_awaited(event_type, old, new)
        if woken and not self._owner_not_woken(new, woken):
            return
        if own:
            self._stats.triggers["own-echo"] += 1
            return
        if not self._watch_children or not child_event_triggers(event_type, new, old=old):
            return
        for uid in owner_uids(new):
            parent = self._parents.cache.get_by_uid(uid)
            if parent is not None:
                self._stats.triggers["child"] += 1
                self.queue_for_event(ObjectRef.of(parent).namespaced_name)
                return
        # A shared child (builders.shared) names no owner: its record names every parent that
        # builds it, and each is looked at (one creates it again, the others join; before,
        # a shared CRD deleted by someone stayed missing until the resync: issue 38's soak).
        for uid in shared_record(new):
            parent = self._parents.cache.get_by_uid(uid)
            if parent is not None:
                self._stats.triggers["child"] += 1
                self.queue_for_event(ObjectRef.of(parent).namespaced_name)

    def on_awaited(self, event_type: str, old: dict[str, Any] | None,
                   new: dict[str, Any]) -> list[ParentKey]:
        """Queue the parents whose awaited verdict this event of an object changed (a child's,
        or, sharded, one another owner holds: ``reconciler._sharding.foreign``); them."""
        woken = self._waits.wakes(event_type, old, new) if self._waits is not None else []
        for key in woken:  # a verdict flips rarely: not folded into the coalescing window
            self._stats.triggers["awaited"] += 1
            if not self._holds(key):
                self._queue.add(key)
        return woken

    def _owner_not_woken(self, child: dict[str, Any], woken: list[ParentKey]) -> bool:
        """Whether the child's own parent is not among the parents its event woke (a parent
        waiting for another's child to be let go: the owner's drift rules still apply)."""
        for uid in owner_uids(child):
            parent = self._parents.cache.get_by_uid(uid)
            if parent is not None and ObjectRef.of(parent).namespaced_name not in woken:
                return True
        return False

    def on_config(self, event_type: str, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        """The resync ConfigMap informer's handler: apply its interval to the schedule."""
        try:
            policy = (self._base_policy if event_type == "DELETED"
                      else self._base_policy.with_configmap(new))
        except ValueError as error:
            _log.error("ignoring the resync ConfigMap: %s", error)
            return
        if policy != self._schedule.policy:
            _log.info("resync interval is now %.0fs", policy.interval)
            self._schedule.set_policy(policy)
            self._kick()
