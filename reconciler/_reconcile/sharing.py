"""Who holds a child without an owner reference, and the record of a shared child, in pure code.

A child the garbage collector cannot collect with its parent (cluster-scoped, or in another
namespace) has no owner reference; two parents that build the same one (a CRD, a ClusterRole)
used to relabel it as their own on every reconcile, and deleting one of them looped against the
other. Two rules now (docs/builders.md, "Shared children"):

- **Exclusive** (the default): such a child belongs to the parent its ``optk.dev/owner-uid`` label
  names. Another parent that builds it skips it and names the holder from the
  :data:`OWNER_ANNOTATION` the holder stamped (``Kind namespace/name``); it is woken when the
  child's ownership markers change (:func:`ownership_marker`), e.g. when the holder's cleanup
  deletes or releases it.
- **Shared** (``builders.shared``): the child carries the label ``optk.dev/shared: "true"``, no
  owner label, and the parents that build it in the :data:`SHARED_BY_ANNOTATION` (a JSON object
  ``{uid: "Kind namespace/name"}``, at most :data:`MAX_SHARERS` entries, written by JSON patches
  preconditioned on the ``resourceVersion``). A parent adds itself before writing it, removes
  itself when it no longer wants it, and only the last one deletes it.

And one rule for a child the toolkit must never delete: marked :data:`KEEP_ANNOTATION` ``keep``
(Helm's resource policy; ``builders.helm`` puts it on a chart's ``crds/``), it is released
instead (:func:`keep_patch`: its owner label, owner annotation and owner reference to the parent
removed) wherever it would be deleted: no longer built, torn down, cleaned up.

Boundary: decisions and patch bodies only; ``planning`` plans with them, ``cleanups`` and
``parents`` send them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from builders.helm import KEEP_ANNOTATION
from builders.names import INSTANCE_LABEL, MANAGED_BY_LABEL, OWNER_UID_LABEL, SHARED_LABEL
from objectmatcher import LAST_APPLIED_ANNOTATION
from reconciler._base.keys import meta_of
from reconciler._reconcile.applying import APPLIED_DIGEST_ANNOTATION

__all__ = [
    "KEEP_ANNOTATION",
    "MAX_SHARERS",
    "OWNER_ANNOTATION",
    "SHARED_BY_ANNOTATION",
    "describe_parent",
    "holder_of",
    "is_kept",
    "is_shared",
    "keep_patch",
    "ownership_marker",
    "record_patch",
    "release_patch",
    "shared_record",
    "wants_shared",
]

OWNER_ANNOTATION: Final = "optk.dev/owner"
"""On a child without an owner reference: ``Kind namespace/name`` of the parent holding it."""
SHARED_BY_ANNOTATION: Final = "optk.dev/shared-by"
"""On a shared child: the parents building it, a JSON object ``{uid: "Kind namespace/name"}``."""
MAX_SHARERS: Final = 64
"""The most parents a shared child records (the annotation stays under 32 KiB); another parent
waits for a place, reported on its ``Reconciled`` condition."""


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def describe_parent(parent: Mapping[str, Any]) -> str:
    """``Kind namespace/name`` (``Kind name`` when cluster-scoped) of a parent."""
    meta = meta_of(parent)
    where = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") \
        else str(meta.get("name"))
    return f"{parent.get('kind')} {where}"


def is_shared(obj: Mapping[str, Any] | None) -> bool:
    """Whether ``obj`` (built or live) is declared shared (``optk.dev/shared: "true"``)."""
    return str((meta_of(obj).get("labels") or {}).get(SHARED_LABEL, "")).lower() == "true"


def wants_shared(desired: Mapping[str, Any]) -> dict[str, Any]:
    """A shared built child as every parent builds it alike: without the per-parent marks (the
    owner and instance labels, the owner annotation, owner references)."""
    meta = dict(meta_of(desired))
    meta["labels"] = {k: v for k, v in (meta.get("labels") or {}).items()
                      if k not in (OWNER_UID_LABEL, INSTANCE_LABEL)}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k != OWNER_ANNOTATION}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    meta.pop("ownerReferences", None)
    return {**desired, "metadata": meta}


def shared_record(obj: Mapping[str, Any] | None) -> dict[str, str]:
    """The parents a shared child records, ``{uid: "Kind namespace/name"}`` (empty when none
    or unreadable)."""
    raw = (meta_of(obj).get("annotations") or {}).get(SHARED_BY_ANNOTATION)
    try:
        value = json.loads(str(raw)) if raw else {}
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def record_patch(live: Mapping[str, Any], record: Mapping[str, str]) -> list[dict[str, Any]]:
    """The JSON patch that sets ``live``'s record to ``record``, preconditioned on its
    ``resourceVersion`` (a concurrent change of the record fails with a conflict: re-read)."""
    meta = meta_of(live)
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/resourceVersion",
                                  "value": str(meta.get("resourceVersion"))}]
    if not isinstance(meta.get("annotations"), Mapping):
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
    ops.append({"op": "add", "path": f"/metadata/annotations/{_pointer(SHARED_BY_ANNOTATION)}",
                "value": json.dumps(dict(sorted(record.items())), separators=(",", ":"))})
    return ops


def release_patch(live: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSON patch by which a parent being deleted lets another one take ``live`` over: its
    owner label and owner annotation removed, preconditioned on the ``resourceVersion``."""
    meta = meta_of(live)
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/resourceVersion",
                                  "value": str(meta.get("resourceVersion"))}]
    if OWNER_UID_LABEL in (meta.get("labels") or {}):
        ops.append({"op": "remove", "path": f"/metadata/labels/{_pointer(OWNER_UID_LABEL)}"})
    if OWNER_ANNOTATION in (meta.get("annotations") or {}):
        ops.append({"op": "remove",
                    "path": f"/metadata/annotations/{_pointer(OWNER_ANNOTATION)}"})
    return ops


