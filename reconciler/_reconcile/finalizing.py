"""The cleanup finalizer's lifecycle, decided in pure code.

The garbage collector deletes a child when its owner goes only when the child carries an owner
reference, and Kubernetes allows one only when the owner is cluster-scoped or in the child's
namespace. A namespaced parent's cluster-scoped children (ClusterRole, ClusterRoleBinding, CRD) and
its children in other namespaces would leak. For those, and for an ``Operator.on_delete`` hook,
the toolkit keeps one finalizer of its own (:data:`CLEANUP_FINALIZER`) on the parent: added before
such children are created, and removed once the parent is being deleted and they are gone (and
the hook has succeeded). The kinds to look for are kept on the parent in the
:data:`CLEANUP_KINDS_ANNOTATION` annotation, written with the finalizer, so a cleanup never depends
on what today's builders build.

This module only decides (:func:`decide_cleanup`, :func:`needs_cleanup`, :func:`finalizer_patch`,
:func:`cleanup_condition`, :func:`refuses_data_loss`); ``reconciler._reconcile.cleanups`` reads and
writes. A parent without such children and without ``on_delete`` never gets the finalizer: no extra
write.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import attrs

from builders import ObjectRef
from builders.names import MANAGED_BY_LABEL, OWNER_UID_LABEL, label_value
from reconciler._base.keys import meta_of
from reconciler._base.text import bounded

__all__ = [
    "ALLOW_DATA_LOSS_ANNOTATION",
    "CLEANUP_FINALIZER",
    "CLEANUP_KINDS_ANNOTATION",
    "CleanupDecision",
    "CleanupStep",
    "cleanup_condition",
    "cleanup_kinds",
    "crd_resource_types",
    "decide_cleanup",
    "finalizer_patch",
    "has_finalizer",
    "is_uncollectable",
    "managed_selector",
    "needs_cleanup",
    "owner_selector",
    "parse_kinds",
    "refuses_data_loss",
]

CLEANUP_FINALIZER = "optk.dev/cleanup"
"""The toolkit's one finalizer: the parent waits for its uncollectable children, ``on_delete``."""

CLEANUP_KINDS_ANNOTATION = "optk.dev/cleanup-kinds"
"""On the parent: the ``apiVersion/Kind`` list (comma separated) its cleanup looks for."""

ALLOW_DATA_LOSS_ANNOTATION = "optk.dev/allow-data-loss"
"""On a CRD child: ``"true"`` lets the toolkit delete it while custom resources of it remain."""

CRD_API_VERSION = "apiextensions.k8s.io/v1"
CRD_KIND = "CustomResourceDefinition"


class CleanupStep(enum.Enum):
    """What to do about the cleanup finalizer of one parent now."""

    NONE = "none"
    """Nothing: no finalizer is needed, or it is there already."""
    ADD = "add"
    """Add the finalizer (and the kinds annotation) before creating the children."""
    DELETE_CHILDREN = "delete_children"
    """The parent is being deleted and uncollectable children of it remain: delete them."""
    WAIT = "wait"
    """Deletes were sent; the children are still there (finalizers of theirs): look again later."""
    RUN_ON_DELETE = "run_on_delete"
    """The children are gone: run the ``on_delete`` hook."""
    REMOVE = "remove"
    """Everything is done: remove the finalizer, so the parent goes away."""


@attrs.frozen(kw_only=True)
class CleanupDecision:
    """A :class:`CleanupStep` and, for ``DELETE_CHILDREN``, which children to delete."""

    step: CleanupStep
    delete: tuple[ObjectRef, ...] = ()
    kinds: tuple[tuple[str, str], ...] = ()
    """For ``ADD``: every kind the annotation should list (existing ones kept)."""
    reason: str = ""


def has_finalizer(parent: Mapping[str, Any]) -> bool:
    """Whether ``parent`` carries :data:`CLEANUP_FINALIZER`."""
    return CLEANUP_FINALIZER in (meta_of(parent).get("finalizers") or ())


def is_uncollectable(parent: Mapping[str, Any], ref: ObjectRef) -> bool:
    """Whether the garbage collector cannot delete child ``ref`` with ``parent``: the parent is
    namespaced and the child is cluster-scoped or in another namespace (no owner reference)."""
    parent_ns = meta_of(parent).get("namespace") or None
    return parent_ns is not None and ref.namespace != parent_ns


def parse_kinds(value: Any) -> tuple[tuple[str, str], ...]:
    """The ``(apiVersion, kind)`` pairs of a :data:`CLEANUP_KINDS_ANNOTATION` value."""
    kinds: list[tuple[str, str]] = []
    for item in str(value or "").split(","):
        api_version, _, kind = item.strip().rpartition("/")
        if api_version and kind:
            kinds.append((api_version, kind))
    return tuple(sorted(set(kinds)))


