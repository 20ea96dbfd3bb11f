"""What a parent's reconcile says about it: status conditions and Events, decided in pure code.

From the children's results and errors of one parent reconcile, :func:`parent_conditions` makes the
``Reconciled`` and ``Ready`` conditions (with ``observedGeneration``), :func:`merge_conditions`
merges them into the parent's existing conditions (transition times kept unless a status flips),
:func:`status_patch` decides whether the status needs writing at all (only on a change, or when
the optional refresh period is over) and what to write, and :func:`parent_events` groups the
outcome into the few Events people read (one per kind of change, one warning for failures). No
I/O: ``reconciler._reconcile.parents`` sends what these functions return.

A change the server refuses on an immutable field (``ImmutableFieldError``: recreation is off or
not allowed for the kind) gets its own reason, ``ImmutableFieldChanged``, on both conditions and
on the Warning, naming the child, the field(s) and the server's reason, and what the parent's
owner can do about it (never the operator's own ``recreate`` switch, which only its author can
turn).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from builders import InvalidSpecError, ObjectRef
from builders.helm import ChartHookError, ChartRenderError
from builders.inputs import InputUnavailableError
from reconciler._base.errors import ApiError, PermanentError, PolicyAnnotationError
from reconciler._base.text import bounded
from reconciler._base.times import format_time, parse_time
from reconciler._client.counting import ApiCall
from reconciler._reconcile.reconciling import Action, ImmutableFieldError, ReconcileResult
from reconciler._reconcile.waits import Wait, waiting_message

__all__ = [
    "ChildError",
    "ParentEvent",
    "ParentResult",
    "caused_by",
    "described",
    "error_message",
    "failure_reason",
    "merge_conditions",
    "parent_conditions",
    "parent_events",
    "pending_children",
    "permanent_cause",
    "prune_conditions",
    "status_patch",
    "with_progress",
]

_EVENT_REASONS = {
    Action.CREATED: "Created",
    Action.UPDATED: "Updated",
    Action.RECREATED: "Recreated",
    Action.DELETED: "Deleted",
}


@attrs.frozen(kw_only=True)
class ChildError:
    """One child that could not be reconciled, and why."""

    ref: ObjectRef
    message: str
    error: BaseException = attrs.field(eq=False, repr=False)

    @property
    def retry_after(self) -> float | None:
        """The server's ``Retry-After`` when it throttled this child's request."""
        return self.error.retry_after if isinstance(self.error, ApiError) else None

    @property
    def permanent(self) -> bool:
        """Whether retrying cannot help until the parent changes (``permanent_cause``)."""
        return permanent_cause(self.error) is not None


_Permanent = (PermanentError | InvalidSpecError | InputUnavailableError | PolicyAnnotationError
              | ChartRenderError | ChartHookError)
_CHART_FAILED = "ChartRenderFailed"
"""The reason of a parent whose Helm chart does not render (``builders.helm``): the same chart
and values fail the same way, so the parent's own change, not a retry, reconciles it again."""


def permanent_cause(error: BaseException | None) -> _Permanent | None:
    """The ``PermanentError``, ``InvalidSpecError``, ``InputUnavailableError`` (a declared
    input missing or forbidden: the input's own change, not a retry, reconciles the parent
    again), ``PolicyAnnotationError`` (a child's annotation: its own change reconciles the
    parent) or ``ChartRenderError``/``ChartHookError`` (a chart that does not render with the
    parent's values) that ``error`` is or was caused by (a builder's exception arrives wrapped in
    ``BuilderFailedError``), or None."""
    found = caused_by(error, _Permanent)
    return found if isinstance(found, _Permanent) else None


def caused_by(error: BaseException | None, kind: Any) -> BaseException | None:
    """The exception of class ``kind`` (a class, a tuple or union of classes) that ``error``
    is or was caused by (``__cause__``, else ``__context__``), or None."""
    seen = 0
    while error is not None and seen < 16:  # bounded: a cycle of causes is possible
        if isinstance(error, kind):
            found: BaseException = error
            return found
        error, seen = error.__cause__ or error.__context__, seen + 1
    return None


