"""operator-toolkit's effects layer: cluster client, reconciler, driver and the embedded API server.

The pure layers (``builders``, ``objectmatcher``) decide; this package does the I/O.
"""

from reconciler._caches import PassThroughCache, ReadCache
from reconciler._clients import ClusterClient, KubeObject, WatchEvent
from reconciler._clocks import Clock, RealClock, VirtualClock
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
from reconciler._informers import (
    IndexedCache,
    Informer,
    InformerManager,
    InformerReader,
    RecordingClient,
)
from reconciler._kubernetes import ClientUsageError, KubernetesClient, ResourceInfo
from reconciler._leadership import LeaderElector, LeaseConfig
from reconciler._metrics import HealthServer, OperatorMetrics
from reconciler._operators import REQUESTED_AT_ANNOTATION, Operator, OperatorRuntime
from reconciler._parents import ChildError, ParentReconciler, ParentResult, parent_conditions
from reconciler._queues import ExponentialBackoff, TokenBucket, WorkQueue
from reconciler._rbac import watches
from reconciler._reconciling import (
    DEFAULT_RECREATE_KINDS,
    Action,
    ApiCall,
    ImmutableFieldError,
    ReconcileResult,
    ResourceReconciler,
    is_owned,
)
from reconciler._resyncs import DEFAULT_RESYNC_INTERVAL, RESYNC_ANNOTATION, ResyncPolicy

__all__ = [
    "DEFAULT_RECREATE_KINDS",
    "DEFAULT_RESYNC_INTERVAL",
    "REQUESTED_AT_ANNOTATION",
    "RESYNC_ANNOTATION",
    "Action",
    "AlreadyExistsError",
    "ApiCall",
    "ApiError",
    "BadRequestError",
    "ChildError",
    "ClientUsageError",
    "Clock",
    "ClusterClient",
    "ConflictError",
    "EventRecorder",
    "ExponentialBackoff",
    "ForbiddenError",
    "GoneError",
    "HealthServer",
    "ImmutableFieldError",
    "IndexedCache",
    "Informer",
    "InformerManager",
    "InformerReader",
    "InvalidError",
    "KubeObject",
    "KubernetesClient",
    "LeaderElector",
    "LeaseConfig",
    "NotFoundError",
    "ObjectRef",
    "Operator",
    "OperatorMetrics",
    "OperatorRuntime",
    "ParentReconciler",
    "ParentResult",
    "PassThroughCache",
    "ReadCache",
    "RealClock",
    "ReconcileResult",
    "ReconcilerError",
    "RecordingClient",
    "ResourceInfo",
    "ResourceReconciler",
    "ResyncPolicy",
    "ServerError",
    "StatusCause",
    "TokenBucket",
    "TooManyRequestsError",
    "UnauthorizedError",
    "UnsupportedMediaTypeError",
    "VirtualClock",
    "WatchEvent",
    "WorkQueue",
    "is_owned",
    "parent_conditions",
    "watches",
]
