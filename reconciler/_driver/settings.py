"""The operator's settings, grouped by concept: what ``Operator`` holds besides its identity.

Why it exists: ``Operator`` had grown to 33 flat fields; kopf groups its settings "semantically
instead of a flat mega-object", and so does this module. Each group is a frozen, keyword-only value
that validates itself and names the bad field:

- :class:`Policies`: when the operator may write (``recreate``, ``prune``, ``paused``,
  ``paused_namespaces``, ``drift``, ``ignore_fields``, ``contention``);
- :class:`Applying`: how a child is written (``strategy``, per-kind ``kinds``) and whether a
  parent's build is reused (``reuse_builds``);
- :class:`Watching`: how events reach the queue (``coalesce``, ``children``,
  ``inactivity_timeout``);
- :class:`Serving`: where ``/metrics``, ``/healthz`` and ``/readyz`` are served
  (``metrics_port``, ``bind_address``, ``auth``);
- :class:`Reporting`: what the operator says about a parent (``events``, ``status``,
  ``condition_types``, ``readiness``).

:data:`MOVED` maps each flat ``Operator`` keyword of earlier releases to its group and field; the
flat keywords keep working for this release with a ``DeprecationWarning`` naming the new place
(``reconciler._driver.operators``). Boundary: values and their checks only; what each setting
does is the reconciler's and the driver's (docs/driver.md).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import attrs

from reconciler._base.errors import ReconcilerUsageError, ReconcilerUsageTypeError
from reconciler._cache.informers import WATCH_INACTIVITY_TIMEOUT
from reconciler._client.cluster_secrets import ClusterSecrets
from reconciler._reconcile.applying import ApplyStrategy, ServerSideApply, ThreeWayMerge
from reconciler._reconcile.contention import Contention
from reconciler._reconcile.custom_conditions import condition_type_problem
from reconciler._reconcile.policies import DriftMode, parse_ignore_fields
from reconciler._reconcile.readiness import Readiness, StatusBuilder

__all__ = ["MOVED", "Applying", "Policies", "Reporting", "Serving", "Watching"]


def _names(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise ReconcilerUsageTypeError(f"a list of names was expected, not the string {value!r}")
    return tuple(value)


def _pairs(value: Collection[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple((str(a), str(k)) for a, k in value)


@attrs.frozen(kw_only=True)
class Policies:
    """When the operator may write (docs/driver.md, "Pause, policies, drift and contention").

    ``recreate``: delete and create a child whose update the server refuses as immutable.
    ``prune``: ``(apiVersion, kind)`` pairs whose children no longer built are deleted.
    ``paused`` (``optk run --paused``, ``OPTK_PAUSED=1``) and ``paused_namespaces``
    (``--pause-namespace``, ``OPTK_PAUSED_NAMESPACES``) stop every write, as the
    ``optk.dev/paused: "true"`` annotation does for one parent. ``drift="warn"`` reports a
    changed child (condition ``Drifted``) instead of repairing it (``"repair"``, the default).
    ``ignore_fields``: JSON pointers (``/spec/replicas``) never compared on any child.
    ``contention``: when a field another writer keeps changing back counts as contested and how
    the repair backs off (``None``: never)."""

    recreate: bool = False
    prune: Collection[tuple[str, str]] = attrs.field(default=(), converter=_pairs)
    paused: bool = False
    paused_namespaces: Collection[str] = attrs.field(default=(), converter=_names)
    drift: DriftMode = attrs.field(default=DriftMode.REPAIR, converter=DriftMode)
    ignore_fields: Sequence[str] = attrs.field(default=(), converter=_names)
    contention: Contention | None = attrs.field(factory=Contention)

    def __attrs_post_init__(self) -> None:
        parse_ignore_fields(",".join(self.ignore_fields))  # names the bad pointer
        if self.contention is not None and not isinstance(self.contention, Contention):
            raise ReconcilerUsageTypeError(
                f"Policies: contention must be a Contention or None, "
                f"got {type(self.contention).__name__}")


@attrs.frozen(kw_only=True)
class Applying:
    """How a child is written: ``strategy`` (``ThreeWayMerge()``, the default, or
    ``ServerSideApply()``), ``kinds`` per child kind (``{"Deployment.apps": ...}``),
    ``reuse_builds``: a parent whose spec and inputs did not change reuses its last build, and
    ``clusters`` (``ClusterSecrets(...)``; None: none): the other clusters a child may be
    written to (``builders.placed``, docs/clusters.md)."""

    strategy: ApplyStrategy = attrs.field(factory=ThreeWayMerge)
    kinds: Mapping[str, ApplyStrategy] = attrs.field(factory=dict)
    reuse_builds: bool = True
    clusters: ClusterSecrets | None = None

    def __attrs_post_init__(self) -> None:
        for name, strategy in (("strategy", self.strategy),
                               *((f"kinds[{k!r}]", v) for k, v in self.kinds.items())):
            if not isinstance(strategy, (ThreeWayMerge, ServerSideApply)):
                raise ReconcilerUsageTypeError(
                    f"Applying: {name} must be ThreeWayMerge() or ServerSideApply(), "
                    f"got {strategy!r}")
        if self.clusters is not None and not isinstance(self.clusters, ClusterSecrets):
            raise ReconcilerUsageTypeError(
                f"Applying: clusters must be ClusterSecrets(...) or None, got {self.clusters!r}")


@attrs.frozen(kw_only=True)
class Watching:
    """How events reach the queue: ``coalesce`` (seconds a parent's events are gathered into
    one reconcile), ``children`` (watch the children: a changed or deleted child queues its
    parent; off, only the resync repairs them) and ``inactivity_timeout`` (130 s: how long a
    watch may send nothing, not even a bookmark, before it is presumed dead and replaced)."""

    coalesce: float = 0.05
    children: bool = True
    inactivity_timeout: float = WATCH_INACTIVITY_TIMEOUT

    def __attrs_post_init__(self) -> None:
        if self.coalesce < 0:
            raise ReconcilerUsageError(f"Watching: coalesce must be >= 0, got {self.coalesce}")
        if self.inactivity_timeout <= 0:
            raise ReconcilerUsageError(
                f"Watching: inactivity_timeout must be > 0, got {self.inactivity_timeout}")


@attrs.frozen(kw_only=True)
class Serving:
    """Where ``/metrics``, ``/healthz`` and ``/readyz`` are served: ``metrics_port`` (None: not
    served), ``bind_address`` (None: every interface inside a pod, else loopback) and ``auth``
    (``/metrics`` answers only a bearer token the API server authenticates and allows ``get``
    on ``/metrics``: TokenReview and SubjectAccessReview). ``optk run --metrics-port``,
    ``--metrics-bind-address`` and ``--metrics-auth`` set the same."""

    metrics_port: int | None = None
    bind_address: str | None = None
    auth: bool = False

    def __attrs_post_init__(self) -> None:
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise ReconcilerUsageError(
                f"Serving: metrics_port must be 0..65535 or None, got {self.metrics_port}")


@attrs.frozen(kw_only=True)
class Reporting:
    """What the operator says about a parent: ``events`` (Kubernetes Events on the parent),
    ``status`` (a function of the parent and its children returning status fields and
    conditions), ``condition_types`` (the custom condition types ``status`` may set; others are
    refused) and ``readiness`` (how Ready is read from the children's health)."""

    events: bool = True
    status: StatusBuilder | None = None
    condition_types: Sequence[str] = ()
    readiness: Readiness | None = None

    def __attrs_post_init__(self) -> None:
        if self.status is not None and not callable(self.status):
            raise ReconcilerUsageTypeError("Reporting: status must be callable or None")
        if isinstance(self.condition_types, str):
            raise ReconcilerUsageTypeError(
                "Reporting: condition_types must be a list of names, not a string")
        for name in self.condition_types:
            if (why := condition_type_problem(name)) is not None:
                raise ReconcilerUsageError(f"Reporting: {why}")


MOVED: Mapping[str, tuple[str, str]] = {
    "recreate": ("policies", "recreate"),
    "prune": ("policies", "prune"),
    "paused": ("policies", "paused"),
    "paused_namespaces": ("policies", "paused_namespaces"),
    "drift": ("policies", "drift"),
    "ignore_fields": ("policies", "ignore_fields"),
    "contention": ("policies", "contention"),
    "apply": ("applying", "strategy"),
    "apply_kinds": ("applying", "kinds"),
    "reuse_builds": ("applying", "reuse_builds"),
    "event_coalesce": ("watching", "coalesce"),
    "watch_children": ("watching", "children"),
    "watch_inactivity_timeout": ("watching", "inactivity_timeout"),
    "metrics_port": ("serving", "metrics_port"),
    "events": ("reporting", "events"),
    "status": ("reporting", "status"),
    "condition_types": ("reporting", "condition_types"),
    "readiness": ("reporting", "readiness"),
}
"""Each flat ``Operator`` keyword of earlier releases: ``(group, field)`` where it lives now."""

GROUPS: Mapping[str, type[Any]] = {
    "policies": Policies, "applying": Applying, "watching": Watching, "serving": Serving,
    "reporting": Reporting,
}
"""Each group's ``Operator`` field and its class."""
