"""Typed parent specs and the CRDs generated from them (public names; see ``docs/specs.md``).

Declare a parent's spec as a frozen attrs class whose fields use :func:`spec_field`; generate its
CustomResourceDefinition with :func:`crd_for` (or just the schema with :func:`schema_for`); in a
builder, read the parent's spec as an instance with :func:`spec_of` and write one back with
:func:`to_spec_dict`. An API with several versions is a :class:`Versions` of :class:`ApiVersion`
(one spec class each, one hub, pure conversions); fields carry CEL rules (:class:`CelRule`).
``builders.testing.spec_instances`` draws valid instances for property tests.
Pure, as the rest of ``builders``.
"""

from __future__ import annotations

from builders._crds import crd_for, schema_for
from builders._errors import SpecFieldError, UnsupportedSpecTypeError
from builders._specs import (
    CelRule,
    FieldInfo,
    from_spec_dict,
    spec_field,
    spec_of,
    to_spec_dict,
)
from builders._versions import CONVERSION_ANNOTATION, ApiVersion, PrinterColumn, Versions

__all__ = [
    "CONVERSION_ANNOTATION",
    "ApiVersion",
    "CelRule",
    "FieldInfo",
    "PrinterColumn",
    "SpecFieldError",
    "UnsupportedSpecTypeError",
    "Versions",
    "crd_for",
    "from_spec_dict",
    "schema_for",
    "spec_field",
    "spec_of",
    "to_spec_dict",
]
