"""Validate an object against the Kubernetes schema of its kind, or a CRD's structural schema.

The schemas are ``kubernetes-validate``'s strict variant, found through objectmatcher (the one
owner of schema files and of the version policy: ``objectmatcher.DEFAULT_KUBERNETES_VERSION``, an
unknown version is an ``InvalidSpecError`` naming the available ones). This public module only
re-exports; see ``docs/builders.md``.
"""

from __future__ import annotations

from builders._errors import SchemaValidationError, UnknownKindError
from builders._schema import validate_object

__all__ = [
    "SchemaValidationError",
    "UnknownKindError",
    "validate_object",
]
