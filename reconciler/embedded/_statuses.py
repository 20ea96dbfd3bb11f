"""``Status`` bodies exactly as a real kube-apiserver sends them, and the error that carries them.

Every refusal of the embedded server is an ``ApiStatusError`` raised somewhere below the HTTP
layer; ``_server`` turns it into the response. The message shapes, reasons and ``details`` follow
the recordings (``errors.json``, ``conflict.json``, ``watch-410-gone.json``, ``patch-types.json``)
so that clients parsing them (the official client, kubectl, ``reconciler._base.errors``) see what a
real cluster would send. This module knows nothing about HTTP or storage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.embedded._errors import EmbeddedServerError
from reconciler.embedded._kinds import ResourceType

__all__ = [
    "ApiStatusError",
    "already_exists",
    "bad_request",
    "conflict",
    "expired",
    "invalid",
    "invalid_options",
    "method_not_allowed",
    "namespace_terminating",
    "not_found",
    "status_body",
    "success_status",
    "unsupported_media_type",
]


class ApiStatusError(EmbeddedServerError):
    """A request failed: ``code`` and the ``Status`` body to answer with (plus extra headers)."""

    def __init__(
        self,
        code: int,
        body: Mapping[str, Any] | str,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        message = body.get("message", "") if isinstance(body, Mapping) else body
        super().__init__(f"{code}: {message}")
        self.code = code
        self.body = body
        self.headers = dict(headers or {})


def status_body(
    code: int,
    reason: str,
    *,
    message: str,
    details: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A failure ``Status`` object; ``details`` is omitted when None, as the server does."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": dict(metadata or {}),
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not None:
        body["details"] = dict(details)
    body["code"] = code
    return body


def _details(rt: ResourceType | None, name: str, *, kind: str | None = None) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if rt is not None and rt.group:
        details["group"] = rt.group
    details["kind"] = kind if kind is not None else (rt.plural if rt else "")
    return details


def not_found(rt: ResourceType | None, name: str, *, plural: str | None = None) -> ApiStatusError:
    """404 ``NotFound``: ``configmaps "x" not found`` (``deployments.apps`` for groups)."""
    resource = plural or (rt.group_resource if rt else "")
    details = _details(rt, name, kind=plural or (rt.plural if rt else ""))
    return ApiStatusError(
        404, status_body(404, "NotFound", message=f'{resource} "{name}" not found', details=details)
    )


def already_exists(rt: ResourceType, name: str) -> ApiStatusError:
    """409 ``AlreadyExists`` on a create of a taken name."""
    return ApiStatusError(409, status_body(
        409, "AlreadyExists", message=f'{rt.group_resource} "{name}" already exists',
        details=_details(rt, name),
    ))


def conflict(rt: ResourceType, name: str, *, message: str | None = None) -> ApiStatusError:
    """409 ``Conflict``: a stale ``resourceVersion`` or a failed delete precondition."""
    text = message or (
        f'Operation cannot be fulfilled on {rt.group_resource} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )
    body = status_body(409, "Conflict", message=text, details=_details(rt, name))
    return ApiStatusError(409, body)


def invalid(
    rt: ResourceType | None, name: str, *, causes: Sequence[Mapping[str, str]]
) -> ApiStatusError:
    """422 ``Invalid``: ``<Kind.group> "<name>" is invalid: <field>: <message>``.

    Several causes are listed in brackets, comma-separated, as the Go aggregate error prints them.
    """
    # the Go aggregate error prints each distinct message once; details keep every cause
    parts = list(dict.fromkeys(f"{c.get('field', '')}: {c.get('message', '')}" for c in causes))
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    qualified = rt.qualified_kind if rt else ""
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if rt is not None and rt.group:
        details["group"] = rt.group
    if rt is not None:
        details["kind"] = rt.kind
    details["causes"] = [dict(c) for c in causes]
    message = f'{qualified} "{name}" is invalid: {joined}'
    return ApiStatusError(422, status_body(422, "Invalid", message=message, details=details))


def bad_request(message: str) -> ApiStatusError:
    """400 ``BadRequest`` with no details (as the recordings show for malformed requests)."""
    return ApiStatusError(400, status_body(400, "BadRequest", message=message))


def invalid_options(directive: str, *, options_kind: str) -> ApiStatusError:
    """422 for a ``fieldValidation`` value other than Ignore, Warn and Strict; ``options_kind``
    is the verb's options type (``CreateOptions``, ``UpdateOptions``, ``PatchOptions``)."""
    cause = {
        "reason": "FieldValueNotSupported",
        "message": f'Unsupported value: "{directive}": supported values: "", "Ignore", '
                   '"Strict", "Warn"',
        "field": "fieldValidation",
    }
    return ApiStatusError(422, status_body(
        422, "Invalid",
        message=f'{options_kind}.meta.k8s.io "" is invalid: fieldValidation: '
                f'{cause["message"]}',
        details={"group": "meta.k8s.io", "kind": options_kind, "causes": [cause]},
    ))


def namespace_terminating(rt: ResourceType, name: str, *, namespace: str) -> ApiStatusError:
    """403 ``Forbidden``: a create in a namespace that is being deleted."""
    details = _details(rt, name)
    details["causes"] = [{
        "reason": "NamespaceTerminating",
        "message": f"namespace {namespace} is being terminated",
        "field": "metadata.namespace",
    }]
    message = (
        f'{rt.group_resource} "{name}" is forbidden: unable to create new content in namespace '
        f"{namespace} because it is being terminated"
    )
    return ApiStatusError(403, status_body(403, "Forbidden", message=message, details=details))


def expired(message: str, *, continue_token: str | None = None) -> ApiStatusError:
    """410 ``Expired``: a list or continue token older than the retained window."""
    metadata = {"continue": continue_token} if continue_token else None
    return ApiStatusError(410, status_body(410, "Expired", message=message, metadata=metadata))


def unsupported_media_type(accepted: Sequence[str]) -> ApiStatusError:
    """415 ``UnsupportedMediaType`` listing the accepted content types."""
    message = (
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted)
    )
    return ApiStatusError(415, status_body(415, "UnsupportedMediaType", message=message))


def method_not_allowed() -> ApiStatusError:
    """405 ``MethodNotAllowed`` for a verb the resource does not serve."""
    return ApiStatusError(405, status_body(
        405, "MethodNotAllowed",
        message="the server does not allow this method on the requested resource",
        details={},
    ))


def success_status(rt: ResourceType, name: str, *, uid: str) -> dict[str, Any]:
    """The ``Status`` a DELETE answers with once the object is gone."""
    details = _details(rt, name)
    details["uid"] = uid
    return {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": details,
    }