def _permanent_reason(errors: Sequence[ChildError]) -> str:
    cause = permanent_cause(errors[0].error)
    if isinstance(cause, PermanentError | InputUnavailableError | PolicyAnnotationError):
        return cause.reason  # InputMissing, InvalidAnnotation, ... name their reason themselves
    if isinstance(cause, ChartRenderError | ChartHookError):
        return _CHART_FAILED
    return "InvalidSpec"


@attrs.frozen(kw_only=True)
class ParentEvent:
    """One Event to record on the parent."""

    reason: str
    message: str
    type: str = "Normal"


def _condition(
    type_: str, ok: bool, *, reason: str, message: str, generation: Any
) -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": bounded(message),
        "observedGeneration": generation,
    }


def failure_reason(errors: Sequence[ChildError]) -> str:
    """The reason of a failed reconcile: ``ImmutableFieldChanged`` when every failure is a
    refused change of an immutable field, the permanent error's reason (``PermanentError``,
    ``InvalidSpec``) when every failure is permanent, else ``ChildrenFailed``."""
    if errors and all(isinstance(e.error, ImmutableFieldError) for e in errors):
        return "ImmutableFieldChanged"
    if errors and all(e.permanent for e in errors):
        return _permanent_reason(errors)
    return "ChildrenFailed"


def error_message(error: ChildError) -> str:
    """What the parent's owner reads about one failed child; for a refused immutable change,
    the field(s) the server keeps, its reason (which says what may change), and the two things
    the owner can do (revert the change, or delete the child so that it is created anew). The
    operator's own switch (``recreate=True``) is its author's: it stays in the log and the
    exception."""
    exc = error.error
    if not isinstance(exc, ImmutableFieldError):
        return error.message
    why = "; ".join(sorted({c.message for c in exc.causes if c.field in exc.fields
                            and c.message})) or exc.reason
    kind, name, fields = error.ref.kind, error.ref.name, ", ".join(exc.fields)
    return (
        f"the change of {fields} cannot be applied to the existing {kind} ({why}); to apply "
        f"it, delete {kind} {name} (it is created again with the change), or revert the change "
        f"in the parent's spec; retried with backoff until then"
    )


def described(error: ChildError) -> str:
    """One child error as listed: ``<child>: <why>``, or the message alone for a build or a
    builder (a reference without an apiVersion: its message names it,
    ``reconciler._reconcile.failures``)."""
    text = error_message(error)
    return text if not error.ref.api_version else f"{error.ref}: {text}"


def pending_children(results: Sequence[ReconcileResult]) -> list[ReconcileResult]:
    """The results that keep a parent from being ready: waiting (a requeue) or skipped."""
    return [r for r in results if r.requeue_after is not None or r.action is Action.SKIPPED]


def parent_conditions(
    *, generation: Any, errors: Sequence[ChildError], pending: Sequence[ReconcileResult],
    children: int, waiting: Sequence[Wait] = (),
) -> list[dict[str, Any]]:
    """The ``Reconciled``, ``Ready``, ``Reconciling`` and ``Stalled`` conditions for one outcome
    (without transition times).

    ``Reconciled`` says whether every child was applied: a child skipped because it is not ours
    was not (reason ``ChildrenSkipped``, the message says what the user can do). ``Ready``
    additionally needs nothing pending: no child waiting for a deletion to finish (reason
    ``ChildrenPending``). Messages list the per-child errors and reasons. The reason is the
    first there is of a failure, a wait on dependencies, a skip; the message also lists the
    later ones (a child failed and another waits: both are said, so that fixing one does not
    reveal the other only then). ``Reconciling`` and ``Stalled`` make the status
    kstatus-readable (``with_progress``).
    """
    skipped = [r for r in pending if r.requeue_after is None]
    skipped_text = "; ".join(f"{r.ref}: {r.reason}" for r in skipped)
    if errors:
        # what else keeps the parent from ready is said too: fixing the failure alone would
        # not make it ready (found by the server-side-apply machine's soak, session 15)
        listed = "; ".join(described(e) for e in errors)
        message = f"{len(errors)} of {children} children failed: {listed}"
        if waiting:
            message += f"; {waiting_message(waiting)}"
        if skipped:
            message += (f"; {len(skipped)} of {children} children skipped, not ours: "
                        f"{skipped_text}")
        reason = failure_reason(errors)
        return with_progress([
            _condition("Reconciled", False, reason=reason, message=message,
                       generation=generation),
            _condition("Ready", False, reason=reason, message=message,
                       generation=generation),
        ], generation=generation, permanent=all(e.permanent for e in errors))
    if waiting:  # children held back by their dependencies (reconciler._reconcile.ordering)
        message = waiting_message(waiting)
        if skipped:
            message += (f"; {len(skipped)} of {children} children skipped, not ours: "
                        f"{skipped_text}. {_SKIPPED_HINT}")
        return with_progress([
            _condition(type_, False, reason=waiting[0].reason, message=message,
                       generation=generation) for type_ in ("Reconciled", "Ready")
        ], generation=generation, permanent=False)
    if skipped:
        message = (f"{len(skipped)} of {children} children skipped, not ours: {skipped_text}. "
                   f"{_SKIPPED_HINT}")
        reconciled = _condition("Reconciled", False, reason="ChildrenSkipped", message=message,
                                generation=generation)
    else:
        reconciled = _condition(
            "Reconciled", True, reason="ReconcileSucceeded",
            message=f"all {children} children reconciled", generation=generation,
        )
    if pending:
        listed = "; ".join(f"{r.ref}: {r.reason}" for r in pending)
        ready = _condition(
            "Ready", False, reason="ChildrenSkipped" if skipped else "ChildrenPending",
            message=reconciled["message"] if skipped else listed,
            generation=generation,
        )
    else:
        ready = _condition("Ready", True, reason="ChildrenReady",
                           message=f"all {children} children are as desired", generation=generation)
    return with_progress([reconciled, ready], generation=generation, permanent=False)


