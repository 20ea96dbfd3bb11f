"""Three-way comparison of desired and live Kubernetes objects, and the patch appliers.

The public facade of the pure ``objectmatcher`` layer (DESIGN.md sections 2 and 3): it imports
neither the Kubernetes client nor ``reconciler``/``builders``. Everything users and the other
layers need is re-exported here; the ``_``-modules behind it are private.
"""

from objectmatcher._errors import (
    InvalidObjectError,
    ObjectMatcherError,
    PatchError,
    UnsupportedPatchError,
    UnsupportedVersionError,
)
from objectmatcher._patches import (
    JSON_PATCH,
    MERGE_PATCH,
    PATCH_TYPES,
    STRATEGIC_MERGE_PATCH,
    apply_patch,
)
from objectmatcher._quantities import parse_quantity, quantities_equal
from objectmatcher._schemas import (
    DEFAULT_KUBERNETES_VERSION,
    available_versions,
    has_builtin_schema,
)
from objectmatcher._types import KubeObject

__all__ = [
    "DEFAULT_KUBERNETES_VERSION",
    "JSON_PATCH",
    "MERGE_PATCH",
    "PATCH_TYPES",
    "STRATEGIC_MERGE_PATCH",
    "InvalidObjectError",
    "KubeObject",
    "ObjectMatcherError",
    "PatchError",
    "UnsupportedPatchError",
    "UnsupportedVersionError",
    "apply_patch",
    "available_versions",
    "has_builtin_schema",
    "parse_quantity",
    "quantities_equal",
]
