"""The trigger rules: which watch events and which first sights call for a parent's reconcile.

Pure functions of objects (DESIGN.md section 6): a parent passes on creation, a
``metadata.generation`` change, deletion and the ``optk.dev/reconcile-requested-at``
annotation (``parent_event_triggers``); a parent seen for the first time is reconciled at once
when it was never reconciled, failed, changed or was asked to (``parent_needs_reconcile``); a
child's change passes unless it touched only ``status`` and server-maintained metadata
(``child_event_triggers``). Recognising the echo of the toolkit's own write is not here (that
needs the writes: ``reconciler._recording``); routing events to the queue is
``reconciler._routing``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler._clients import KubeObject
from reconciler._resyncs import last_reconcile_time
from reconciler._times import parse_time

__all__ = [
    "REQUESTED_AT_ANNOTATION",
    "ParentKey",
    "child_event_triggers",
    "meta_of",
    "parent_event_triggers",
    "parent_needs_reconcile",
]

REQUESTED_AT_ANNOTATION = "optk.dev/reconcile-requested-at"

ParentKey = tuple[str, str]
"""``(namespace, name)`` of a parent (namespace ``""`` for cluster-scoped parents)."""


_VOLATILE_META = ("resourceVersion", "managedFields", "generation")


def meta_of(obj: KubeObject | None) -> Mapping[str, Any]:
    """``obj``'s ``metadata`` mapping, empty when absent or malformed."""
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _annotation(obj: KubeObject | None, name: str) -> Any:
    return (meta_of(obj).get("annotations") or {}).get(name)


def parent_needs_reconcile(parent: KubeObject) -> bool:
    """Whether a parent seen for the first time must be reconciled regardless of its schedule.

    True when it was never reconciled, its last reconcile failed (its ``Reconciled`` condition
    is not true: failures are retried by backoff, off the periodic grid), its spec changed since
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
        if isinstance(condition, Mapping) and condition.get("type") == "Reconciled" and (
            condition.get("status") != "True"
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

    Creation, deletion, a ``metadata.generation`` change, a newly set ``deletionTimestamp`` and a
    change of the ``optk.dev/reconcile-requested-at`` annotation pass; so does any change outside
    ``metadata`` and ``status`` (the spec of a kind without a generation, such as a ConfigMap
    used as a parent). Status-only and other metadata changes do not.
    """
    if event_type in ("ADDED", "DELETED") or old is None:
        return True
    before, after = meta_of(old), meta_of(new)
    return (
        before.get("generation") != after.get("generation")
        or _content(old) != _content(new)
        or (after.get("deletionTimestamp") is not None and not before.get("deletionTimestamp"))
        or _annotation(old, REQUESTED_AT_ANNOTATION) != _annotation(new, REQUESTED_AT_ANNOTATION)
    )


def _content(obj: KubeObject) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _without_volatile(obj: KubeObject) -> dict[str, Any]:
    rest = {k: v for k, v in obj.items() if k != "status"}
    rest["metadata"] = {k: v for k, v in meta_of(obj).items() if k not in _VOLATILE_META}
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