def cleanup_kinds(parent: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The kinds ``parent``'s annotation lists for its cleanup."""
    annotations = meta_of(parent).get("annotations") or {}
    return parse_kinds(annotations.get(CLEANUP_KINDS_ANNOTATION))


def needs_cleanup(
    parent: Mapping[str, Any], children: Iterable[ObjectRef], *, on_delete: bool,
    shared: Iterable[ObjectRef] = (),
) -> tuple[tuple[str, str], ...] | None:
    """The kinds of ``parent``'s uncollectable ``children`` (and of its ``shared`` ones, which
    have no owner reference) when it needs the finalizer (an empty tuple when only
    ``on_delete`` asks for it), or None when it needs none."""
    kinds = sorted({ref.type_key for ref in children if is_uncollectable(parent, ref)}
                   | {ref.type_key for ref in shared})
    if not kinds and not on_delete:
        return None
    return tuple(kinds)


def decide_cleanup(
    parent: Mapping[str, Any],
    *,
    wanted_kinds: Sequence[tuple[str, str]] | None = None,
    remaining: Collection[ObjectRef] = (),
    deleting_now: Collection[ObjectRef] = (),
    on_delete: bool = False,
    on_delete_done: bool = False,
) -> CleanupDecision:
    """The next cleanup step of ``parent``.

    While it lives: ``wanted_kinds`` is :func:`needs_cleanup`'s answer; the finalizer is added
    (with the union of the annotated and wanted kinds) when it is wanted and missing, or when a
    kind is new; never removed (a parent that once had such children keeps it until deleted).
    While it is being deleted (and carries the finalizer): ``remaining`` are its uncollectable
    children still found (ours, by the owner-uid label), ``deleting_now`` those among them whose
    deletion is already under way. Remaining ones not being deleted are deleted; when only
    ones being deleted remain, wait; when none remain, ``on_delete`` runs (unless done), then
    the finalizer is removed. A parent whose children are already gone is never kept.
    """
    deleted = bool(meta_of(parent).get("deletionTimestamp"))
    present = has_finalizer(parent)
    if not deleted:
        if wanted_kinds is None:
            return CleanupDecision(step=CleanupStep.NONE)
        annotated = cleanup_kinds(parent)
        union = tuple(sorted(set(annotated) | set(wanted_kinds)))
        if present and union == annotated:
            return CleanupDecision(step=CleanupStep.NONE)
        return CleanupDecision(step=CleanupStep.ADD, kinds=union, reason="uncollectable children"
                               if wanted_kinds else "on_delete hook or placed children")
    if not present:
        return CleanupDecision(step=CleanupStep.NONE)
    pending = sorted((r for r in remaining if r not in deleting_now), key=str)
    if pending:
        return CleanupDecision(step=CleanupStep.DELETE_CHILDREN, delete=tuple(pending),
                               reason=f"deleting {len(pending)} children")
    if remaining:
        return CleanupDecision(
            step=CleanupStep.WAIT,
            reason="waiting for " + ", ".join(sorted(str(r) for r in remaining)),
        )
    if on_delete and not on_delete_done:
        return CleanupDecision(step=CleanupStep.RUN_ON_DELETE, reason="running on_delete")
    return CleanupDecision(step=CleanupStep.REMOVE, reason="cleanup done")


def finalizer_patch(
    parent: Mapping[str, Any], *, add: bool, kinds: Sequence[tuple[str, str]] = ()
) -> dict[str, Any]:
    """The merge patch adding (with the kinds annotation) or removing :data:`CLEANUP_FINALIZER`.

    It carries the parent's ``resourceVersion``: a concurrent change of the finalizer list
    (another controller's) makes it fail with a conflict instead of being overwritten.
    """
    meta = meta_of(parent)
    finalizers = [f for f in meta.get("finalizers") or () if f != CLEANUP_FINALIZER]
    if add:
        finalizers.append(CLEANUP_FINALIZER)
    patch_meta: dict[str, Any] = {"finalizers": finalizers}
    if meta.get("resourceVersion"):
        patch_meta["resourceVersion"] = meta["resourceVersion"]
    if add:
        value = ",".join(f"{api_version}/{kind}" for api_version, kind in kinds)
        if value:
            patch_meta["annotations"] = {CLEANUP_KINDS_ANNOTATION: value}
    return {"metadata": patch_meta}


def owner_selector(uid: str) -> str:
    """The label selector of the children of the parent with ``uid``."""
    return f"{OWNER_UID_LABEL}={label_value(uid)}"


def managed_selector(operator_name: str) -> str:
    """The label selector of everything an operator manages."""
    return f"{MANAGED_BY_LABEL}={label_value(operator_name)}"


def cleanup_condition(
    *, waiting: bool, reason: str, message: str, generation: Any = None
) -> dict[str, Any]:
    """The parent's ``Cleanup`` condition: True when done, False while it waits (with why)."""
    condition: dict[str, Any] = {
        "type": "Cleanup", "status": "False" if waiting else "True",
        "reason": reason, "message": bounded(message),
    }
    if generation is not None:
        condition["observedGeneration"] = generation
    return condition


def refuses_data_loss(crd: Mapping[str, Any], *, custom_resources: int) -> str | None:
    """Why deleting ``crd`` is refused (it still has ``custom_resources`` and is not marked
    with :data:`ALLOW_DATA_LOSS_ANNOTATION`), or None when it may go."""
    if str(crd.get("kind")) != CRD_KIND or custom_resources <= 0:
        return None
    annotations = meta_of(crd).get("annotations") or {}
    if str(annotations.get(ALLOW_DATA_LOSS_ANNOTATION, "")).lower() == "true":
        return None
    name = meta_of(crd).get("name")
    return (f"CustomResourceDefinition {name} still has custom resources: deleting it deletes "
            f"them; delete them first, or annotate it {ALLOW_DATA_LOSS_ANNOTATION}=\"true\"")


def crd_resource_types(crd: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The ``(apiVersion, kind)`` of every served version of ``crd``."""
    spec = crd.get("spec") or {}
    kind = str((spec.get("names") or {}).get("kind") or "")
    group = spec.get("group")
    return [(f"{group}/{v.get('name')}", kind) for v in spec.get("versions") or ()
            if v.get("served", True) and kind]