_SKIPPED_HINT = (
    "The toolkit changes only objects it owns (a controller owner reference to this parent, or "
    "its optk.dev/last-applied annotation): delete the object to have it created as this "
    "parent's, or annotate it with optk.dev/last-applied (any value) to hand it over; one held "
    "by another parent becomes this parent's when that one releases or deletes it."
)

PROGRESS_CONDITIONS = ("Reconciling", "Stalled")
STALLED_REASONS = frozenset({"ChildrenSkipped", "ImmutableFieldChanged", "ChildrenUnhealthy"})
"""``Ready`` reasons that no retry clears: only a change by someone (the parent, the object in
the way, the child's own controller) does; ``Stalled`` is True for them."""


def with_progress(
    conditions: Sequence[Mapping[str, Any]], *, generation: Any, permanent: bool,
) -> list[dict[str, Any]]:
    """``conditions`` with fresh ``Reconciling`` and ``Stalled`` conditions (kstatus' pair,
    "abnormal when True"), decided from the ``Ready`` among them: Ready True is neither;
    Ready False is ``Stalled`` when ``permanent`` or for a reason of :data:`STALLED_REASONS`,
    else ``Reconciling`` (retried, waiting, rolling out). Both carry Ready's reason and message
    and ``observedGeneration``, so ``builders.health.health_of`` reads the parent as Current,
    InProgress or Failed."""
    kept = [dict(c) for c in conditions if c.get("type") not in PROGRESS_CONDITIONS]
    ready = next((c for c in kept if c.get("type") == "Ready"), None)
    reason = str((ready or {}).get("reason") or "")
    message = str((ready or {}).get("message") or "")
    if ready is None or ready.get("status") == "True":
        return [*kept,
                _condition("Reconciling", False, reason="ReconcileSucceeded",
                           message="the last reconcile converged", generation=generation),
                _condition("Stalled", False, reason="ReconcileSucceeded", message="",
                           generation=generation)]
    stalled = permanent or reason in STALLED_REASONS
    return [*kept,
            _condition("Reconciling", not stalled,
                       reason="Stalled" if stalled else reason, message=message,
                       generation=generation),
            _condition("Stalled", stalled, reason=reason if stalled else "Progressing",
                       message=message if stalled else "", generation=generation)]


PRUNE_BLOCKED = "PruneBlocked"
"""The condition of a parent whose pruning of a kind is blocked (the kind cannot be listed)."""


