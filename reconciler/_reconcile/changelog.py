"""What a reconcile changed, as the one INFO line an operator logs for it.

A kopf user expects the operator to say what it does: one line per reconcile that changed
something (the children created, patched, recreated or deleted, with the fields each patch
changed), nothing at INFO when nothing changed. Only field paths are shown, never values, so a
Secret's data cannot reach the log. Pure: the worker (``reconciler._driver.workers``) logs the line.
"""

from __future__ import annotations

from objectmatcher import LAST_APPLIED_ANNOTATION
from reconciler._reconcile.parents import ParentResult
from reconciler._reconcile.reconciling import Action, ReconcileResult

__all__ = ["describe_changes"]

_ANNOTATION_PATH = ("metadata", "annotations", LAST_APPLIED_ANNOTATION)
_VERBS = {Action.CREATED: "created", Action.UPDATED: "patched",
          Action.RECREATED: "recreated", Action.DELETED: "deleted"}
_SHOWN_FIELDS = 6


def _fields(child: ReconcileResult) -> str:
    paths = list(dict.fromkeys(  # DiffItem.dotted_path: the paths `optk plan` prints too
        item.dotted_path for item in child.diff if tuple(item.path[:3]) != _ANNOTATION_PATH))
    if not paths:
        return ""
    more = f", +{len(paths) - _SHOWN_FIELDS} more" if len(paths) > _SHOWN_FIELDS else ""
    return f" ({', '.join(paths[:_SHOWN_FIELDS])}{more})"


def describe_changes(result: ParentResult) -> str | None:
    """``"created ConfigMap a-cfg; patched Deployment a (spec.replicas)"``, or None when the
    reconcile changed no child (a status-only write included)."""
    parts = [f"{_VERBS[child.action]} {child.ref.kind} {child.ref.name}{_fields(child)}"
             for child in (*result.children, *result.pruned) if child.action in _VERBS]
    return "; ".join(parts) or None
