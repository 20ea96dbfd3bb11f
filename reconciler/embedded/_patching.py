"""PATCH bodies: decode by content type, apply to the stored object, map failures to Status.

JSON patch, JSON merge patch and strategic merge patch are all applied by
``objectmatcher.apply_patch``, which reads strategic-merge metadata from the same schemas the
rest of the toolkit uses, so the server and the matcher can never disagree on a patch.
Strategic merge on a custom resource is refused with 415, as a real server does. This is the one
place where patch errors are mapped to ``ApiStatusError`` (400 for an undecodable body, 422 for a
patch that does not apply).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from objectmatcher import (
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    PatchError,
    UnsupportedPatchError,
)
from objectmatcher import apply_patch as _objectmatcher_apply
from reconciler.embedded._kinds import ResourceType
from reconciler.embedded._statuses import (
    ApiStatusError,
    bad_request,
    status_body,
    unsupported_media_type,
)

__all__ = [
    "APPLY_PATCH",
    "JSON_PATCH",
    "MERGE_PATCH",
    "PATCH_TYPES",
    "STRATEGIC_MERGE_PATCH",
    "apply_patch",
]

APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)

_REJECTED = "the server rejected our request due to an error in our request"


def _decode(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise bad_request("Invalid JSON Patch") from exc


def _rejected() -> ApiStatusError:
    return ApiStatusError(422, status_body(422, "Invalid", message=_REJECTED, details={}))


def apply_patch(
    current: Mapping[str, Any], body: bytes, *, content_type: str, rt: ResourceType
) -> dict[str, Any]:
    """The object ``current`` becomes under the patch ``body`` of ``content_type``."""
    custom_types = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
    if content_type == STRATEGIC_MERGE_PATCH and rt.is_custom:
        raise unsupported_media_type(custom_types)
    if content_type not in (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH):
        raise unsupported_media_type([*custom_types, STRATEGIC_MERGE_PATCH])
    patch = _decode(body)
    if content_type == JSON_PATCH and not isinstance(patch, list):
        raise bad_request("Invalid JSON Patch")
    if content_type != JSON_PATCH and not isinstance(patch, Mapping):
        raise bad_request("Invalid JSON Patch")
    try:
        return _objectmatcher_apply(current, patch, patch_type=content_type)
    except UnsupportedPatchError as exc:
        raise unsupported_media_type(custom_types) from exc
    except PatchError as exc:
        raise _rejected() from exc
