"""The drift look: whether a reconcile of a parent would write a child, planned from the caches.

One question, asked by two parts: the standby (``reconciler._driver.standby``: at start, for the
children that drifted while no runtime watched them, and when a kind lists again) and the
workers (``reconciler._driver.workers``: when a sharded replica adopts a moved-in parent). It
builds the parent through the ``ParentReconciler`` and plans each child against the caches: no
request, no write. A function of its own so that neither part asks the other (issue 37: the
runtime's parts form a tree).
"""

from __future__ import annotations

import logging

from builders import ObjectRef
from reconciler._base.errors import KindUnlistableError
from reconciler._client.protocol import KubeObject
from reconciler._reconcile.declared import DeclaredChildren
from reconciler._reconcile.parents import ParentReconciler

__all__ = ["drifted"]

_log = logging.getLogger("optk.operator")


def drifted(reconciler: ParentReconciler, parent: KubeObject,
            declared: DeclaredChildren | None = None) -> bool:
    """Whether a reconcile of ``parent`` would write a child (planned from the caches, no
    request). A kind that cannot be listed counts as drift: the reconcile says why on the
    parent rather than leave it claiming its children are as desired. ``declared`` is what
    ``parent``'s builders declared, when the caller has it already (the start-up look builds
    each parent once, not twice)."""
    uid = str((parent.get("metadata") or {}).get("uid") or "")
    if declared is None:
        declared = reconciler.declared(parent)  # builders get a private copy
        for error in declared.errors:  # a failing build: its reconcile will say so
            _log.debug("drift check of %s: %s", ObjectRef.of(parent), error)
    try:
        for child in declared.children:
            if reconciler.resources.plan(child.obj, child.state, owner_uid=uid).writes:
                return True
    except KindUnlistableError as error:
        _log.debug("drift check of %s: %s", ObjectRef.of(parent), error)
        return True
    except Exception as error:  # a failing read: its reconcile will say so
        _log.debug("drift check of %s: %s", ObjectRef.of(parent), error)
        return False
    return False
