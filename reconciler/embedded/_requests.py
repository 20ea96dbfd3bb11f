"""Reading a request of the embedded server: the resource path, the body, the query.

What the HTTP face (``_http``) needs to know about a request before it dispatches: the parsed
resource path and the resource type it names (404 as a real server words it), the body read
within ``MAX_BODY_BYTES`` (413) and of an accepted media type (415), the list query (selectors,
limit, continue, resourceVersion), ``DeleteOptions`` from the body and the query, and whether a
table is asked for. A client gone mid-body is a ``ClientGoneError``, not a server failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp
import attrs
from aiohttp import web

from reconciler.embedded._bodies import decode_body
from reconciler.embedded._errors import EmbeddedServerError
from reconciler.embedded._kinds import KindRegistry, ResourceType
from reconciler.embedded._protobuf import PROTOBUF
from reconciler.embedded._selectors import parse_field_selector, parse_label_selector
from reconciler.embedded._statuses import (
    ApiStatusError,
    bad_request,
    not_found,
    status_body,
    unsupported_media_type,
)
from reconciler.embedded._stored_objects import ListQuery

__all__ = [
    "MAX_BODY_BYTES",
    "NOT_FOUND_TEXT",
    "WRITE_TYPES",
    "ClientGoneError",
    "ResourcePath",
    "apply_configuration_of",
    "content_type",
    "delete_options",
    "field_manager_of",
    "is_table_request",
    "list_query",
    "lookup",
    "parse_resource_path",
    "read_body",
    "too_large",
]

MAX_BODY_BYTES = 3 * 1024 * 1024
"""A real kube-apiserver refuses request bodies over 3 MiB."""

_JSON = "application/json"
NOT_FOUND_TEXT = "404 page not found\n"
"""The plain-text body of a real server's 404 for a path it does not serve."""
WRITE_TYPES = (_JSON, "application/yaml", PROTOBUF, "*/*", "")
"""The media types a create or update body may have."""
_TRUE = ("true", "1")


class ClientGoneError(EmbeddedServerError, ConnectionResetError):
    """The client closed its connection before its request was read."""


@attrs.frozen(kw_only=True)
class ResourcePath:
    """A parsed resource URL."""

    group: str
    version: str
    plural: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None


def parse_resource_path(path: str) -> ResourcePath | None:
    """Split a Kubernetes resource path; None when it is not one."""
    segments = [s for s in path.split("/") if s]
    if len(segments) >= 3 and segments[0] == "api" and segments[1] == "v1":
        group, version, rest = "", "v1", segments[2:]
    elif len(segments) >= 4 and segments[0] == "apis":
        group, version, rest = segments[1], segments[2], segments[3:]
    else:
        return None
    namespace = None
    if (
        rest[0] == "namespaces" and len(rest) >= 3
        and not (group == "" and len(rest) == 3 and rest[2] in ("status", "finalize"))
    ):
        namespace, rest = rest[1], rest[2:]
    if not 1 <= len(rest) <= 3:
        return None
    return ResourcePath(
        group=group, version=version, plural=rest[0], namespace=namespace,
        name=rest[1] if len(rest) > 1 else None,
        subresource=rest[2] if len(rest) > 2 else None,
    )


def content_type(request: web.Request) -> str:
    """The media type of the body; a missing header means JSON, as for a real server."""
    header = request.headers.get("Content-Type", "")
    media = header.split(";", 1)[0].strip().lower()
    return media or _JSON


def lookup(registry: KindRegistry, path: ResourcePath) -> ResourceType:
    rt = registry.lookup(path.group, path.version, path.plural)
    if rt is None:
        raise ApiStatusError(404, NOT_FOUND_TEXT)
    if path.subresource is not None and path.subresource not in rt.subresources:
        if rt.is_custom and path.name:
            # a custom resource's handler answers every sub-path, with a NotFound Status
            raise not_found(rt, path.name)
        raise ApiStatusError(404, NOT_FOUND_TEXT)
    if path.namespace is not None and not rt.namespaced:
        raise ApiStatusError(404, NOT_FOUND_TEXT)
    return rt


async def read_body(request: web.Request, *, allowed: tuple[str, ...]) -> bytes:
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise too_large()
    media = content_type(request)
    if media not in allowed:
        raise unsupported_media_type([t for t in allowed if t not in ("*/*", "")])
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge as exc:
        raise too_large() from exc
    except (ConnectionError, aiohttp.ClientPayloadError, aiohttp.ClientConnectionError,
            aiohttp.http_exceptions.HttpProcessingError) as exc:
        raise ClientGoneError(f"the client left mid-body: {exc}") from exc


def too_large() -> ApiStatusError:
    """The 413 a real server answers for a body over ``MAX_BODY_BYTES``."""
    return ApiStatusError(413, status_body(
        413, "RequestEntityTooLarge",
        message=f"Request entity too large: limit is {MAX_BODY_BYTES}", details={},
    ))


def is_table_request(request: web.Request) -> bool:
    """Whether the client asks for a server-side table (``Accept: ...;as=Table``)."""
    accept = request.headers.get("Accept", "")
    return "as=Table" in accept


def list_query(request: web.Request, rt: ResourceType) -> ListQuery:
    query = request.query
    try:
        limit = int(query.get("limit") or 0)
    except ValueError as exc:
        raise bad_request(f"invalid limit: {query.get('limit')}") from exc
    return ListQuery(
        labels=parse_label_selector(query.get("labelSelector")),
        fields=parse_field_selector(query.get("fieldSelector"), rt.kind),
        limit=limit,
        continue_token=query.get("continue") or None,
        resource_version=query.get("resourceVersion"),
        resource_version_match=query.get("resourceVersionMatch"),
    )


async def delete_options(request: web.Request) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if request.body_exists:
        raw = await read_body(request, allowed=WRITE_TYPES)
        if raw.strip():
            decoded = await decode_body(raw, content_type=content_type(request))
            if not isinstance(decoded, Mapping):
                raise bad_request("DeleteOptions must be an object")
            options.update(decoded)
    query = request.query
    if "propagationPolicy" in query:
        options["propagationPolicy"] = query["propagationPolicy"]
    if "orphanDependents" in query:
        options["orphanDependents"] = query["orphanDependents"].lower() in _TRUE
    return options

def apply_configuration_of(applied: Any) -> Any:
    """An apply configuration must be an object (a real server's decoding error otherwise)."""
    if not isinstance(applied, Mapping):
        raise bad_request(
            "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot "
            f"unmarshal {'array' if isinstance(applied, list) else 'string'} into Go value of "
            "type map[string]interface {}")
    return applied


def field_manager_of(request: web.Request) -> str | None:
    """Who owns what an update writes: ``fieldManager``, else the User-Agent up to its first
    ``/`` (at most 128 characters), as a real server names it."""
    given = request.query.get("fieldManager")
    if given:
        return given
    agent = request.headers.get("User-Agent", "").split("/", 1)[0][:128]
    return agent or None
