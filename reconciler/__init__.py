"""operator-toolkit's effects layer: cluster client, reconciler, driver and the embedded API server.

The pure layers (``builders``, ``objectmatcher``) decide; this package does the I/O.
"""

from reconciler._caches import PassThroughCache, ReadCache
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
from reconciler._events import EventRecorder
from reconciler._kubernetes import ClientUsageError, KubernetesClient, ResourceInfo

__all__ = [
    "AlreadyExistsError",
    "ApiError",
    "BadRequestError",
    "ClientUsageError",
    "ClusterClient",
    "ConflictError",
    "EventRecorder",
    "ForbiddenError",
    "GoneError",
    "InvalidError",
    "KubeObject",
    "KubernetesClient",
    "NotFoundError",
    "ObjectRef",
    "PassThroughCache",
    "ReadCache",
    "ReconcilerError",
    "ResourceInfo",
    "ServerError",
    "StatusCause",
    "TooManyRequestsError",
    "UnauthorizedError",
    "UnsupportedMediaTypeError",
    "WatchEvent",
]
