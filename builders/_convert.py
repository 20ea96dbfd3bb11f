"""Conversion of what builders return (dicts or official client models) into plain JSON dicts.

Builders may return models of the official ``kubernetes`` client (``V1Deployment``, ...). This
module converts them the way the client's ``ApiClient.sanitize_for_serialization`` does, walking
each model's ``openapi_types``/``attribute_map``, without importing ``kubernetes`` (builders stay
pure; DESIGN.md section 1). The result is always a fresh structure: inputs are never shared.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from builders._errors import InvalidSpecError

__all__ = ["is_client_model", "to_plain", "to_plain_object"]

_PRIMITIVES = (str, int, float, bool)


def is_client_model(value: object) -> bool:
    """True for objects shaped like an official client model (``openapi_types`` and co)."""
    return isinstance(getattr(value, "openapi_types", None), Mapping) and isinstance(
        getattr(value, "attribute_map", None), Mapping
    )


def to_plain(value: Any) -> Any:
    """A fresh JSON-shaped copy of ``value``; client models become dicts keyed by their JSON names.

    Unset (None) model attributes are dropped, as the client's serializer does; dates become
    ISO 8601 strings; tuples become lists. Anything else that is not JSON-shaped is a TypeError.
    """
    if value is None or isinstance(value, _PRIMITIVES):
        return value
    if isinstance(value, list | tuple):
        return [to_plain(item) for item in value]
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(key): to_plain(item) for key, item in value.items()}
    if is_client_model(value):
        attribute_map: Mapping[str, str] = value.attribute_map
        return {
            attribute_map[attr]: to_plain(getattr(value, attr))
            for attr in value.openapi_types
            if getattr(value, attr, None) is not None
        }
    raise TypeError(f"cannot convert {type(value).__name__} to a JSON-shaped value: {value!r}")


def to_plain_object(value: Any) -> dict[str, Any]:
    """Like :func:`to_plain`, for a whole object: the result must be a mapping."""
    plain = to_plain(value)
    if not isinstance(plain, dict):
        raise InvalidSpecError(
            field="object", value=value, reason="a Kubernetes object must be a mapping"
        )
    return plain