def prune_conditions(parent: Mapping[str, Any],
                     blocked: Sequence[ChildError]) -> list[dict[str, Any]]:
    """``PruneBlocked`` True (reason ``KindUnlistable``, naming each kind and why) while a
    prune kind this parent built nothing of cannot be listed: the parent is otherwise
    reconciled (``Ready`` may be True), and is looked at again when the kind lists
    (``reconciler._driver.triggers.parent_needs_reconcile`` reads the condition); False
    (``PruneAllowed``) once it can, where it was True; nothing where it never was."""
    meta = parent.get("metadata")
    generation = meta.get("generation") if isinstance(meta, Mapping) else None
    if blocked:
        kinds = ", ".join(dict.fromkeys(f"{b.ref.kind} {b.ref.api_version}" for b in blocked))
        why = "; ".join(dict.fromkeys(str(b.error) for b in blocked))
        return [_condition(PRUNE_BLOCKED, True, reason="KindUnlistable", generation=generation,
                           message=f"pruning {kinds} is blocked (the other children are "
                           f"reconciled; pruning resumes when it lists): {why}")]
    status = parent.get("status")
    before = [c for c in (status.get("conditions") if isinstance(status, Mapping) else None)
              or () if isinstance(c, Mapping) and c.get("type") == PRUNE_BLOCKED]
    if before and before[0].get("status") == "True":
        return [_condition(PRUNE_BLOCKED, False, reason="PruneAllowed", generation=generation,
                           message="every prune kind can be listed")]
    return []


def merge_conditions(
    existing: Any, wanted: Sequence[Mapping[str, Any]], now: str
) -> tuple[list[dict[str, Any]], bool]:
    """Existing conditions with ours replaced (transition time kept unless the status flips),
    and whether anything changed."""
    old = [dict(c) for c in existing or () if isinstance(c, Mapping)]
    by_type = {c.get("type"): c for c in old}
    changed = False
    merged_ours: dict[Any, dict[str, Any]] = {}
    for cond in wanted:
        before = by_type.get(cond["type"])
        new = dict(cond)
        if before is not None and before.get("status") == cond["status"]:
            new["lastTransitionTime"] = before.get("lastTransitionTime") or now
        else:
            new["lastTransitionTime"] = now
        if before is None or any(before.get(k) != v for k, v in new.items()):
            changed = True
        merged_ours[cond["type"]] = new
    result = [merged_ours.pop(c.get("type")) if c.get("type") in merged_ours else c for c in old]
    result.extend(merged_ours.values())
    return result, changed


def status_patch(
    *,
    parent: Mapping[str, Any],
    results: Sequence[ReconcileResult],
    errors: Sequence[ChildError],
    children: int,
    now: float,
    refresh: float | None = None,
    waiting: Sequence[Wait] = (),
) -> dict[str, Any] | None:
    """The merge patch of the parent's status after one reconcile, or None when nothing changed.

    ``results`` are every child's and pruned object's results, ``children`` how many children
    were built (failed ones included). The status is written when its conditions or
    ``observedGeneration`` change, when it has no readable ``lastReconcileTime``, or (with
    ``refresh`` seconds) when that time is older than ``refresh``.
    """
    meta = parent.get("metadata")
    generation = meta.get("generation") if isinstance(meta, Mapping) else None
    wanted = parent_conditions(
        generation=generation, errors=errors, pending=pending_children(results),
        children=children, waiting=waiting,
    )
    current = parent.get("status")
    current = current if isinstance(current, Mapping) else {}
    conditions, changed = merge_conditions(current.get("conditions"), wanted, format_time(now))
    last = parse_time(current.get("lastReconcileTime"))
    stale = last is None or (refresh is not None and now - last >= refresh)
    if not changed and current.get("observedGeneration") == generation and not stale:
        return None
    return {"status": {
        "observedGeneration": generation,
        "lastReconcileTime": format_time(now),
        "conditions": conditions,
    }}


_ORIGINAL_MEANING = {
    "unreadable": "corrupt, oversized or too deeply nested",
    "foreign": "it records another object",
}


