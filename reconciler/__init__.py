"""operator-toolkit's effects layer: cluster client, reconciler, driver and the embedded API server.

The pure layers (``builders``, ``objectmatcher``) decide; this package does the I/O. This facade
holds what an operator's author calls: the ``Operator`` definition and its settings, the client,
the resource and parent reconcilers with their results, the identity type, the error tree and the
annotations users set. The machinery is in public submodules that only re-export:
``reconciler.informers`` (informers, caches, readers, the own-write recorder, label selectors),
``reconciler.queues``, ``reconciler.leadership``, ``reconciler.metrics``, ``reconciler.events``,
``reconciler.planning`` (pure plans, the counting client), ``reconciler.clocks`` and
``reconciler.testing`` (virtual clock, waits on a runtime).

The names are loaded on first use (PEP 562 ``__getattr__``), each with the private module that
defines it: ``import reconciler`` alone imports nothing else, and ``from reconciler import
Operator`` imports what the ``Operator`` value needs, not the runtime, the HTTP transport, the
metrics or the command line (issue 39: an operator pays at start only for what it uses; the
embedded server, webhooks, CEL, jsonschema and the client's models stay unloaded until used,
tests/test_lazy_imports.py). ``__all__``, ``dir()`` and ``from reconciler import *`` are as
they were; type checkers read the imports under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

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
del TYPE_CHECKING  # not a public name

_LAZY: dict[str, str] = {
    "AlreadyExistsError": "reconciler._base.errors",
    "ApiError": "reconciler._base.errors",
    "BadRequestError": "reconciler._base.errors",
    "ClientUsageError": "reconciler._base.errors",
    "ConflictError": "reconciler._base.errors",
    "ForbiddenError": "reconciler._base.errors",
    "GoneError": "reconciler._base.errors",
    "ImmutableFieldError": "reconciler._base.errors",
    "InvalidError": "reconciler._base.errors",
    "LeadershipLostError": "reconciler._base.errors",
    "NamespaceTerminatingError": "reconciler._base.errors",
    "NotFoundError": "reconciler._base.errors",
    "ObjectRef": "reconciler._base.errors",
    "PermanentError": "reconciler._base.errors",
    "ReconcilerError": "reconciler._base.errors",
    "ReconcilerUsageError": "reconciler._base.errors",
    "ReconcilerUsageTypeError": "reconciler._base.errors",
    "ServerError": "reconciler._base.errors",
    "StatusCause": "reconciler._base.errors",
    "TooManyRequestsError": "reconciler._base.errors",
    "UnauthorizedError": "reconciler._base.errors",
    "UnsupportedMediaTypeError": "reconciler._base.errors",
    "KubernetesClient": "reconciler._client.kubernetes",
    "ClusterSecrets": "reconciler._client.cluster_secrets",
    "ClusterClient": "reconciler._client.protocol",
    "KubeObject": "reconciler._client.protocol",
    "ListOptions": "reconciler._client.protocol",
    "WatchEvent": "reconciler._client.protocol",
    "watches": "reconciler._commands.rbac",
    "StartContext": "reconciler._driver.hooks",
    "Operator": "reconciler._driver.operators",
    "load_api_client": "reconciler._driver.process",
    "DEFAULT_RESYNC_INTERVAL": "reconciler._driver.resyncs",
    "RESYNC_ANNOTATION": "reconciler._driver.resyncs",
    "ResyncPolicy": "reconciler._driver.resyncs",
    "Rollout": "reconciler._driver.rollout_plan",
    "OperatorRuntime": "reconciler._driver.runtime",
    "Applying": "reconciler._driver.settings",
    "Policies": "reconciler._driver.settings",
    "Reporting": "reconciler._driver.settings",
    "Serving": "reconciler._driver.settings",
    "Watching": "reconciler._driver.settings",
    "REQUESTED_AT_ANNOTATION": "reconciler._driver.triggers",
    "LeaderElection": "reconciler._leadership.election",
    "ServerSideApply": "reconciler._reconcile.applying",
    "ThreeWayMerge": "reconciler._reconcile.applying",
    "Contention": "reconciler._reconcile.contention",
    "ParentSettings": "reconciler._reconcile.parent_settings",
    "ChildError": "reconciler._reconcile.parents",
    "ParentReconciler": "reconciler._reconcile.parents",
    "ParentResult": "reconciler._reconcile.parents",
    "Readiness": "reconciler._reconcile.readiness",
    "Action": "reconciler._reconcile.reconciling",
    "ReconcileResult": "reconciler._reconcile.reconciling",
    "ResourceReconciler": "reconciler._reconcile.reconciling",
    "ResourceSettings": "reconciler._reconcile.resource_settings",
    "Sharding": "reconciler._sharding.decisions",
}
"""Each public name but ``watch_served_kinds``, by the private module that defines it."""


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept in this module."""
    if name == "watch_served_kinds":
        rbac = _importlib.import_module("reconciler._commands.rbac")
        activation = _importlib.import_module("reconciler._driver.activation")
        value = rbac.watches(("apiextensions.k8s.io/v1", "CustomResourceDefinition"))(
            activation.watch_served_kinds)
    elif name in _LAZY:
        value = getattr(_importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
