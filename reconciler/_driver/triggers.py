"""The trigger rules: which watch events and which first sights call for a parent's reconcile.

Pure functions of objects (DESIGN.md section 6): a parent passes on creation, deletion and any
change but one of ``status`` and server-maintained metadata only, labels and annotations
included, since a builder may read them (``parent_event_triggers``); a parent seen for the
first time is reconciled at once when it was never reconciled, failed, changed or was asked
to (``parent_needs_reconcile``); a child's change passes unless it touched only ``status`` and
server-maintained metadata (``child_event_triggers``). Recognising the echo of the toolkit's
own write is not here (that needs the writes: ``reconciler._cache.recording``); routing events to
the queue is ``reconciler._driver.routing``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler._base.keys import ParentKey, meta_of
from reconciler._base.times import parse_time
from reconciler._client.protocol import KubeObject
from reconciler._driver.resyncs import last_reconcile_time
from reconciler._reconcile.conditions import PRUNE_BLOCKED

CONTESTED = "Contested"
"""The condition a contested child sets on its parent (``reconciler._reconcile.interventions``)."""

__all__ = [
    "REQUESTED_AT_ANNOTATION",
    "ParentKey",
    "child_event_triggers",
    "meta_of",
    "parent_event_triggers",
    "parent_needs_reconcile",
]

REQUESTED_AT_ANNOTATION = "optk.dev/reconcile-requested-at"

_VOLATILE_META = ("resourceVersion", "managedFields", "generation")
_PARENT_VOLATILE_META = ("resourceVersion", "managedFields")


def _annotation(obj: KubeObject | None, name: str) -> Any:
    return (meta_of(obj).get("annotations") or {}).get(name)


def parent_needs_reconcile(parent: KubeObject) -> bool:
    """Whether a parent seen for the first time must be reconciled regardless of its schedule.

    True when it was never reconciled, its last reconcile failed (its ``Reconciled`` condition
    is not true: failures are retried by backoff, off the periodic grid), its pruning was
    blocked (``PruneBlocked`` true: a prune kind could not be listed), a child was contested
    (``Contested`` true: the held repair and the quiet-window check are timers of the runtime
    that wrote it, gone with it; without a look now the condition would stay until the periodic
    resync), its spec changed since
    (``observedGeneration``), it is being deleted, or a manual trigger is newer than its last
    reconcile.
    """
    meta = meta_of(parent)
    status = parent.get("status")
    status = status if isinstance(status, Mapping) else {}
    last = last_reconcile_time(parent)
    if last is None or meta.get("deletionTimestamp"):
        return True
    conditions = status.get("conditions")
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping) and (
            (condition.get("type") == "Reconciled" and condition.get("status") != "True")
            or (condition.get("type") in (PRUNE_BLOCKED, CONTESTED)
                and condition.get("status") == "True")
        ):
            return True
    if meta.get("generation") is not None and status.get("observedGeneration") != meta.get(
        "generation"
    ):
        return True
    requested = parse_time(_annotation(parent, REQUESTED_AT_ANNOTATION))
    return requested is not None and requested > last


def parent_event_triggers(
    event_type: str, new: KubeObject, *, old: KubeObject | None = None
) -> bool:
    """Whether a parent's watch event (not the toolkit's own write) calls for a reconcile.

    A pure builder may read the whole parent, so every change passes (spec, labels, annotations,
    owner references, finalizers, a newly set ``deletionTimestamp``, the
    ``optk.dev/reconcile-requested-at`` annotation) except one that touched only ``status`` and
    server-maintained metadata (``resourceVersion``, ``managedFields``). The echo of the
    toolkit's own write (its status, its finalizer) is dropped before this rule, by
    ``RecordingClient``.
    """
    if event_type in ("ADDED", "DELETED") or old is None:
        return True
    return _without_volatile(old, _PARENT_VOLATILE_META) != _without_volatile(
        new, _PARENT_VOLATILE_META
    )


def _without_volatile(
    obj: KubeObject, volatile: tuple[str, ...] = _VOLATILE_META
) -> dict[str, Any]:
    rest = {k: v for k, v in obj.items() if k != "status"}
    rest["metadata"] = {k: v for k, v in meta_of(obj).items() if k not in volatile}
    return rest


def child_event_triggers(
    event_type: str, new: KubeObject, *, old: KubeObject | None = None
) -> bool:
    """Whether a child's watch event (not the toolkit's own write) calls for its parent's reconcile.

    Every creation, deletion and change passes (a user's edit of a labelled ConfigMap included)
    except one that touched only ``status`` and server-maintained metadata.
    """
    if event_type != "MODIFIED" or old is None:
        return True
    return _without_volatile(old) != _without_volatile(new)