def parent_events(
    results: Sequence[ReconcileResult], errors: Sequence[ChildError]
) -> list[ParentEvent]:
    """The Events one parent reconcile produces: one per kind of change naming every child it
    concerns (aggregated as Kubernetes' own event correlator would, so a thousand creates are
    not a thousand Events), in order of first occurrence; then a Warning listing the failed
    children. Messages name objects and actions only, never field values."""
    changes: dict[str, list[ObjectRef]] = {}
    for result in results:
        reason = _EVENT_REASONS.get(result.action)
        if reason:
            changes.setdefault(reason, []).append(result.ref)
    events = []
    for reason, refs in changes.items():
        what = "child" if len(refs) == 1 else f"{len(refs)} children"
        events.append(ParentEvent(
            reason=reason, message=f"{reason} {what}: " + ", ".join(str(r) for r in refs),
        ))
    for result in results:
        if result.original_status in ("unreadable", "foreign"):
            events.append(ParentEvent(
                reason="LastAppliedUnreadable", type="Warning",
                message=f"child {result.ref}: its last-applied annotation was "
                f"{result.original_status} ({_ORIGINAL_MEANING[result.original_status]}); "
                "it was compared two-way and patched from the desired object",
            ))
    events += [ParentEvent(reason="FieldConflict", type="Warning", message=f"child {r.ref}: "
                           + ", ".join(f'{f} is owned by "{m}"' for f, m in r.conflicts)
                           + "; not written (server-side apply without force)")
               for r in results if r.conflicts]
    if errors:
        reason = failure_reason(errors)
        events.append(ParentEvent(
            reason="ReconcileError" if reason == "ChildrenFailed" else reason, type="Warning",
            message=f"{len(errors)} children failed: "
            + "; ".join(described(e) for e in errors),
        ))
    return events


@attrs.frozen(kw_only=True)
class ParentResult:
    """The outcome of one parent reconcile: per child, pruned objects, status, requeue."""

    parent: ObjectRef
    children: tuple[ReconcileResult, ...] = ()
    pruned: tuple[ReconcileResult, ...] = ()
    errors: tuple[ChildError, ...] = ()
    status_written: bool = False
    status_error: str = ""
    api_calls: tuple[ApiCall, ...] = ()
    """Every request of this reconcile: lists, child reads and writes, status, events."""
    requeue_after: float | None = None
    """Seconds until the parent should be reconciled again (a child asked, or was throttled)."""
    dry_run: bool = False
    """True when nothing was written (no child, Event or status): a plan of what would be."""
    namespace_terminating: bool = False
    """The namespace is being deleted (a create got 403 ``NamespaceTerminating`` or 404 for the
    namespace): the reconcile stopped, wrote nothing more, and later ones return at once."""
    waiting: tuple[Wait, ...] = ()
    """Children held back by their dependencies, each with what it waits on
    (``reconciler._reconcile.ordering``); the parent's conditions name them."""
    parent_gone: bool = False
    """The parent went away during the reconcile (a write for it was answered 404, or the
    driver's cache saw it deleted or being deleted): the reconcile stopped before writing
    anything more for it; the driver drops it (or runs its cleanup)."""
    paused: str = ""
    """Why the parent is paused (``reconciler._reconcile.policies``): nothing but the status
    condition that says so was written, or "" when it is not paused."""
    prune_blocked: tuple[ChildError, ...] = ()
    """Prune kinds that cannot be listed (``KindUnlistableError``, one ref per kind and
    namespace, without a name) and of which this parent built nothing: not a failure, its
    ``PruneBlocked`` condition says so (:func:`prune_conditions`)."""
    placed: frozenset[ObjectRef] = frozenset()
    """The children placed in other clusters (``builders.placed``): their results say their
    cluster; their waits and errors are theirs too, so the driver watches none of them at home."""

    @property
    def ok(self) -> bool:
        """True when every child was reconciled and the status written (if needed)."""
        return not (self.errors or self.status_error or self.namespace_terminating
                    or self.parent_gone)

    @property
    def permanent(self) -> bool:
        """Whether the reconcile failed only for permanent errors (``PermanentError``,
        ``InvalidSpecError``): no retry helps until the parent changes."""
        return bool(self.errors) and not self.status_error and all(
            e.permanent for e in self.errors)

    @property
    def requeue(self) -> bool:
        """Whether a later reconcile was asked for (errors aside: the driver backs off on those)."""
        return self.requeue_after is not None

    @property
    def writes(self) -> int:
        """Write requests made (create, patch, update, delete), events and status included."""
        return sum(1 for c in self.api_calls if c.verb in ("create", "patch", "update", "delete"))
