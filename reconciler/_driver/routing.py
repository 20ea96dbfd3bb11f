"""Event routing: from informer events to the work queue.

The handlers the runtime registers on its informers. A parent's event is dropped when it is the
echo of the toolkit's own write (``reconciler._cache.recording``), scheduled on first sight (queued
at once when ``parent_needs_reconcile`` or its grid time passed), and queued on a change that
``parent_event_triggers`` passes; a child's event is mapped to its parent by controller owner
reference or ``optk.dev/owner-uid`` and queued when ``child_event_triggers`` passes. Queueing
coalesces bursts (``Operator.event_coalesce``) and, on a standby, is held instead
(``reconciler._driver.standby``). With sharding, a parent carrying the drain mark for this shard is
queued at once, whatever changed, so a worker acknowledges it, and one moved in from another
shard is queued so that a worker adopts its children (``reconciler._sharding.shards``). The
resync ConfigMap's events replace the schedule's policy. The rules
themselves are pure functions in ``reconciler._driver.triggers``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from builders import ObjectRef
from builders.names import owner_uids
from reconciler._cache.informers import Informer, TypeKey
from reconciler._client.protocol import KubeObject
from reconciler._driver.triggers import (
    ParentKey,
    child_event_triggers,
    parent_event_triggers,
    parent_needs_reconcile,
)

if TYPE_CHECKING:
    from reconciler._driver.runtime import OperatorRuntime

__all__ = ["EventRouter"]

_log = logging.getLogger("optk.operator")


class EventRouter:
    """The informer handlers of one runtime."""

    def __init__(self, runtime: OperatorRuntime) -> None:
        self._runtime = runtime

    def informer_of(self, api_version: str, kind: str) -> Informer | None:
        """The runtime's informer of a type (the parents' or a child type's), if running."""
        rt = self._runtime
        if (api_version, kind) == rt.parents.type_key:
            return rt.parents
        return rt.informers.informer(api_version, kind)

    def queue_for_event(self, key: ParentKey) -> None:
        """Queue ``key`` for an event: at once after a quiet window, else at the window's end."""
        rt = self._runtime
        if rt.standby.holds(key):
            return
        window = rt.operator.event_coalesce
        last = rt.workers.last_started(key)
        elapsed = None if last is None else rt.clock.monotonic() - last
        if elapsed is None or elapsed >= window:
            rt.queue.add(key)
        else:
            rt.queue.add_after(key, window - elapsed)

    def on_parent(self, event_type: str, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        """The parent informer's handler."""
        rt = self._runtime
        # A relist's difference may be an own write carrying a foreign change the stream lost.
        if rt.client.is_own_echo(event_type, new) and not rt.parents.relisting:
            rt.stats.triggers["own-echo"] += 1
            return
        key = ObjectRef.of(new).namespaced_name
        if event_type == "DELETED":
            rt.stats.triggers["parent-deleted"] += 1
            if not rt.standby.holds(key):
                rt.queue.add(key)
            return
        if rt.shards is not None and rt.shards.releasing(new):
            rt.stats.triggers["drain"] += 1
            rt.queue.add(key)  # a worker acknowledges once no reconcile of it runs
            return
        if event_type == "ADDED" and old is None:  # first sight: startup, or a new parent
            if rt.shards is not None and rt.shards.moved_in(key, new):
                rt.stats.triggers["moved-in"] += 1
                rt.queue.add(key)  # a worker adopts its children, then schedules it
                return
            self.first_sight(key, new)
            return
        if parent_event_triggers(event_type, new, old=old):
            rt.stats.triggers["parent-changed"] += 1
            self.queue_for_event(key)

    def first_sight(self, key: ParentKey, parent: KubeObject) -> None:
        """Schedule a parent seen for the first time (or afresh at a takeover): queue it now
        when it needs a reconcile or its grid time passed while no one was watching."""
        rt = self._runtime
        now = rt.clock.time()
        due = rt.schedule.observe(key, parent, now=now)
        standby = rt.elector is not None and not rt.leading and not rt.standby.taking_over
        if (parent_needs_reconcile(parent) or due <= now) and not standby:  # else: takeover
            rt.stats.triggers["parent-new"] += 1
            rt.schedule.take(key)  # in flight: the reconcile sets its next time
            rt.queue.add(key)
        rt.resync.kick()

    def on_child(
        self, type_key: TypeKey, event_type: str, old: dict[str, Any] | None,
        new: dict[str, Any],
    ) -> None:
        """The child informers' handler."""
        rt = self._runtime
        informer = rt.informers.informer(*type_key)
        relisting = informer is not None and informer.relisting  # see on_parent
        if rt.client.is_own_echo(event_type, new) and not relisting:
            rt.stats.triggers["own-echo"] += 1
            return
        if not rt.operator.watch_children or not child_event_triggers(event_type, new, old=old):
            return
        for uid in owner_uids(new):
            parent = rt.parents.cache.get_by_uid(uid)
            if parent is not None:
                rt.stats.triggers["child"] += 1
                self.queue_for_event(ObjectRef.of(parent).namespaced_name)
                return

    def on_config(self, event_type: str, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        """The resync ConfigMap informer's handler: apply its interval to the schedule."""
        rt = self._runtime
        try:
            policy = (rt.base_policy if event_type == "DELETED"
                      else rt.base_policy.with_configmap(new))
        except ValueError as error:
            _log.error("ignoring the resync ConfigMap: %s", error)
            return
        if policy != rt.schedule.policy:
            _log.info("resync interval is now %.0fs", policy.interval)
            rt.schedule.set_policy(policy)
            rt.resync.kick()
