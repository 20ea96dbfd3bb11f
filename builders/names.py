"""Identity, names and labels of children (DESIGN.md section 5), and their validation.

The label keys as constants, the naming rule for children (:func:`child_name`), the standard and
selector labels, the owner reference, and the DNS-1123/DNS-1035/label validators that raise
``builders.InvalidSpecError`` naming the field. ``child_name``, ``standard_labels`` and
``selector_labels`` are also on the ``builders`` facade. This public module only re-exports (the
implementation is private); see ``docs/builders.md``.
"""

from __future__ import annotations

from builders._identity import ObjectRef, identity_of, owner_uids, stamp_identity
from builders._names import (
    COMPONENT_LABEL,
    INSTANCE_LABEL,
    MANAGED_BY_LABEL,
    NAME_LABEL,
    OWNER_UID_LABEL,
    PART_OF_LABEL,
    SHARED_LABEL,
    VERSION_LABEL,
    child_name,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_key,
    is_label_value,
    label_value,
    owner_reference,
    selector_labels,
    standard_labels,
    validate_label_key,
    validate_label_value,
    validate_labels,
    validate_name,
)

__all__ = [
    "COMPONENT_LABEL",
    "INSTANCE_LABEL",
    "MANAGED_BY_LABEL",
    "NAME_LABEL",
    "OWNER_UID_LABEL",
    "PART_OF_LABEL",
    "SHARED_LABEL",
    "VERSION_LABEL",
    "ObjectRef",
    "child_name",
    "identity_of",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_label_key",
    "is_label_value",
    "label_value",
    "owner_reference",
    "owner_uids",
    "selector_labels",
    "stamp_identity",
    "standard_labels",
    "validate_label_key",
    "validate_label_value",
    "validate_labels",
    "validate_name",
]
