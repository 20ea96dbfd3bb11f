"""The error of a failed HTTP answer: the ``reconciler._base.errors`` class for its code and
``Status`` body, or, for a 404 without a ``Status`` body, "kind ... is not served".

Why a module of its own: ``KubernetesClient`` (``kubernetes``) is the one place HTTP failures
become errors, and this is the pure half of it (bytes and headers in, an error out), beside the
client's I/O. A 404 without a ``Status`` body is the plain "404 page not found" of a path no
handler serves (a child's CRD missing, or removed since discovery was read): the kind is not
served, which is what the parent's condition and the log must say (issue 31).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from reconciler._base.errors import ApiError, NotFoundError, ObjectRef, api_error_from_status

__all__ = ["error_from_http", "not_served"]


def _retry_after(headers: Mapping[str, str] | None) -> float | None:
    if not headers:
        return None
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def error_from_http(
    code: int, data: bytes | str | None, headers: Mapping[str, str] | None, ref: ObjectRef | None
) -> ApiError:
    """The error for one failed HTTP exchange: its ``Status`` body when it is JSON, else text."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else (data or "")
    status: Any = None
    try:
        status = json.loads(text) if text else None
    except ValueError:
        status = None
    if not isinstance(status, Mapping) or status.get("kind") != "Status":
        status = None
    if code == 404 and status is None and ref is not None:
        # No Status body: no handler serves the path ("404 page not found"), so the kind is not
        # served (its CRD is missing or was removed since discovery was read), not the object.
        return not_served(ref)
    return api_error_from_status(
        code, status, ref=ref, retry_after=_retry_after(headers), text=text.strip()
    )


def not_served(ref: ObjectRef) -> NotFoundError:
    """The one wording of a kind the server does not serve (discovery, or a path without a
    handler), for the parent's condition and the log."""
    return NotFoundError(
        f"kind {ref.kind} of {ref.api_version} is not served by the API server",
        status={"reason": "NotFound", "details": {"kind": ref.kind}}, ref=ref,
    )
