"""operator-toolkit's effects layer: cluster client, reconciler, driver and the embedded API server.

The pure layers (``builders``, ``objectmatcher``) decide; this package does the I/O. This facade
holds what an operator's author calls: the ``Operator`` definition and its settings, the client,
the resource and parent reconcilers with their results, the identity type, the error tree and the
annotations users set. The machinery is in public submodules that only re-export:
``reconciler.informers`` (informers, caches, readers, the own-write recorder, label selectors),
``reconciler.queues``, ``reconciler.leadership``, ``reconciler.metrics``, ``reconciler.events``,
``reconciler.planning`` (pure plans, the counting client), ``reconciler.clocks`` and
``reconciler.testing`` (virtual clock, waits on a runtime).
"""

from reconciler._base.errors import (
    AlreadyExistsError,
    ApiError,
    BadRequestError,
    ClientUsageError,
    ConflictError,
    ForbiddenError,
    GoneError,
    ImmutableFieldError,
    InvalidError,
    LeadershipLostError,
    NamespaceTerminatingError,
    NotFoundError,
    ObjectRef,
    PermanentError,
    ReconcilerError,
    ReconcilerUsageError,
    ReconcilerUsageTypeError,
    ServerError,
    StatusCause,
    TooManyRequestsError,
    UnauthorizedError,
    UnsupportedMediaTypeError,
)
from reconciler._client.cluster_secrets import ClusterSecrets
from reconciler._client.kubernetes import KubernetesClient
from reconciler._client.protocol import ClusterClient, KubeObject, ListOptions, WatchEvent
from reconciler._commands.rbac import watches
from reconciler._driver import activation as _activation
from reconciler._driver.hooks import StartContext
from reconciler._driver.operators import Operator
from reconciler._driver.process import load_api_client
from reconciler._driver.resyncs import DEFAULT_RESYNC_INTERVAL, RESYNC_ANNOTATION, ResyncPolicy
from reconciler._driver.rollout_plan import Rollout
from reconciler._driver.runtime import OperatorRuntime
from reconciler._driver.settings import Applying, Policies, Reporting, Serving, Watching
from reconciler._driver.triggers import REQUESTED_AT_ANNOTATION
from reconciler._leadership.election import LeaderElection
from reconciler._reconcile.applying import ServerSideApply, ThreeWayMerge
from reconciler._reconcile.contention import Contention
from reconciler._reconcile.parent_settings import ParentSettings
from reconciler._reconcile.parents import ChildError, ParentReconciler, ParentResult
from reconciler._reconcile.readiness import Readiness
from reconciler._reconcile.reconciling import Action, ReconcileResult, ResourceReconciler
from reconciler._reconcile.resource_settings import ResourceSettings
from reconciler._sharding.decisions import Sharding

watch_served_kinds = watches(("apiextensions.k8s.io/v1", "CustomResourceDefinition"))(
    _activation.watch_served_kinds)

__all__ = [
    "DEFAULT_RESYNC_INTERVAL",
    "REQUESTED_AT_ANNOTATION",
    "RESYNC_ANNOTATION",
    "Action",
    "AlreadyExistsError",
    "ApiError",
    "Applying",
    "BadRequestError",
    "ChildError",
    "ClientUsageError",
    "ClusterClient",
    "ClusterSecrets",
    "ConflictError",
    "Contention",
    "ForbiddenError",
    "GoneError",
    "ImmutableFieldError",
    "InvalidError",
    "KubeObject",
    "KubernetesClient",
    "LeaderElection",
    "LeadershipLostError",
    "ListOptions",
    "NamespaceTerminatingError",
    "NotFoundError",
    "ObjectRef",
    "Operator",
    "OperatorRuntime",
    "ParentReconciler",
    "ParentResult",
    "ParentSettings",
    "PermanentError",
    "Policies",
    "Readiness",
    "ReconcileResult",
    "ReconcilerError",
    "ReconcilerUsageError",
    "ReconcilerUsageTypeError",
    "Reporting",
    "ResourceReconciler",
    "ResourceSettings",
    "ResyncPolicy",
    "Rollout",
    "ServerError",
    "ServerSideApply",
    "Serving",
    "Sharding",
    "StartContext",
    "StatusCause",
    "ThreeWayMerge",
    "TooManyRequestsError",
    "UnauthorizedError",
    "UnsupportedMediaTypeError",
    "WatchEvent",
    "Watching",
    "load_api_client",
    "watch_served_kinds",
    "watches",
]
