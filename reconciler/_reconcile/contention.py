"""Contention: noticing that the toolkit fights another writer over a field, and backing off.

Why it exists: an HPA owning ``spec.replicas``, a mutating webhook, or a second copy of the same
operator running without ``--leader-elect`` changes a field back each time the toolkit repairs
it, and a plain operator then writes forever. ``ContentionDetector`` watches the plans that only
undo someone else's change (``policies.undoes_drift``): when the same field paths of the same
child are undone ``threshold`` times within ``window`` seconds, the child is *contested*: the
repair is held back and tried again only after an exponential backoff (``backoff``, doubling up
to ``max_backoff``), and the parent reports a ``Contested`` condition, one Event, a metric and
one log line naming the fields and the other writer (from ``metadata.managedFields`` where the
server records it; "an unknown writer" otherwise). When the other writer is seen to stop (the
child stayed still for the *quiet window* after its last change: ``quiet_factor`` times the mean
interval of its changes during the contest, within ``min_quiet`` and ``max_quiet``; ``backoff``
stands for the interval until two are seen) the repair goes out at once, at the latest at the
next backoff try; a contest ends when a repair holds for that long. A writer that writes only
when it sees the toolkit's value changes the child once per try: its interval is that of the
tries, so it is probed at most every ``max_quiet``, and repaired within the quiet window after
it stops. A held plan's ``requeue_after`` is the time the repair is due (one wake, never a
requeue before it). A round is a change someone made: the same version undone again (a stale
cache, a plan made again on a fresh read of it), a plan only looked at (``look``) and a write
the server refused (``refused``) are none.

Its boundary: decisions over values and an injected ``Clock``, no client. State is per (parent
uid, child) and thread-safe (the driver's workers share one detector). ``reconciler._reconcile.
guard`` asks it for every plan; conditions, Events, the metric and the log line are made from
:meth:`ContentionDetector.contests` by the guard's reporting helpers.
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from builders import ObjectRef
from reconciler._base.clocks import Clock
from reconciler._base.errors import ReconcilerUsageError
from reconciler._reconcile.planning import ChildPlan, PlanAction
from reconciler._reconcile.policies import applied_record, drift_paths, undoes_drift

__all__ = ["Contention", "ContentionDetector", "Contest", "other_writer"]


def _positive(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value > 0:
        raise ReconcilerUsageError(f"Contention.{attribute.name} must be > 0, got {value!r}")


@attrs.frozen(kw_only=True)
class Contention:
    """``Policies(contention=...)``: when a child counts as contested and how it backs off.

    Contested: the same field paths undone ``threshold`` times within ``window`` seconds. Held
    repairs are tried again after ``backoff`` seconds, doubling up to ``max_backoff``. A
    writer whose child stayed still for ``quiet_factor`` times the interval of its changes
    (bounded by ``min_quiet`` and ``max_quiet``) since its last change is taken to have stopped:
    the repair goes out then, before the backoff try."""

    window: float = attrs.field(default=30.0, validator=_positive)
    threshold: int = attrs.field(default=3, validator=_positive)
    backoff: float = attrs.field(default=1.0, validator=_positive)
    max_backoff: float = attrs.field(default=300.0, validator=_positive)
    quiet_factor: float = attrs.field(default=3.0, validator=_positive)
    min_quiet: float = attrs.field(default=0.2, validator=_positive)
    max_quiet: float = attrs.field(default=30.0, validator=_positive)


@attrs.frozen(kw_only=True)
class Contest:
    """One contested child: its fields, the other writer, and the backoff."""

    parent_uid: str
    ref: ObjectRef
    paths: tuple[str, ...]
    manager: str
    """The other writer's field manager, or a description when the server does not say."""
    same_manager: bool
    """The other writer uses this operator's own field manager: another copy of it."""
    named: bool = False
    """Whether ``manager`` comes from ``managedFields`` (caches drop them: the parent
    reconcile reads the child once to name it, :meth:`ContentionDetector.name`)."""
    undone: int
    """How many times the toolkit undid the change (before and after detection)."""
    backoff: float
    """The current wait between tries, in seconds."""

    def describe(self) -> str:
        """The one sentence people read (condition message, Event, log line)."""
        who = (f"another process with this operator's field manager {self.manager!r} (a second "
               "replica without --leader-elect? run replicas with --leader-elect)"
               if self.same_manager else f"{self.manager} (another controller, or a second "
               "replica of this operator without --leader-elect?)" if self.manager == _UNKNOWN
               else f"manager {self.manager!r}")
        return (f"{', '.join(self.paths)} of {self.ref} is changed back by {who}; undone "
                f"{self.undone} times, backing off (next try in {self.backoff:g} s)")


