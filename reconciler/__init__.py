"""operator-toolkit's effects layer: cluster client, reconciler, driver and the embedded API server.

The pure layers (``builders``, ``objectmatcher``) decide; this package does the I/O.
"""

from reconciler._clients import ClusterClient, KubeObject, WatchEvent
from reconciler._errors import (
    AlreadyExistsError,
    ApiError,
    BadRequestError,
    ConflictError,
    ForbiddenError,
    GoneError,
    InvalidError,
    NotFoundError,
    ObjectRef,
    ReconcilerError,
    ServerError,
    StatusCause,
    TooManyRequestsError,
    UnauthorizedError,
    UnsupportedMediaTypeError,
)

__all__ = [
    "AlreadyExistsError",
    "ApiError",
    "BadRequestError",
    "ClusterClient",
    "ConflictError",
    "ForbiddenError",
    "GoneError",
    "InvalidError",
    "KubeObject",
    "NotFoundError",
    "ObjectRef",
    "ReconcilerError",
    "ServerError",
    "StatusCause",
    "TooManyRequestsError",
    "UnauthorizedError",
    "UnsupportedMediaTypeError",
    "WatchEvent",
]
