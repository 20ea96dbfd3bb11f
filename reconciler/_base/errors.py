"""The reconciler's error tree: the cluster's refusals, built from the Kubernetes ``Status`` body,
and misuse of the library.

Every failure the cluster reports reaches users as one of the ``ApiError`` classes, mapped from the
official client's ``ApiException`` at a single boundary (``reconciler._client.kubernetes``). Each
error keeps the whole ``Status`` body and the reference of the object it concerns, so callers
decide on data (``reason``, ``details.causes``), never on message text. A wrong call (a bad
argument, a malformed selector or duration, an operator module that cannot be loaded) raises a
``ReconcilerUsageError``, which is also a ``ValueError`` (``ReconcilerUsageTypeError``: also a
``TypeError``), so callers may catch either the toolkit's class or the builtin.

The tree (the embedded server and ``reconciler.envtest`` have their own roots)::

    ReconcilerError
    ├── ApiError                          the API server refused a request (code, Status body)
    │   ├── BadRequestError               400
    │   ├── UnauthorizedError             401
    │   ├── ForbiddenError                403
    │   │   └── NamespaceTerminatingError 403, cause NamespaceTerminating: final
    │   ├── NotFoundError                 404
    │   ├── ConflictError                 409
    │   │   ├── AlreadyExistsError        409 AlreadyExists
    │   │   └── DataLossError             a CRD child still holds custom resources and is not
    │   │                                 marked ``optk.dev/allow-data-loss`` (no request sent)
    │   ├── GoneError                     410
    │   ├── WatchSilentError              a watch sent nothing (no event, no bookmark) for
    │   │                                 its inactivity timeout (code 0, ``silence``)
    │   ├── UnsupportedMediaTypeError     415
    │   ├── InvalidError                  422 (``immutable_fields``)
    │   │   └── ImmutableFieldError       an update the server refuses, and recreate is off
    │   ├── TooManyRequestsError          429 (``retry_after``)
    │   └── ServerError                   5xx
    ├── KindUnlistableError               a kind's informer cannot list it (``cause``): reads of
    │                                     it fail at once, without a request
    ├── InClusterConfigError (LookupError)    not in a cluster: ``missing`` files/variables
    ├── ClusterSecretError (ValueError)   a cluster's Secret is not usable (its ``kubeconfig``
    │                                     not base64, YAML or a mapping): names the Secret only
    ├── ClusterUnavailableError           a placed child's cluster cannot be used now
    │                                     (``cluster``; never its credentials)
    ├── LeadershipLostError (RuntimeError)    a write fenced: the lease may have expired
    ├── PermanentError                    raised by a builder or status function: retrying will
    │                                     not help until the parent changes (``reason``)
    └── ReconcilerUsageError (ValueError) the library was called wrongly
        ├── ReconcilerUsageTypeError (TypeError)  an argument of the wrong type
        ├── ClientUsageError              the client was called wrongly
        ├── KubeconfigError               the cluster cannot be reached with the kubeconfig
        │                                 (``source``: its path or the server URL)
        ├── RbacDerivationError           ``optk manifests`` cannot derive the role
        │                                 (``build`` failed on a sample ``parent``)
        ├── WebhookCertificateError       the webhook's certificates cannot be read or made
        │                                 (``source``: the directory or Secret)
        ├── PolicyAnnotationError         an ``optk.dev/*`` annotation that cannot be read
        │                                 (``ref``, ``annotation``, ``value``)
        └── InputDeclarationError         ``Operator(inputs=fn)`` named nothing; also a
                                          ``PermanentError`` (reason ``InvalidInputs``)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from builders import ObjectRef  # the toolkit's one identity type, re-exported here
from reconciler._base.text import quoted

__all__ = [
    "AlreadyExistsError",
    "ApiError",
    "BadRequestError",
    "ClientUsageError",
    "ConflictError",
    "DataLossError",
    "ForbiddenError",
    "GoneError",
    "ImmutableFieldError",
    "InClusterConfigError",
    "InputDeclarationError",
    "InvalidError",
    "KindUnlistableError",
    "KubeconfigError",
    "LeadershipLostError",
    "NamespaceTerminatingError",
    "NotFoundError",
    "ObjectRef",
    "PolicyAnnotationError",
    "RbacDerivationError",
    "ReconcilerError",
    "ReconcilerUsageError",
    "ReconcilerUsageTypeError",
    "ServerError",
    "StatusCause",
    "TooManyRequestsError",
    "UnauthorizedError",
    "UnsupportedMediaTypeError",
    "WatchSilentError",
    "WebhookCertificateError",
    "api_error_from_status",
]


@attrs.frozen(kw_only=True)
class StatusCause:
    """One entry of ``Status.details.causes``: which field, why."""

    reason: str = ""
    message: str = ""
    field: str = ""


class ReconcilerError(Exception):
    """Root of every error raised by the ``reconciler`` package."""


class LeadershipLostError(ReconcilerError, RuntimeError):
    """A write was refused before it was sent: this replica's lease may have expired.

    Raised by the fencing client (``reconciler._leadership.fencing``) when the leader's last
    successful renew is older than the renew deadline; the worker stops the reconcile and requeues
    nothing.
    """

    def __init__(self, *, identity: str, action: str, renewed_ago: float | None,
                 deadline: float) -> None:
        ago = "never renewed" if renewed_ago is None else f"last renewed {renewed_ago:.1f}s ago"
        super().__init__(
            f"{identity}: refusing to {action}: the lease may have expired ({ago}; renew "
            f"deadline {deadline:g}s): this replica is no longer the leader"
        )
        self.identity = identity
        self.action = action
        self.renewed_ago = renewed_ago
        self.deadline = deadline


class KindUnlistableError(ReconcilerError):
    """A kind cannot be listed (its informer's lists fail: forbidden, not served, ...).

    Raised by the informer reader instead of waiting for a sync that cannot happen: only the
    children (and the pruning) of that kind fail, and the message names the kind and ``cause``,
    the error its last list got. The parent is looked at again when the kind lists.
    """

    def __init__(self, *, api_version: str, kind: str, cause: BaseException) -> None:
        super().__init__(f"{kind} {api_version} cannot be listed: {cause}")
        self.api_version = api_version
        self.kind = kind
        self.cause = cause
        self.retry_after = getattr(cause, "retry_after", None)


class PermanentError(ReconcilerError):
    """Raised by a builder or a status function when retrying cannot help until the parent
    changes (an invalid spec, a combination the operator refuses): the parent's ``Stalled``
    condition says so with the message, and it is not retried until its generation changes.

    ``reason`` (CamelCase, default ``PermanentError``) becomes the conditions' reason.
    """

    def __init__(self, message: str, *, reason: str = "PermanentError") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason


class ReconcilerUsageError(ReconcilerError, ValueError):
    """The library was called wrongly: a bad argument or setting; the message names it."""


class ReconcilerUsageTypeError(ReconcilerUsageError, TypeError):
    """An argument of the wrong type (also a ``TypeError``); the message names it."""


class InputDeclarationError(ReconcilerUsageError, PermanentError):
    """``Operator(inputs=fn)`` returned a reference that names nothing (an ``ObjectRef``
    without a kind or a name, a ``SelectorRef`` without an apiVersion or a kind, or another
    value). The same parent declares the same again on every retry, so it is permanent (a
    ``PermanentError``, reason ``InvalidInputs``: the parent is ``Stalled``, said once, not
    retried until it changes) and a misuse (a ``ReconcilerUsageError``, so a ``ValueError``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, reason="InvalidInputs")


class PolicyAnnotationError(ReconcilerUsageError):
    """An ``optk.dev/*`` annotation whose value the toolkit cannot read or will not honour.

    ``ref`` names the object, ``annotation`` the annotation and ``value`` what it held (quoted
    in the message bounded, ``reconciler._base.text``); ``written`` says what is done meanwhile
    (by default nothing is written to that object until it is fixed). It is permanent for the
    retry policy: only a change of the object (which reconciles its parent) can fix it, so the
    parent is ``Stalled`` with reason :attr:`reason`, not retried."""

    reason = "InvalidAnnotation"

    def __init__(self, *, ref: ObjectRef, annotation: str, value: object, expected: str,
                 written: str = "nothing is written to it until it is fixed") -> None:
        self.ref = ref
        self.annotation = annotation
        self.value = value
        super().__init__(
            f"{ref}: annotation {annotation}={quoted(value)} is not valid ({expected}); "
            f"{written}")


class ClientUsageError(ReconcilerUsageError):
    """The client was called wrongly (missing namespace, unknown patch type, not an object)."""


class ApiError(ReconcilerError):
    """The API server refused a request; carries the ``Status`` body it answered with."""

    code: int = 0

    def __init__(
        self,
        message: str,
        *,
        status: Mapping[str, Any] | None = None,
        code: int | None = None,
        ref: ObjectRef | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status: Mapping[str, Any] = dict(status or {})
        if code is not None:
            self.code = code
        self.ref = ref
        self.retry_after = retry_after

    @property
    def reason(self) -> str:
        """``Status.reason`` (``NotFound``, ``Conflict``, ``Invalid``, ...), or empty."""
        return str(self.status.get("reason", ""))

    @property
    def details(self) -> Mapping[str, Any]:
        """``Status.details`` as sent, or an empty mapping."""
        details = self.status.get("details")
        return details if isinstance(details, Mapping) else {}

    @property
    def causes(self) -> tuple[StatusCause, ...]:
        """``Status.details.causes`` as values."""
        raw = self.details.get("causes") or ()
        return tuple(
            StatusCause(
                reason=str(c.get("reason", "")),
                message=str(c.get("message", "")),
                field=str(c.get("field", "")),
            )
            for c in raw
            if isinstance(c, Mapping)
        )

    def __str__(self) -> str:
        where = f" ({self.ref})" if self.ref else ""
        return f"{self.code} {self.reason or type(self).__name__}: {self.message}{where}"


class BadRequestError(ApiError):
    """400: the request itself is malformed."""

    code = 400


class UnauthorizedError(ApiError):
    """401: no or a wrong credential."""

    code = 401


class ForbiddenError(ApiError):
    """403: not allowed (RBAC, or a namespace being terminated)."""

    code = 403


class NamespaceTerminatingError(ForbiddenError):
    """403 with the cause ``NamespaceTerminating``: a create in a namespace being deleted.

    Final for that namespace: retrying cannot succeed, and the namespace's objects go with it.
    """

    @property
    def namespace(self) -> str:
        """The namespace being deleted (from the request's object, else empty)."""
        return (self.ref.namespace or "") if self.ref is not None else ""


class NotFoundError(ApiError):
    """404: the object (or its kind) does not exist."""

    code = 404


class ConflictError(ApiError):
    """409 ``Conflict``: a stale ``resourceVersion`` or a failed precondition."""

    code = 409


class AlreadyExistsError(ConflictError):
    """409 ``AlreadyExists``: a create for a name that is taken."""


class GoneError(ApiError):
    """410 ``Expired``/``Gone``: a watch or list from a version the server no longer keeps."""

    code = 410


class WatchSilentError(ApiError):
    """A watch stream sent nothing, not even a bookmark, for ``silence`` seconds (its
    inactivity timeout): the connection is presumed dead though never closed."""

    def __init__(self, message: str, *, silence: float, ref: ObjectRef | None = None) -> None:
        super().__init__(message, code=0, ref=ref)
        self.silence = silence


class UnsupportedMediaTypeError(ApiError):
    """415: e.g. a strategic merge patch sent for a custom resource."""

    code = 415


class InvalidError(ApiError):
    """422 ``Invalid``: validation failed; ``causes`` name the fields."""

    code = 422

    @property
    def immutable_fields(self) -> tuple[str, ...]:
        """Fields whose causes say they may not change (Kubernetes has no dedicated reason).

        A real server reports these as ``FieldValueInvalid`` ("field is immutable", "may not change
        once set") or ``FieldValueForbidden`` ("updates to ... are forbidden", "field is immutable
        when `immutable` is set"); each cause is read on its own, never the top-level message.
        """
        return tuple(
            c.field for c in self.causes
            if c.reason in _IMMUTABLE_REASONS and any(m in c.message for m in _IMMUTABLE_MARKERS)
        )


_IMMUTABLE_REASONS = frozenset({"FieldValueInvalid", "FieldValueForbidden"})
_IMMUTABLE_MARKERS = ("field is immutable", "may not change once set", "are forbidden")


class ImmutableFieldError(InvalidError):
    """An update needs a change the server refuses on an existing object, and recreate is off.

    ``fields`` names the immutable fields; the ``Status`` body and ``ref`` are the refusal's.
    """

    def __init__(self, source: InvalidError, *, fields: Sequence[str], kind_key: str) -> None:
        names = ", ".join(fields)
        message = (
            f"cannot update immutable field(s) {names}; pass recreate=True to "
            f"ResourceReconciler (or to reconcile_resource) and allow {kind_key!r} in "
            f"recreate_kinds to delete and recreate the object"
        )
        super().__init__(message, status=source.status, code=source.code, ref=source.ref)
        self.fields = tuple(fields)


class TooManyRequestsError(ApiError):
    """429: throttled; ``retry_after`` holds the server's ``Retry-After`` seconds."""

    code = 429


class ServerError(ApiError):
    """5xx: the server failed; retry with backoff."""

    code = 500


_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    415: UnsupportedMediaTypeError,
    422: InvalidError,
    429: TooManyRequestsError,
}


def api_error_from_status(
    code: int,
    status: Mapping[str, Any] | None,
    *,
    ref: ObjectRef | None = None,
    retry_after: float | None = None,
    text: str = "",
) -> ApiError:
    """Build the matching error for an HTTP code and its ``Status`` body (may be absent)."""
    body: Mapping[str, Any] = status if isinstance(status, Mapping) else {}
    reason = str(body.get("reason", ""))
    cls: type[ApiError]
    if code == 409 and reason == "AlreadyExists":
        cls = AlreadyExistsError
    elif code == 403 and _has_cause(body, "NamespaceTerminating"):
        cls = NamespaceTerminatingError
    elif code >= 500:
        cls = ServerError
    else:
        cls = _BY_CODE.get(code, ApiError)
    message = str(body.get("message") or text or f"HTTP {code}")
    return cls(message, status=body, code=code, ref=ref, retry_after=retry_after)


class InClusterConfigError(ReconcilerError, LookupError):
    """Not running in a cluster: ``missing`` names the variables or files not found."""

    def __init__(self, missing: tuple[str, ...]) -> None:
        super().__init__("no in-cluster configuration: missing " + ", ".join(missing))
        self.missing = missing


class RbacDerivationError(ReconcilerUsageError):
    """The role cannot be derived: ``build`` failed on a parent, or there is nothing to build."""

    def __init__(self, message: str, *, parent: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.parent = parent


class DataLossError(ConflictError):
    """Deleting a CRD would delete custom resources, and the CRD is not marked to allow it."""

    def __init__(self, message: str, *, ref: ObjectRef, custom_resources: int) -> None:
        super().__init__(message, code=409, ref=ref)
        self.custom_resources = custom_resources


class KubeconfigError(ReconcilerUsageError):
    """The cluster cannot be reached with the given (or default) configuration.

    ``source`` is the kubeconfig path or the server URL the message is about.
    """

    def __init__(self, message: str, *, source: str) -> None:
        super().__init__(message)
        self.source = source


def _has_cause(status: Mapping[str, Any], reason: str) -> bool:
    details = status.get("details")
    causes = details.get("causes") if isinstance(details, Mapping) else None
    return any(isinstance(c, Mapping) and c.get("reason") == reason for c in causes or ())


class WebhookCertificateError(ReconcilerUsageError):
    """The webhook's certificates cannot be read or made: ``source`` names the directory, Secret
    or file, and the message what is missing or wrong (never a key's content)."""

    def __init__(self, message: str, *, source: str) -> None:
        super().__init__(message)
        self.source = source


class ClusterSecretError(ReconcilerError, ValueError):
    """A cluster's Secret is not usable (its ``kubeconfig`` is not base64, YAML or a mapping):
    the message names the Secret, never its content (``reconciler._client.cluster_secrets``)."""


class ClusterUnavailableError(ReconcilerError):
    """A placed child's cluster cannot be used now: no such cluster Secret, an unusable one,
    or the cluster did not answer. ``cluster`` names it; the message never holds credentials
    (``reconciler._client.clusters``)."""

    def __init__(self, message: str, *, cluster: str) -> None:
        super().__init__(message)
        self.cluster = cluster