@attrs.define
class _Child:
    seen_version: str = ""
    seen_at: float = 0.0
    undos: deque[tuple[float, tuple[str, ...]]] = attrs.field(factory=deque)
    changes: deque[float] = attrs.field(factory=lambda: deque(maxlen=8))
    changes_since_write: int = 0
    contest: Contest | None = None
    next_try: float = 0.0
    tries: int = 0
    last_write: float | None = None
    written: str | None = None  # the last-applied record of the toolkit's last patch
    unsent: bool = False  # the last review let a write through that undid a change: not yet
    # known to be applied (``ContentionDetector.refused`` takes it back)
    undone_version: str = ""  # the resourceVersion the last counted round undid


class ContentionDetector:
    """Decides, per plan, whether a repair goes out or is held back (see the module)."""

    def __init__(self, settings: Contention, *, clock: Clock, field_manager: str) -> None:
        self.settings = settings
        self.clock = clock
        self.field_manager = field_manager
        self._lock = threading.Lock()
        self._children: dict[tuple[str, ObjectRef], _Child] = {}
        self._reported: dict[tuple[str, ObjectRef], float] = {}
        self.detected: list[Contest] = []
        """Contests detected and not yet reported (``take_detected`` empties it)."""

    def contests(self, parent_uid: str) -> list[Contest]:
        """The contested children of one parent, in a stable order."""
        with self._lock:
            found = [c.contest for (uid, _), c in self._children.items()
                     if uid == parent_uid and c.contest is not None]
        return sorted(found, key=lambda c: str(c.ref))

    def contested_count(self) -> int:
        """How many children are contested now (the ``optk_contested_objects`` metric)."""
        with self._lock:
            return sum(1 for c in self._children.values() if c.contest is not None)

    def take_detected(self) -> list[Contest]:
        """The contests detected since the last call (each is logged once)."""
        with self._lock:
            found, self.detected = self.detected, []
        return found

    def unnamed(self, parent_uid: str) -> list[ObjectRef]:
        """The contested children of a parent whose other writer is not named yet."""
        return [c.ref for c in self.contests(parent_uid) if not c.named]

    def name(self, parent_uid: str, ref: ObjectRef, live: Mapping[str, Any]) -> None:
        """Name the other writer of a contested child from ``live`` as read from the server
        (with ``managedFields``); the detected contest not logged yet is named as well."""
        with self._lock:
            child = self._children.get((parent_uid, ref))
            if child is None or child.contest is None:
                return
            found = other_writer(live, child.contest.paths, ours=self.field_manager)
            manager, same = found or (_UNKNOWN, False)  # not asked again: one read a contest
            named = attrs.evolve(child.contest, manager=manager, same_manager=same, named=True)
            self.detected = [named if c is child.contest else c for c in self.detected]
            child.contest = named

    def forget(self, parent_uid: str) -> None:
        """Drop what is known of a parent's children (the parent went away)."""
        with self._lock:
            for key in [k for k in self._children if k[0] == parent_uid]:
                del self._children[key]
                self._reported.pop(key, None)

    def refused(self, plan: ChildPlan, *, parent_uid: str) -> None:
        """The server refused ``plan``'s write (an immutable field, a webhook's denial, ...):
        nothing changed, so it undid no one's change. The round the review counted for it is
        taken back; else a write the server keeps refusing looks like a writer that keeps
        changing the child back, and the parent said ``Contested`` by its own manager where
        the refusal is the news (issue 38's soak)."""
        with self._lock:
            child = self._children.get((parent_uid, plan.ref))
            if child is None or not child.unsent:
                return
            child.unsent = False
            child.undone_version = ""  # the same version undone again is a round again
            if child.undos:
                child.undos.pop()
            child.written = None  # the record on the server is what it was

    def review(self, plan: ChildPlan, *, parent_uid: str, look: bool = False) -> ChildPlan:
        """``plan``, or the same plan held back (``UNCHANGED``, ``held`` and ``requeue_after``
        set) while its child is contested; also the ``requeue_after`` that checks a repair held.

        ``look``: the plan answers a question (would a reconcile write? the drift look of
        ``reconciler._driver.drift``, ``ResourceReconciler.plan``) and is not executed: the
        answer is the same, and nothing is recorded (no round counted, no try used up)."""
        if plan.live is None or not parent_uid:
            return plan
        now = self.clock.monotonic()
        meta = plan.live.get("metadata") or {}
        version = str(meta.get("resourceVersion") or "")
        key = (parent_uid, plan.ref)
        with self._lock:
            child = self._children.get(key)
            if look:
                if child is None and plan.action is not PlanAction.PATCH:
                    return plan
                detected, reported = list(self.detected), dict(self._reported)
                try:
                    return self._review(plan, copy.deepcopy(child) if child else _Child(), now,
                                        version, parent_uid=parent_uid)
                finally:
                    self.detected, self._reported = detected, reported
            if child is None:  # known only from a first patch on: steady children cost nothing
                if plan.action is not PlanAction.PATCH:
                    return plan
                child = self._children[key] = _Child()
            undos = len(child.undos)
            reviewed = self._review(plan, child, now, version, parent_uid=parent_uid)
            child.unsent = (reviewed.action is PlanAction.PATCH and child.contest is None
                            and len(child.undos) > undos)
            if reviewed.action is PlanAction.PATCH:
                child.written = _record(_mapping(reviewed.body))
            elif (child.contest is None and reviewed.action is PlanAction.UNCHANGED
                  and not (child.undos and now - child.undos[-1][0] <= self.settings.window)):
                del self._children[key]  # at rest: forgotten (its record with it)
            return reviewed

    # -- inside the lock --------------------------------------------------------------------

    def _review(self, plan: ChildPlan, child: _Child, now: float, version: str, *,
                parent_uid: str) -> ChildPlan:
        changed = version != child.seen_version
        if changed:
            child.seen_version, child.seen_at = version, now
        if not (undoes_drift(plan) or self._record_overwritten(plan, child)):
            return self._settled(plan, child, now)
        if changed:
            child.changes.append(now)
            child.changes_since_write += 1
        paths = drift_paths(plan)
        if child.contest is None:
            if version and version == child.undone_version:
                # The version an earlier round undid, seen again: that repair is not seen to
                # have landed (a stale cache after a relist, a re-plan on a fresh read of the
                # same version); no one changed the child back since, so no new round.
                return self._written(plan, child, now)
            child.undone_version = version
            return self._watch(plan, child, now, paths, parent_uid=parent_uid)
        return self._contested(plan, child, now, paths)

    @staticmethod
    def _record_overwritten(plan: ChildPlan, child: _Child) -> bool:
        """Whether someone else rewrote the last-applied record since the toolkit's last
        write (another copy of this operator building other values): its patch undoes that
        writer's change although the record differs from what is built now."""
        if plan.action is not PlanAction.PATCH or child.written is None:
            return False
        record = _record(plan.live)
        return record is not None and record not in (child.written,
                                                     _record(_mapping(plan.body)))

    def _settled(self, plan: ChildPlan, child: _Child, now: float) -> ChildPlan:
        """A plan that undoes nothing: a repair that held long enough ends the contest; one
        not yet held that long is looked at again when it has. That look was asked for only by
        the repair's own reconcile, so a reconcile in between (an event, a wait that changed)
        would drop it and leave ``Contested`` true until the periodic resync; each reconcile
        in the window asks again (the queue keeps one timer per parent)."""
        if (child.contest is not None and child.last_write is not None
                and plan.action is PlanAction.UNCHANGED):
            remaining = self._quiet(child) - (now - child.last_write)
            if remaining > 0:
                return attrs.evolve(plan, requeue_after=max(remaining, 0.01))
            child.contest, child.tries = None, 0
            child.undos.clear()
        return plan

    def _watch(self, plan: ChildPlan, child: _Child, now: float, paths: tuple[str, ...], *,
               parent_uid: str) -> ChildPlan:
        s = self.settings
        while child.undos and now - child.undos[0][0] > s.window:
            child.undos.popleft()
        child.undos.append((now, paths))
        undone = sum(1 for _, p in child.undos if set(p) & set(paths))
        if undone < s.threshold:
            return self._written(plan, child, now)
        found = other_writer(plan.live or {}, paths, ours=self.field_manager)
        manager, same = found or (_UNKNOWN, False)
        child.tries = 0
        child.next_try = now + s.backoff
        # The other writer's interval is measured from its changes during the contest: the
        # toolkit's own quick rounds before detection say nothing of it.
        child.changes = deque(list(child.changes)[-1:], maxlen=child.changes.maxlen)
        child.contest = Contest(parent_uid=parent_uid, ref=plan.ref, paths=paths, manager=manager,
                                same_manager=same, undone=undone, backoff=s.backoff,
                                named=found is not None)
        key = (parent_uid, plan.ref)
        last = self._reported.get(key)
        if last is None or now - last > s.max_backoff:  # one line per fight, not per round
            self._reported[key] = now
            self.detected.append(child.contest)
        return self._held(plan, child, now)

    def _contested(self, plan: ChildPlan, child: _Child, now: float,
                   paths: tuple[str, ...]) -> ChildPlan:
        assert child.contest is not None
        s = self.settings
        if (found := other_writer(plan.live or {}, paths, ours=self.field_manager)) is not None:
            child.contest = attrs.evolve(child.contest, manager=found[0], same_manager=found[1],
                                         named=True)
        if now < self._due(child):
            return self._held(plan, child, now)
        child.tries += 1
        wait = min(s.backoff * 2 ** child.tries, s.max_backoff)
        child.next_try = now + wait
        child.contest = attrs.evolve(child.contest, undone=child.contest.undone + 1,
                                     backoff=wait)
        return self._written(plan, child, now)

    def _written(self, plan: ChildPlan, child: _Child, now: float) -> ChildPlan:
        child.last_write = now
        child.changes_since_write = 0
        if child.contest is None:
            return plan
        return attrs.evolve(plan, requeue_after=self._quiet(child))  # see whether it holds

    def _held(self, plan: ChildPlan, child: _Child, now: float) -> ChildPlan:
        assert child.contest is not None
        # One wake, at the time the repair is due (held plans are decided by the same ``_due``):
        # never sooner, so a held child costs one reconcile per change of it and one per try.
        return attrs.evolve(
            plan, action=PlanAction.UNCHANGED, body=None, requeue=False,
            held=f"contested: {child.contest.describe()}", reason="contested: repair held back",
            drift=drift_paths(plan), requeue_after=max(self._due(child) - now, 0.01))

    def _due(self, child: _Child) -> float:
        """When a held repair goes out: at the next backoff try, or sooner once the child has
        stayed still for the quiet window since the other writer's last change (it stopped)."""
        if child.changes_since_write < 1:
            return child.next_try
        return min(child.next_try, child.seen_at + self._quiet(child))

    def _quiet(self, child: _Child) -> float:
        s = self.settings
        times = list(child.changes)
        gaps = [b - a for a, b in itertools.pairwise(times) if b > a]
        interval = sum(gaps) / len(gaps) if gaps else s.backoff  # unknown yet: the first wait
        return min(max(s.quiet_factor * interval, s.min_quiet), s.max_quiet)


