"""PATCH bodies: decode by content type, apply to the stored object, map failures to Status.

JSON merge patch (RFC 7386) and JSON patch (RFC 6902, through ``jsonpatch``) are applied here;
strategic merge patch is delegated to ``objectmatcher.apply_patch``, which reads the patch
metadata from the same schemas the rest of the toolkit uses. Strategic merge on a custom resource
is refused with 415, as a real server does. This is the one place where patch library errors are
mapped to ``ApiStatusError`` (400 for an undecodable body, 422 for a patch that does not apply).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from typing import Any

import jsonpatch
import jsonpointer

from reconciler.embedded._kinds import ResourceType
from reconciler.embedded._statuses import (
    ApiStatusError,
    bad_request,
    status_body,
    unsupported_media_type,
)

__all__ = [
    "JSON_PATCH",
    "MERGE_PATCH",
    "PATCH_TYPES",
    "STRATEGIC_MERGE_PATCH",
    "apply_patch",
    "merge_patch",
]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)

_REJECTED = "the server rejected our request due to an error in our request"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, ``null`` removes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return patch
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _strategic_applier() -> Callable[..., Any] | None:
    module = importlib.import_module("objectmatcher")
    applier = getattr(module, "apply_patch", None)
    return applier if callable(applier) else None


def _decode(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request("Invalid JSON Patch") from exc


def _rejected() -> ApiStatusError:
    return ApiStatusError(422, status_body(422, "Invalid", _REJECTED, details={}))


def apply_patch(
    current: Mapping[str, Any], body: bytes, content_type: str, rt: ResourceType
) -> dict[str, Any]:
    """The object ``current`` becomes under the patch ``body`` of ``content_type``."""
    if content_type == STRATEGIC_MERGE_PATCH and rt.is_custom:
        raise unsupported_media_type([JSON_PATCH, MERGE_PATCH, APPLY_PATCH])
    if content_type not in (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH):
        raise unsupported_media_type(
            [JSON_PATCH, MERGE_PATCH, APPLY_PATCH, STRATEGIC_MERGE_PATCH]
        )
    patch = _decode(body)
    if content_type == JSON_PATCH:
        if not isinstance(patch, list):
            raise bad_request("Invalid JSON Patch")
        try:
            result = jsonpatch.apply_patch(dict(current), patch, in_place=False)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
            raise _rejected() from exc
        except (TypeError, KeyError, ValueError, IndexError) as exc:
            raise bad_request("Invalid JSON Patch") from exc
    elif content_type == MERGE_PATCH:
        if not isinstance(patch, Mapping):
            raise bad_request("Invalid JSON Patch")
        result = merge_patch(current, patch)
    else:
        if not isinstance(patch, Mapping):
            raise bad_request("Invalid JSON Patch")
        applier = _strategic_applier()
        if applier is None:  # objectmatcher without its applier: fall back to merge semantics
            result = merge_patch(current, patch)
        else:
            try:
                result = applier(current, patch, patch_type=STRATEGIC_MERGE_PATCH)
            except (ValueError, TypeError, KeyError) as exc:
                raise _rejected() from exc
    if not isinstance(result, dict):
        raise _rejected()
    return result
