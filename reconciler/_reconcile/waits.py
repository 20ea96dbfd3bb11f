"""What parents wait on, and whom a child's change wakes.

A reconcile that holds a child back (``reconciler._reconcile.ordering``) says why in a
:class:`Wait`, with the :class:`Watch` es that would unblock it: a child whose readiness verdict it
waits to change, or whose being gone it waits for. A parent whose ``Ready`` is false because a
child is not healthy waits the same way. :class:`WaitRegistry` keeps the latest waits of every
parent, so that the driver's event routing (``reconciler._driver.routing``) queues exactly the
parents whose awaited verdict a child's event changed, whether or not the event would have passed
the usual child trigger (a status-only change does not) and even when it is the echo of the
toolkit's own delete: no polling, and no reconcile for status changes no one waits on. It also
knows which kinds parents wait to be served (``Component(when_served=True)``), and which
objects parents wait on that another owner holds (:data:`NOT_OURS`, :meth:`WaitRegistry.not_ours`):
a sharded replica's child informers cannot see those, so it watches them by name while the wait
lasts (``reconciler._sharding.foreign``), told by :meth:`WaitRegistry.on_not_ours_change`.

Boundary: values and one thread-safe map; no client, no informer.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from builders import ObjectRef
from builders.composition import ReadyRule, rule_verdict
from reconciler._base.keys import ParentKey
from reconciler._base.text import bounded

__all__ = ["NOT_OURS", "Wait", "WaitRegistry", "Watch", "waiting_message"]

_RECENT = 4096  # child events remembered for reconciles in flight
TypeKey = tuple[str, str]

NOT_OURS = "ChildrenSkipped"
"""The reason of a wait for another owner to let go of a child's name
(``reconciler._reconcile.parents.not_ours_waits``)."""


@attrs.frozen(kw_only=True)
class Watch:
    """A child the parent waits on: for ``rule``'s verdict to change, or (``rule`` None) for it
    to be gone."""

    ref: ObjectRef
    rule: ReadyRule | None = attrs.field(default=None, eq=False)
    seen: str | None = None
    """The verdict the parent saw (when known): any event whose verdict differs wakes it, even
    when the cache held the new object already (written through by another parent's write,
    so the event's old object is the new one)."""
    seen_version: str | None = None
    """The ``resourceVersion`` of the object the reconcile saw (when known): an event that
    carries that version is no news to it (the echo of its own write of the child)."""

    def verdict(self, obj: Mapping[str, Any] | None) -> str | None:
        """What the rule says of ``obj`` ("gone" / "present" without a rule)."""
        if self.rule is None:
            return "gone" if obj is None else "present"
        if obj is None:
            return "missing"
        return rule_verdict(self.rule(obj))


@attrs.frozen(kw_only=True)
class Wait:
    """One child held back: ``reason`` (a condition reason: ``DependencyNotReady``,
    ``DependentsNotGone``, ``PreconditionNotMet``, ``KindNotServed``, ``DependencyNotBuilt``),
    ``message`` naming the child, the component and the rule, and ``watches``: what wakes it."""

    ref: ObjectRef
    reason: str
    message: str
    watches: tuple[Watch, ...] = ()
    kinds: tuple[tuple[str, str], ...] = ()
    """Kinds whose becoming served wakes it (``when_served``)."""



class WaitRegistry:
    """The latest waits of each parent (by ``(namespace, name)``); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_parent: dict[ParentKey, tuple[Wait, ...]] = {}
        self._by_ref: dict[ObjectRef, dict[ParentKey, list[Watch]]] = {}
        self._by_kind: dict[TypeKey, set[ParentKey]] = {}
        self._seq = 0  # counts child events seen, so a reconcile can tell what came meanwhile
        # ref -> its last event's seq and the resourceVersion it carried
        self._recent: OrderedDict[ObjectRef, tuple[int, str | None]] = OrderedDict()
        self._not_ours: dict[ObjectRef, set[ParentKey]] = {}
        self._listeners: list[Callable[[], None]] = []

    def on_not_ours_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` (outside the lock, on the thread that replaced the waits)
        whenever a parent's waits on :meth:`not_ours` objects were replaced (the set may have
        changed, or what the listener decided of an object it holds may no longer be true)."""
        with self._lock:
            self._listeners.append(listener)

    def not_ours(self) -> set[ObjectRef]:
        """The objects some parent waits on for their other owner to let go (:data:`NOT_OURS`)."""
        with self._lock:
            return set(self._not_ours)

    def mark(self) -> int:
        """A point in the stream of child events (take it before a reconcile reads anything)."""
        with self._lock:
            return self._seq

    def replace(self, parent: ParentKey, waits: Iterable[Wait], *, since: int | None = None
                ) -> bool:
        """Replace what ``parent`` waits on (nothing: forget it). With ``since`` (a
        :meth:`mark` taken before the reconcile that decided ``waits``): whether an event of a
        watched child came meanwhile that the reconcile may not have seen (then reconcile
        again: the event found no one waiting). An event carrying the very version the
        reconcile saw (``Watch.seen_version``) is not news: the echo of the reconcile's own
        write of that child made every reconcile that wrote a watched child run twice."""
        waits = tuple(waits)
        with self._lock:
            stale = since is not None and any(
                (recent := self._recent.get(watch.ref)) is not None and recent[0] > since
                and (watch.seen_version is None or recent[1] != watch.seen_version)
                for wait in waits for watch in wait.watches)
            touched = any(w.reason == NOT_OURS for w in (*self._by_parent.get(parent, ()), *waits))
            self._replace(parent, waits)
            listeners = list(self._listeners) if touched else []
        for listener in listeners:
            listener()
        return stale

    def _replace(self, parent: ParentKey, waits: tuple[Wait, ...]) -> None:
        """Under the lock: drop the old waits of ``parent``, index the new ones."""
        for wait in self._by_parent.pop(parent, ()):
            for watch in wait.watches:
                by = self._by_ref.get(watch.ref)
                if by is not None:
                    by.pop(parent, None)
                    if not by:
                        del self._by_ref[watch.ref]
            for kind in wait.kinds:
                self._by_kind.get(kind, set()).discard(parent)
                if not self._by_kind.get(kind, True):
                    del self._by_kind[kind]
            if wait.reason == NOT_OURS:
                self._not_ours.get(wait.ref, set()).discard(parent)
                if not self._not_ours.get(wait.ref, True):
                    del self._not_ours[wait.ref]
        if not waits:
            return
        self._by_parent[parent] = waits
        for wait in waits:
            for watch in wait.watches:
                self._by_ref.setdefault(watch.ref, {}).setdefault(parent, []).append(watch)
            for kind in wait.kinds:
                self._by_kind.setdefault(kind, set()).add(parent)
            if wait.reason == NOT_OURS:
                self._not_ours.setdefault(wait.ref, set()).add(parent)

    def waits_of(self, parent: ParentKey) -> tuple[Wait, ...]:
        """What ``parent`` waits on now."""
        with self._lock:
            return self._by_parent.get(parent, ())

    def watched(self, ref: ObjectRef) -> bool:
        """Whether any parent waits on this child."""
        with self._lock:
            return ref in self._by_ref

    def wakes(self, event_type: str, old: Mapping[str, Any] | None,
              new: Mapping[str, Any]) -> list[ParentKey]:
        """The parents whose awaited verdict this child event changed."""
        ref = ObjectRef.of(new)
        with self._lock:
            self._seq += 1
            self._recent[ref] = (self._seq, (new.get("metadata") or {}).get("resourceVersion"))
            self._recent.move_to_end(ref)
            while len(self._recent) > _RECENT:
                self._recent.popitem(last=False)
            watching = {parent: list(watches)
                        for parent, watches in self._by_ref.get(ref, {}).items()}
        after = None if event_type == "DELETED" else new
        before = None if event_type == "ADDED" else old
        woken = []
        for parent, watches in watching.items():
            if any(_changed(w, before, after, assume_changed=old is None and
                            event_type != "ADDED") for w in watches):
                woken.append(parent)
        return woken

    def waiting_on_kind(self, kind: TypeKey) -> list[ParentKey]:
        """The parents that wait for ``kind`` to be served."""
        with self._lock:
            return sorted(self._by_kind.get(kind, ()))

    @property
    def kinds(self) -> set[TypeKey]:
        """Every kind some parent waits to be served."""
        with self._lock:
            return set(self._by_kind)


def _changed(watch: Watch, before: Mapping[str, Any] | None, after: Mapping[str, Any] | None,
             *, assume_changed: bool) -> bool:
    try:
        if watch.seen is not None:  # compared with what the parent saw, not the cache's old
            return watch.verdict(after) != watch.seen
        if assume_changed:  # no old object known: the verdict may have changed
            return True
        return watch.verdict(before) != watch.verdict(after)
    except Exception:  # a user's rule failed on this object: let the reconcile report it
        return True


def waiting_message(waits: Iterable[Wait]) -> str:
    """One line for the parent's condition: every waiting child and on what."""
    listed = list(waits)
    text = "; ".join(w.message for w in listed)
    return bounded(f"{len(listed)} waiting: {text}")
