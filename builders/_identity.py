"""Object identity, once: the ``ObjectRef`` type, its key function and identity stamping.

Every layer names an object the same way: ``ObjectRef`` (apiVersion, kind, namespace, name) is the
one identity type of the toolkit, and ``ObjectRef.of(obj)`` the one key function (the reconciler's
results, errors, child lists and informer keys all use it; ``reconciler`` re-exports the type).
:func:`identity_of` is the strict form for built objects: the same key, or ``InvalidSpecError``
naming the missing field. The identity labels of DESIGN.md section 5 are defined once, in
``builders._names`` beside the label rules, and :func:`stamp_identity` is the one place that
decides how a child of a parent is marked (namespace, labels, controller owner reference).
Pure: no cluster access; whether a kind is namespaced is the caller's input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from builders._errors import InvalidSpecError
from builders._names import (
    COMPONENT_LABEL,
    INSTANCE_LABEL,
    MANAGED_BY_LABEL,
    OWNER_UID_LABEL,
    label_value,
    owner_reference,
)
from objectmatcher import KubeObject

__all__ = [
    "ObjectRef",
    "identity_of",
    "owner_uids",
    "stamp_identity",
]

@attrs.frozen(kw_only=True, cache_hash=True)
class ObjectRef:
    """The identity of one object: apiVersion, kind, namespace (None when cluster-scoped), name.

    A hashable value: results, errors, child lists and caches key objects by it.
    """

    api_version: str
    kind: str
    name: str
    namespace: str | None = None

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectRef:
        """The key of a JSON-shaped object (missing parts become empty strings; an empty
        namespace is None). The toolkit's one key function."""
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        return cls(
            api_version=str(obj.get("apiVersion", "")),
            kind=str(obj.get("kind", "")),
            name=str(meta.get("name", "")),
            namespace=meta.get("namespace") or None,
        )

    @property
    def namespaced_name(self) -> tuple[str, str]:
        """``(namespace, name)``, namespace ``""`` when cluster-scoped: the part of the key that
        tells objects of one type apart (what a per-type store is keyed by)."""
        return self.namespace or "", self.name

    @property
    def type_key(self) -> tuple[str, str]:
        """``(apiVersion, kind)``: the resource type the object belongs to."""
        return self.api_version, self.kind

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        if not self.api_version:  # not an object: a builder, a build function
            return f"{self.kind} {where}"
        return f"{self.kind}.{self.api_version} {where}"


def identity_of(obj: KubeObject) -> ObjectRef:
    """``ObjectRef.of(obj)`` for an object that must be complete; InvalidSpecError otherwise."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise InvalidSpecError(field="metadata", value=meta, reason="an object needs metadata")
    api_version, kind, name = obj.get("apiVersion"), obj.get("kind"), meta.get("name")
    for field, value in (("apiVersion", api_version), ("kind", kind), ("metadata.name", name)):
        if not isinstance(value, str) or not value:
            raise InvalidSpecError(field=field, value=value, reason="an object needs it set")
    namespace = meta.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise InvalidSpecError(
            field="metadata.namespace", value=namespace, reason="must be a string"
        )
    return ObjectRef.of(obj)


def owner_uids(obj: KubeObject) -> tuple[str, ...]:
    """The uids of the parents ``obj`` names, as :func:`stamp_identity` marks them: controller
    owner references first, then the ``optk.dev/owner-uid`` label (which also names a parent in
    another namespace, where no owner reference is allowed); no uid twice."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return ()
    uids: list[str] = []
    for ref in meta.get("ownerReferences") or ():
        uid = ref.get("uid")
        if uid and ref.get("controller") and uid not in uids:
            uids.append(str(uid))
    label = (meta.get("labels") or {}).get(OWNER_UID_LABEL)
    if label and label not in uids:
        uids.append(str(label))
    return tuple(uids)


def stamp_identity(
    parent: KubeObject,
    obj: KubeObject,
    *,
    operator_name: str,
    namespaced: bool,
    absent: bool = False,
) -> dict[str, Any]:
    """``obj`` as a child of ``parent``: a new dict with the identity of DESIGN.md section 5.

    The namespace: the parent's when the kind is ``namespaced`` and the child names none; removed
    when it is not. Unless ``absent`` (a child to delete needs only its name): the labels
    ``managed-by`` (``operator_name``), ``instance`` (the parent's name), ``component`` (kept
    when set, else the child's name without the ``<parent>-`` prefix, else its kind in lower
    case) and ``optk.dev/owner-uid``; and a controller owner reference to the parent when
    Kubernetes allows one (the parent is cluster-scoped or in the child's namespace), replacing
    any other controller reference and keeping non-controller ones.
    """
    child = dict(obj)
    meta_in = child.get("metadata")
    meta = dict(meta_in) if isinstance(meta_in, Mapping) else {}
    parent_meta_in = parent.get("metadata")
    parent_meta = parent_meta_in if isinstance(parent_meta_in, Mapping) else {}
    parent_ns = parent_meta.get("namespace") or None
    if namespaced and not meta.get("namespace") and parent_ns:
        meta["namespace"] = parent_ns
    if not namespaced:
        meta.pop("namespace", None)
    if not absent:
        name = str(parent_meta.get("name", ""))
        labels = dict(meta.get("labels") or {})
        labels[MANAGED_BY_LABEL] = operator_name
        labels[INSTANCE_LABEL] = label_value(name)
        if COMPONENT_LABEL not in labels:
            own_name = str(meta.get("name", ""))
            component = own_name.removeprefix(f"{name}-") or str(child.get("kind", "")).lower()
            labels[COMPONENT_LABEL] = label_value(component)
        labels[OWNER_UID_LABEL] = label_value(str(parent_meta.get("uid")))
        meta["labels"] = labels
        if parent_ns is None or meta.get("namespace") == parent_ns:
            owner = owner_reference(parent)
            others = [
                ref for ref in meta.get("ownerReferences") or ()
                if ref.get("uid") != owner["uid"] and not ref.get("controller")
            ]
            meta["ownerReferences"] = [*others, owner]
    child["metadata"] = meta
    return child
