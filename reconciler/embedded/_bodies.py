"""Decoding request bodies with bounds: nothing a client sends can stall or exhaust the server.

A body is decoded by its content type (JSON, YAML, the protobuf subset of ``_protobuf``), with
YAML alias expansion bounded (``_encoding.load_yaml``), large YAML decoded in a worker thread,
and nesting deeper than ``MAX_DEPTH`` refused with 422. ``check_ranges`` refuses integers a
built-in field's Go type cannot hold (``_ranges``). Failures raise ``ApiStatusError`` with the
Status a real server answers; ``_http`` reads the bytes and calls these.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import yaml

from reconciler.embedded._encoding import MAX_DEPTH, load_yaml, nesting_path
from reconciler.embedded._kinds import ResourceType
from reconciler.embedded._patching import APPLY_PATCH
from reconciler.embedded._protobuf import PROTOBUF, UnsupportedProtobuf, decode_object
from reconciler.embedded._ranges import find_range_error
from reconciler.embedded._statuses import bad_request, invalid, unsupported_media_type

__all__ = ["check_depth", "check_ranges", "decode_body"]

_JSON = "application/json"

_OFF_LOOP_BYTES = 64 * 1024
"""YAML bodies larger than this are decoded in a worker thread, not on the event loop."""


async def _decode_yaml(raw: bytes) -> Any:
    """``load_yaml``, in a worker thread when the body is large (the loop keeps serving)."""
    if len(raw) <= _OFF_LOOP_BYTES:
        return load_yaml(raw)
    return await asyncio.get_running_loop().run_in_executor(None, load_yaml, raw)


def check_depth(decoded: Any, rt: ResourceType | None) -> Any:
    """``decoded``, or 422 Invalid when it nests deeper than the server processes."""
    path = nesting_path(decoded)
    if path is None:
        return decoded
    metadata = decoded.get("metadata") if isinstance(decoded, Mapping) else None
    name = str(metadata.get("name") or "") if isinstance(metadata, Mapping) else ""
    raise invalid(rt, name, causes=[{
        "reason": "FieldValueInvalid", "field": path,
        "message": f"Invalid value: nesting exceeds the maximum depth {MAX_DEPTH}",
    }])


def check_ranges(rt: ResourceType, decoded: Any, *, patch: bytes | None = None) -> None:
    """400 (a body) or 422 (a patch) when a built-in kind's integer field cannot hold a value,
    as the Go decoder of a real server refuses it."""
    if rt.is_custom or not isinstance(decoded, Mapping):
        return
    error = find_range_error(decoded, group=rt.group, version=rt.version, kind=rt.kind)
    if error is None:
        return
    if patch is None:
        raise bad_request(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
            f"{error.message}"
        )
    raise invalid(None, "", causes=[{
        "reason": "FieldValueInvalid", "field": "patch",
        "message": f"Invalid value: {json.dumps(patch.decode(errors='replace'))}: "
                   f"{error.message}",
    }])


async def decode_body(
    raw: bytes, *, content_type: str, rt: ResourceType | None = None
) -> Any:
    """The decoded body: 400 when it does not decode (or is an alias bomb), 415 for protobuf
    of an unsupported kind, 422 when it nests deeper than ``MAX_DEPTH``."""
    if content_type == PROTOBUF:
        try:
            decoded = decode_object(raw, api_version=rt.api_version if rt else "",
                                    kind=rt.kind if rt else "")
        except (UnsupportedProtobuf, UnicodeDecodeError) as exc:
            raise unsupported_media_type([_JSON, "application/yaml"]) from exc
        return check_depth(decoded, rt)
    try:
        if content_type in ("application/yaml", APPLY_PATCH):
            decoded = await _decode_yaml(raw)
        else:
            decoded = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError, yaml.YAMLError) as exc:
        raise bad_request(
            f"the object provided is unrecognized: couldn't get version/kind; json parse "
            f"error: {exc}"
        ) from exc
    return check_depth(decoded, rt)