def is_kept(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is marked never to be deleted (:data:`KEEP_ANNOTATION` ``keep``)."""
    return (meta_of(obj).get("annotations") or {}).get(KEEP_ANNOTATION) == "keep"


def keep_patch(live: Mapping[str, Any], owner_uid: str) -> list[dict[str, Any]]:
    """The JSON patch that lets a kept child go instead of deleting it: :func:`release_patch`
    and the owner references to the parent ``owner_uid`` removed (so the garbage collector
    leaves it too)."""
    ops = release_patch(live)
    references = meta_of(live).get("ownerReferences") or []
    for index in reversed(range(len(references))):
        if isinstance(references[index], Mapping) and references[index].get("uid") == owner_uid:
            ops.append({"op": "remove", "path": f"/metadata/ownerReferences/{index}"})
    return ops


def holder_of(live: Mapping[str, Any]) -> str:
    """The parent holding ``live`` for messages: its owner annotation (``Kind ns/name``) and
    uid, or the uid and instance label of an object stamped before the annotation existed."""
    meta = meta_of(live)
    labels = meta.get("labels") or {}
    uid = labels.get(OWNER_UID_LABEL)
    named = (meta.get("annotations") or {}).get(OWNER_ANNOTATION)
    if named:
        return f"{named} (uid {uid})"
    return f"the parent with uid {uid} (instance {labels.get(INSTANCE_LABEL)!r})"


def ownership_marker(obj: Mapping[str, Any] | None) -> str:
    """What decides whose ``obj`` is, as one string: a parent that skipped it as not its own
    is woken when this changes (deleted, handed over, released, shared)."""
    meta = meta_of(obj)
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    controllers = sorted(str(r.get("uid")) for r in meta.get("ownerReferences") or ()
                         if isinstance(r, Mapping) and r.get("controller"))
    return json.dumps([labels.get(OWNER_UID_LABEL), labels.get(MANAGED_BY_LABEL),
                       labels.get(SHARED_LABEL), controllers,
                       LAST_APPLIED_ANNOTATION in annotations,
                       APPLIED_DIGEST_ANNOTATION in annotations,
                       annotations.get(SHARED_BY_ANNOTATION)])
