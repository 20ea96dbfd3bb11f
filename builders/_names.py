"""Names and labels: validation of Kubernetes identifiers and the identity of children.

This module fixes DESIGN.md section 5: deterministic, DNS-safe child names
(``<parent>-<component>``, truncated with a stable hash suffix), the standard
``app.kubernetes.io/*`` labels, the ``optk.dev/owner-uid`` label and controller owner references.
It validates the identifiers Kubernetes validates (DNS-1123 labels and subdomains, DNS-1035
labels, qualified label keys, label values) and raises :class:`InvalidSpecError` naming the field.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from builders._errors import InvalidSpecError
from objectmatcher import KubeObject

__all__ = [
    "COMPONENT_LABEL",
    "INSTANCE_LABEL",
    "MANAGED_BY_LABEL",
    "NAME_LABEL",
    "OWNER_UID_LABEL",
    "PART_OF_LABEL",
    "SHARED_LABEL",
    "VERSION_LABEL",
    "child_name",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_label_key",
    "is_label_value",
    "label_value",
    "owner_reference",
    "selector_labels",
    "standard_labels",
    "validate_label_key",
    "validate_label_value",
    "validate_labels",
    "validate_name",
]

NAME_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"
COMPONENT_LABEL = "app.kubernetes.io/component"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
PART_OF_LABEL = "app.kubernetes.io/part-of"
VERSION_LABEL = "app.kubernetes.io/version"
OWNER_UID_LABEL = "optk.dev/owner-uid"
SHARED_LABEL = "optk.dev/shared"
"""``"true"`` on a child that several parents share (``builders.shared``): no owner label."""

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_HASH_LENGTH = 8


def is_dns1123_label(value: str) -> bool:
    """RFC 1123 label: lower-case alphanumerics and '-', alphanumeric ends, at most 63 chars."""
    return len(value) <= 63 and _DNS1123_LABEL.fullmatch(value) is not None


def is_dns1035_label(value: str) -> bool:
    """RFC 1035 label (Service names): like a DNS-1123 label but starting with a letter."""
    return len(value) <= 63 and _DNS1035_LABEL.fullmatch(value) is not None


def is_dns1123_subdomain(value: str) -> bool:
    """RFC 1123 subdomain as Kubernetes checks it (``IsDNS1123Subdomain``): dot-separated parts of
    lowercase alphanumerics and '-' with alphanumeric ends, at most 253 characters in all (no
    63-character limit per part: a real API server accepts a 64-character name without dots)."""
    return 0 < len(value) <= 253 and all(
        _DNS1123_LABEL.fullmatch(part) is not None for part in value.split(".")
    )


def is_label_key(key: str) -> bool:
    """A qualified label key: optional DNS subdomain prefix and '/', then a name of <= 63 chars."""
    prefix, slash, name = key.rpartition("/")
    if slash and not is_dns1123_subdomain(prefix):
        return False
    return len(name) <= 63 and _QUALIFIED_NAME.fullmatch(name) is not None


def is_label_value(value: str) -> bool:
    """A label value: empty, or at most 63 alphanumerics, '-', '_', '.' with alphanumeric ends."""
    return value == "" or (len(value) <= 63 and _QUALIFIED_NAME.fullmatch(value) is not None)


def validate_name(name: Any, *, field: str = "metadata.name", rule: str = "subdomain") -> str:
    """Return ``name`` if it is a valid Kubernetes name under ``rule``, else InvalidSpecError.

    ``rule`` is ``"subdomain"`` (most kinds), ``"label"`` (Namespaces, ports) or ``"dns1035"``
    (Services).
    """
    checks = {
        "subdomain": (is_dns1123_subdomain, "a DNS-1123 subdomain (lower-case, <= 253 chars)"),
        "label": (is_dns1123_label, "a DNS-1123 label (lower-case alphanumerics, <= 63 chars)"),
        "dns1035": (is_dns1035_label, "a DNS-1035 label (starts with a letter, <= 63 chars)"),
    }
    if rule not in checks:
        raise ValueError(f"validate_name: unknown rule {rule!r}")
    check, what = checks[rule]
    if not isinstance(name, str) or not check(name):
        raise InvalidSpecError(field=field, value=name, reason=f"must be {what}")
    return name


def validate_label_key(key: Any, *, field: str = "metadata.labels") -> str:
    """Return ``key`` if it is a valid label (or annotation) key, else InvalidSpecError."""
    if not isinstance(key, str) or not is_label_key(key):
        raise InvalidSpecError(
            field=f"{field}[{key!r}]",
            value=key,
            reason="label keys are an optional DNS subdomain prefix and '/' plus a name of at "
            "most 63 alphanumerics, '-', '_', '.'",
        )
    return key


def validate_label_value(value: Any, *, field: str) -> str:
    """Return ``value`` if it is a valid label value, else InvalidSpecError naming ``field``."""
    if not isinstance(value, str) or not is_label_value(value):
        raise InvalidSpecError(
            field=field,
            value=value,
            reason="label values are at most 63 alphanumerics, '-', '_', '.' with "
            "alphanumeric ends",
        )
    return value


def validate_labels(labels: Mapping[str, Any] | None, *, field: str = "metadata.labels") -> None:
    """Check every key and value of a label map; InvalidSpecError names the first bad one."""
    for key, value in (labels or {}).items():
        validate_label_key(key, field=field)
        validate_label_value(value, field=f"{field}[{key!r}]")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_HASH_LENGTH]


_SAFE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
"""What child_name keeps as it is: a DNS-1123 label shape (no dots), within ``max_length``."""


def _sanitize(text: str) -> str:
    text = re.sub(r"[^a-z0-9-]+", "-", text.lower())
    return re.sub(r"-{2,}", "-", text).strip("-")


def child_name(parent_name: str, *parts: str, max_length: int = 63) -> str:
    """The deterministic, DNS-safe name ``<parent>-<part>-...`` of a child.

    Names that are already DNS-safe and short enough are kept as they are. Otherwise characters
    outside ``[a-z0-9-]`` become '-', the result is cut to fit ``max_length`` (63, a DNS-1123
    label, by default; 253 allows any subdomain) and suffixed with '-' and 8 hex digits of the
    SHA-256 of the full input, so distinct inputs never collide and a name never changes for the
    same input. Raises InvalidSpecError when nothing usable is left.
    """
    if not isinstance(parent_name, str) or not parent_name:
        raise InvalidSpecError(
            field="parent_name", value=parent_name, reason="must be a non-empty string"
        )
    if not 16 <= max_length <= 253:
        raise ValueError(f"child_name: max_length must be in 16..253, got {max_length}")
    full = "-".join([parent_name, *parts])
    if len(full) <= max_length and _SAFE_NAME.fullmatch(full):
        return full  # already DNS-safe ("a--b" included): kept exactly, no hash
    name = _sanitize(full)
    if not name:
        raise InvalidSpecError(
            field="name", value=full, reason="has no DNS-safe characters left after sanitizing"
        )
    if len(name) > max_length or name != full:
        # Sanitizing or truncating could make two inputs collide: the hash of the full input
        # keeps them apart, and is stable across releases.
        head = name[: max_length - _HASH_LENGTH - 1].rstrip("-")
        name = f"{head}-{_digest(full)}" if head else f"x{_digest(full)}"
    return name


def label_value(text: str) -> str:
    """``text`` as a valid label value: unchanged when valid, else sanitized and hash-suffixed."""
    if is_label_value(text):
        return text
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-_.")
    if len(cleaned) > 63 or not is_label_value(cleaned):
        head = cleaned[: 63 - _HASH_LENGTH - 1].rstrip("-_.")
        cleaned = f"{head}-{_digest(text)}" if head else _digest(text)
    return cleaned


def _meta(parent: KubeObject) -> Mapping[str, Any]:
    meta = parent.get("metadata")
    if not isinstance(meta, Mapping):
        raise InvalidSpecError(field="parent.metadata", value=meta, reason="must be a mapping")
    return meta


def _parent_name(parent: KubeObject) -> str:
    name = _meta(parent).get("name")
    if not isinstance(name, str) or not name:
        raise InvalidSpecError(
            field="parent.metadata.name", value=name, reason="the parent must have a name"
        )
    return name


def selector_labels(
    parent: KubeObject, *, component: str, name: str | None = None
) -> dict[str, str]:
    """The stable labels that select one component's pods: name, instance and component.

    They never include versions or anything that may change, since workload selectors are
    immutable. ``name`` defaults to the parent's kind in lower case.
    """
    app_name = name if name is not None else str(parent.get("kind", "app")).lower()
    labels = {
        NAME_LABEL: label_value(app_name),
        INSTANCE_LABEL: label_value(_parent_name(parent)),
        COMPONENT_LABEL: label_value(component),
    }
    validate_labels(labels)
    return labels


def standard_labels(
    parent: KubeObject,
    *,
    component: str,
    managed_by: str,
    name: str | None = None,
    part_of: str | None = None,
    version: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Every label of DESIGN.md section 5 for a child of ``parent``.

    The selector labels plus ``app.kubernetes.io/managed-by``, ``optk.dev/owner-uid`` (when the
    parent has a uid), and the optional ``part-of``/``version``; ``extra`` labels are added last
    (they cannot replace the identity labels). InvalidSpecError names any invalid label.
    """
    labels = dict(extra or {})
    labels.update(selector_labels(parent, component=component, name=name))
    labels[MANAGED_BY_LABEL] = managed_by
    uid = _meta(parent).get("uid")
    if uid:
        labels[OWNER_UID_LABEL] = label_value(str(uid))
    if part_of is not None:
        labels[PART_OF_LABEL] = part_of
    if version is not None:
        labels[VERSION_LABEL] = label_value(version)
    validate_labels(labels)
    return labels


def owner_reference(
    parent: KubeObject, *, controller: bool = True, block_owner_deletion: bool = True
) -> dict[str, Any]:
    """A fresh owner reference to ``parent`` (which must have apiVersion, kind, name and uid)."""
    ref: dict[str, Any] = {}
    for key, value in (
        ("apiVersion", parent.get("apiVersion")),
        ("kind", parent.get("kind")),
        ("name", _meta(parent).get("name")),
        ("uid", _meta(parent).get("uid")),
    ):
        if not isinstance(value, str) or not value:
            field = f"parent.{key}" if key in ("apiVersion", "kind") else f"parent.metadata.{key}"
            raise InvalidSpecError(
                field=field, value=value, reason="an owner reference needs it set"
            )
        ref[key] = value
    ref["controller"] = controller
    ref["blockOwnerDeletion"] = block_owner_deletion
    return ref
