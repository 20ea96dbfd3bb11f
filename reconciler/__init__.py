"""operator-toolkit's effects layer: cluster client, reconciler, driver and the embedded API server.

The pure layers (``builders``, ``objectmatcher``) decide; this package does the I/O.
"""

from reconciler._caches import PassThroughCache, ReadCache
from reconciler._clients import ClusterClient, KubeObject, ListOptions, WatchEvent
from reconciler._clocks import Clock, RealClock
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
from reconciler._informers import Informer, InformerManager
from reconciler._kubernetes import ClientUsageError, KubernetesClient, ResourceInfo
from reconciler._leadership import LeaderElection, LeaderElector, LeaseConfig
from reconciler._metrics import HealthServer, OperatorMetrics
from reconciler._operators import Operator
from reconciler._parents import ChildError, ParentReconciler, ParentResult, parent_conditions
from reconciler._queues import ExponentialBackoff, TokenBucket, WorkQueue
from reconciler._readers import InformerReader
from reconciler._readiness import DEFAULT_HEALTH_CHECKS, Readiness
from reconciler._reconciling import (
    DEFAULT_RECREATE_KINDS,
    Action,
    ApiCall,
    ImmutableFieldError,
    ReconcileResult,
    ResourceReconciler,
    is_owned,
)
from reconciler._recording import RecordingClient
from reconciler._resyncs import DEFAULT_RESYNC_INTERVAL, RESYNC_ANNOTATION, ResyncPolicy
from reconciler._runtime import OperatorRuntime
from reconciler._stores import IndexedCache
from reconciler._triggers import REQUESTED_AT_ANNOTATION
from reconciler.testing import VirtualClock

__all__ = [
    "DEFAULT_HEALTH_CHECKS",
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
    "LeaderElection",
    "LeaderElector",
    "LeaseConfig",
    "ListOptions",
    "NotFoundError",
    "ObjectRef",
    "Operator",
    "OperatorMetrics",
    "OperatorRuntime",
    "ParentReconciler",
    "ParentResult",
    "PassThroughCache",
    "ReadCache",
    "Readiness",
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
]
