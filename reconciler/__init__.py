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
from reconciler._parents import ChildError, ParentReconciler, ParentResult, parent_conditions
from reconciler._reconciling import (
    DEFAULT_RECREATE_KINDS,
    Action,
    ApiCall,
    ImmutableFieldError,
    ReconcileResult,
    ResourceReconciler,
    is_owned,
)

__all__ = [
    "DEFAULT_RECREATE_KINDS",
    "Action",
    "AlreadyExistsError",
    "ApiCall",
    "ApiError",
    "BadRequestError",
    "ChildError",
    "ClientUsageError",
    "ClusterClient",
    "ConflictError",
    "EventRecorder",
    "ForbiddenError",
    "GoneError",
    "ImmutableFieldError",
    "InvalidError",
    "KubeObject",
    "KubernetesClient",
    "NotFoundError",
    "ObjectRef",
    "ParentReconciler",
    "ParentResult",
    "PassThroughCache",
    "ReadCache",
    "ReconcileResult",
    "ReconcilerError",
    "ResourceInfo",
    "ResourceReconciler",
    "ServerError",
    "StatusCause",
    "TooManyRequestsError",
    "UnauthorizedError",
    "UnsupportedMediaTypeError",
    "WatchEvent",
    "is_owned",
    "parent_conditions",
]
