"""Three-way comparison of desired and live Kubernetes objects, and the patch appliers.

The public facade of the pure ``objectmatcher`` layer (DESIGN.md sections 2 and 3): it imports
neither the Kubernetes client nor ``reconciler``/``builders``. Everything users and the other
layers need is re-exported here; the ``_``-modules behind it are private. See
``docs/objectmatcher.md`` for what is compared, what is ignored, list handling, the annotation and
the options.
"""

from objectmatcher._annotations import (
    LARGE_LEAF_CHARS,
    LAST_APPLIED_ANNOTATION,
    MAX_ANNOTATION_CHARS,
    MAX_RECORD_BYTES,
    MAX_RECORD_DEPTH,
    ORIGINAL_ABSENT,
    ORIGINAL_FOREIGN,
    ORIGINAL_RECORDED,
    ORIGINAL_UNREADABLE,
    REDACTED,
    get_last_applied,
    set_last_applied,
)
from objectmatcher._diffs import REDACTED_VALUE, DiffItem, format_diff
from objectmatcher._errors import (
    InvalidObjectError,
    InvalidQuantityError,
    ObjectMatcherError,
    PatchError,
    UnsupportedPatchError,
    UnsupportedVersionError,
)
from objectmatcher._fieldsets import (
    FIELD_MISSING,
    FieldPath,
    applied_fields,
    changed_fields,
    extract_fields,
    field_value,
    fields_from_v1,
    fields_to_v1,
    merge_applied,
    remove_fields,
)
from objectmatcher._matching import calculate_patch
from objectmatcher._options import (
    InvalidOptionError,
    MatchOption,
    ignore_field,
    ignore_pvc_template_type_meta_and_status,
    ignore_status_fields,
)
from objectmatcher._patches import (
    JSON_PATCH,
    MERGE_PATCH,
    PATCH_TYPES,
    STRATEGIC_MERGE_PATCH,
    apply_patch,
)
from objectmatcher._quantities import (
    canonical_quantity,
    parse_quantity,
    quantities_equal,
)
from objectmatcher._results import PatchResult
from objectmatcher._schemas import (
    DEFAULT_KUBERNETES_VERSION,
    available_versions,
    has_builtin_schema,
    normalize_version,
    schema_definitions,
    schema_directory,
)
from objectmatcher._types import KubeObject
from objectmatcher._validation import FieldCause, field_causes

__all__ = [
    "DEFAULT_KUBERNETES_VERSION",
    "FIELD_MISSING",
    "JSON_PATCH",
    "LARGE_LEAF_CHARS",
    "LAST_APPLIED_ANNOTATION",
    "MAX_ANNOTATION_CHARS",
    "MAX_RECORD_BYTES",
    "MAX_RECORD_DEPTH",
    "MERGE_PATCH",
    "ORIGINAL_ABSENT",
    "ORIGINAL_FOREIGN",
    "ORIGINAL_RECORDED",
    "ORIGINAL_UNREADABLE",
    "PATCH_TYPES",
    "REDACTED",
    "REDACTED_VALUE",
    "STRATEGIC_MERGE_PATCH",
    "DiffItem",
    "FieldCause",
    "FieldPath",
    "InvalidObjectError",
    "InvalidOptionError",
    "InvalidQuantityError",
    "KubeObject",
    "MatchOption",
    "ObjectMatcherError",
    "PatchError",
    "PatchResult",
    "UnsupportedPatchError",
    "UnsupportedVersionError",
    "applied_fields",
    "apply_patch",
    "available_versions",
    "calculate_patch",
    "canonical_quantity",
    "changed_fields",
    "extract_fields",
    "field_causes",
    "field_value",
    "fields_from_v1",
    "fields_to_v1",
    "format_diff",
    "get_last_applied",
    "has_builtin_schema",
    "ignore_field",
    "ignore_pvc_template_type_meta_and_status",
    "ignore_status_fields",
    "merge_applied",
    "normalize_version",
    "parse_quantity",
    "quantities_equal",
    "remove_fields",
    "schema_definitions",
    "schema_directory",
    "set_last_applied",
]