def _mapping(body: Any) -> Mapping[str, Any] | None:
    """A plan's body when it is an object (a JSON patch list, as a strategy migration sends,
    carries no record)."""
    return body if isinstance(body, Mapping) else None


_record = applied_record  # the last-applied annotation, or the server-side apply digest


def _owns(fields: Any, path: Sequence[str]) -> bool:
    """Whether a ``FieldsV1`` tree names ``path`` (keys; a list index ends the walk)."""
    node = fields
    for key in path:
        if not isinstance(node, Mapping):
            return False
        if key.isdigit():
            return True  # list items are keyed by merge keys there: the list is enough
        if f"f:{key}" not in node:
            return False
        node = node[f"f:{key}"]
    return True


_UNKNOWN = "an unknown writer (the server records no managedFields for it)"


def other_writer(live: Mapping[str, Any], paths: Sequence[str], *,
                 ours: str) -> tuple[str, bool] | None:
    """The field manager that last wrote one of ``paths`` (JSON pointers) of ``live`` other than
    ``ours``, by ``metadata.managedFields``; ``(ours, True)`` when only ``ours`` holds them (a
    second process of this operator), a description when no entry names them; None when
    ``live`` has no ``managedFields`` (a cached copy: caches drop them)."""
    meta = live.get("metadata") or {}
    if not meta.get("managedFields"):
        return None
    entries = [e for e in meta.get("managedFields") or () if isinstance(e, Mapping)]
    split = [[t.replace("~1", "/").replace("~0", "~") for t in p[1:].split("/")]
             for p in paths]
    owners = [e for e in entries if any(_owns(e.get("fieldsV1"), p) for p in split)]
    others = sorted((e for e in owners if e.get("manager") != ours),
                    key=lambda e: str(e.get("time") or ""))
    if others:
        return str(others[-1].get("manager")), False
    if owners:
        return ours, True
    return _UNKNOWN, False
