"""The operator definition: a frozen value users write in a few lines.

``Operator`` names the parent kind, the builders and the driver's options; nested values carry
the two groups of settings that belong together: ``resync=ResyncPolicy(...)`` (interval,
bounds, heartbeat, overriding ConfigMap; ``reconciler._driver.resyncs``),
``leader_election=LeaderElection(...)`` (the Lease and its timing;
``reconciler._leadership.election``) and ``sharding=Sharding(...)`` (scale-out across replicas;
``reconciler._sharding.decisions``). This module only defines and validates;
``Operator.start(client)`` hands the value to the runtime (``reconciler._driver.runtime``) and
``Operator.run()`` to the process runner (``reconciler._driver.process``), both imported when
called so that the value stays at the bottom of the driver's layers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from builders import ResourceBuilder
from builders.inputs import InputDeclaration
from reconciler._base.clocks import Clock
from reconciler._base.errors import ReconcilerUsageError, ReconcilerUsageTypeError
from reconciler._cache.informers import WATCH_INACTIVITY_TIMEOUT
from reconciler._client.protocol import ClusterClient, KubeObject
from reconciler._driver.resyncs import ResyncPolicy
from reconciler._driver.rollout_plan import Rollout
from reconciler._leadership.election import LeaderElection
from reconciler._reconcile.applying import ApplyStrategy, ServerSideApply, ThreeWayMerge
from reconciler._reconcile.contention import Contention
from reconciler._reconcile.custom_conditions import condition_type_problem, declared_status
from reconciler._reconcile.guard import PlanGuard
from reconciler._reconcile.policies import DriftMode, PauseSettings, parse_ignore_fields
from reconciler._reconcile.readiness import Readiness, StatusBuilder
from reconciler._sharding.decisions import Sharding

if TYPE_CHECKING:
    from reconciler._driver.runtime import OperatorRuntime

__all__ = ["Operator", "StartHook"]

StartHook = Callable[["OperatorRuntime"], "Callable[[], object] | None"]
"""An ``Operator.on_start`` hook: called with the running runtime; may return a cleanup."""


@attrs.frozen(kw_only=True)
class Operator:
    """An operator: parents of one kind, the builders of their children, and driver options.

    ``build(parent)`` returns the parent's ``ResourceBuilder`` list. ``inputs=fn`` declares
    what the builders read besides the parent, as a pure function of it (``fn(parent)`` returns
    ``ObjectRef``s: a Secret, a ConfigMap, any object); then ``build(parent, inputs)`` receives
    them as a read-only ``builders.Inputs`` read from informers, and exactly the parents that
    read an input are reconciled when it changes (``reconciler._driver.inputs``; docs/driver.md,
    "Declared inputs"). ``resync`` is the one place
    the periodic resync is set (``ResyncPolicy``: interval, bounds, heartbeat, ConfigMap;
    ``OPTK_RESYNC_INTERVAL`` and the ConfigMap override the interval). ``leader_election`` turns
    election on (``LeaderElection``: Lease namespace, name, timing) or leaves it off (``None``).
    ``prune`` lists ``(apiVersion, kind)`` pairs whose unbuilt children are deleted. ``install``
    holds objects (e.g. the parent's CRD) created at start when missing. ``event_coalesce``
    bounds event-driven reconciles of one parent to one per that many seconds: the first event
    after a quiet period is handled at once, a burst is folded into one reconcile per window.
    ``watch_children=False`` ignores child events (drift waits for the periodic resync): the
    periodic-only configuration, kept for comparison and for very large, rarely drifting fleets.
    ``on_start`` hooks are called with the runtime once its parent informer runs and before any
    worker starts (e.g. to watch what ``build`` depends on, such as whether a CRD is served);
    each may return a cleanup callable, run in reverse order when the runtime stops.
    ``on_delete(parent)`` cleans up what lives outside the cluster when a parent is deleted: the
    toolkit keeps its ``optk.dev/cleanup`` finalizer on every parent while the hook is declared,
    runs the hook once the parent is being deleted and its uncollectable children are gone,
    retries it with backoff while it raises, and only then lets the parent go (docs/driver.md).
    ``sharding=Sharding(...)`` spreads the parents over all running replicas (docs/sharding.md):
    each replica reconciles and caches only the parents labelled with its shard, one elected
    replica assigns them (``leader_election``, when given, sets that election's namespace and
    timing); ``None`` (the default) keeps one active replica.
    ``readiness=Readiness(...)`` makes the ``Ready`` condition mean the children are healthy
    (available replicas, completed Jobs, a check per kind; ``reconciler._reconcile.readiness``),
    distinct from ``Reconciled`` (they match the spec); ``status=fn`` merges the pure
    ``fn(parent, observed_children) -> dict`` into the parent's status; its ``conditions`` (types
    of one's own, such as ``Available``) are merged with the toolkit's. ``condition_types``
    declares those types: checked here (a clash with the toolkit's ``Ready``, ``Reconciled``,
    ``Reconciling``, ``Stalled``, ``Cleanup`` or a malformed name is refused at once), and any
    other type the function returns stalls the parent (``Stalled``, no retry) instead of being
    written.
    ``reuse_builds`` (on by default) skips the builders when a parent and its declared
    ``inputs`` are unchanged since its last reconcile (same uid and ``resourceVersion``s: a
    periodic resync, a child's drift) and reuses what they built then (docs/driver.md). Builders
    that read anything else (an ``on_start`` watch) turn it off, or call
    ``runtime.resync_all()`` on each change of what they read, which drops every reused build.
    ``apply`` is how children are written: ``ThreeWayMerge()`` (the default: the last-applied
    annotation) or ``ServerSideApply(force=False)`` (the operator's name as field manager;
    docs/server-side-apply.md); ``apply_kinds`` overrides it per child kind
    (``{"ConfigMap": ThreeWayMerge()}``, kinds named as ``Kind.group``).
    People stay in control (docs/driver.md, "Pause, policies, drift and contention"):
    ``paused=True`` (``optk run --paused``, ``OPTK_PAUSED=1``) and ``paused_namespaces``
    (``--pause-namespace``, ``OPTK_PAUSED_NAMESPACES``) stop every write for maintenance, as
    the ``optk.dev/paused: "true"`` annotation does for one parent; ``drift="warn"`` reports a
    changed child (condition ``Drifted``, an Event, ``optk_drifted_objects``) instead of
    repairing it (``"repair"``, the default); ``ignore_fields`` lists JSON pointers
    (``/spec/replicas``) never compared on any child, as the ``optk.dev/ignore-fields``
    annotation does on one; ``contention=Contention(...)`` says when a field another writer
    keeps changing back counts as contested and how the repair backs off (``None``: never).
    ``rollout=Rollout(...)`` moves parents to a new version of the operator's code in batches
    (docs/driver.md, "Gradual rollouts"; ``None``: all at once, the default).
    ``watch_inactivity_timeout`` (130 s) is how long any of the operator's watches may send
    nothing, not even a bookmark, before it is presumed dead and replaced (docs/driver.md).
    """

    api_version: str
    kind: str
    build: Callable[..., Iterable[ResourceBuilder]]
    name: str = "optk"
    resync: ResyncPolicy = attrs.field(factory=ResyncPolicy)
    leader_election: LeaderElection | None = None
    workers: int = 4
    recreate: bool = False
    prune: Collection[tuple[str, str]] = ()
    namespace: str | None = None
    metrics_port: int | None = None
    shutdown_timeout: float = 30.0
    event_coalesce: float = 0.05
    watch_children: bool = True
    events: bool = True
    install: Sequence[KubeObject] = ()
    on_start: Sequence[StartHook] = ()
    on_delete: Callable[[KubeObject], object] | None = None
    sharding: Sharding | None = None
    readiness: Readiness | None = None
    status: StatusBuilder | None = None
    condition_types: Sequence[str] = ()
    reuse_builds: bool = True
    watch_inactivity_timeout: float = WATCH_INACTIVITY_TIMEOUT
    apply: ApplyStrategy = attrs.field(factory=ThreeWayMerge)
    apply_kinds: Mapping[str, ApplyStrategy] = attrs.field(factory=dict)
    paused: bool = False
    paused_namespaces: Collection[str] = attrs.field(default=(), converter=tuple)
    drift: DriftMode = attrs.field(default=DriftMode.REPAIR, converter=DriftMode)
    ignore_fields: Sequence[str] = attrs.field(default=(), converter=tuple)
    contention: Contention | None = attrs.field(factory=Contention)
    rollout: Rollout | None = None
    inputs: InputDeclaration | None = None

    def __attrs_post_init__(self) -> None:
        for strategy in (self.apply, *self.apply_kinds.values()):
            if not isinstance(strategy, (ThreeWayMerge, ServerSideApply)):
                raise ReconcilerUsageTypeError(
                    f"operator {self.name!r}: apply must be ThreeWayMerge() or "
                    f"ServerSideApply(), got {strategy!r}")
        if self.workers < 1:
            raise ReconcilerUsageError(
                f"operator {self.name!r}: workers must be >= 1, got {self.workers}"
            )
        if not self.name or len(self.name) > 63:
            raise ReconcilerUsageError(
                f"operator name must be a label value of 1..63 chars: {self.name!r}"
            )
        if not callable(self.build):
            raise ReconcilerUsageTypeError(
                f"operator {self.name!r}: build must be callable"
            )
        if self.inputs is not None and not callable(self.inputs):
            raise ReconcilerUsageTypeError(
                f"operator {self.name!r}: inputs must be callable (parent -> ObjectRefs) or None")
        if self.on_delete is not None and not callable(self.on_delete):
            raise ReconcilerUsageTypeError(
                f"operator {self.name!r}: on_delete must be callable or None"
            )
        if self.status is not None and not callable(self.status):
            raise ReconcilerUsageTypeError(
                f"operator {self.name!r}: status must be callable or None")
        if isinstance(self.condition_types, str):
            raise ReconcilerUsageTypeError(
                f"operator {self.name!r}: condition_types must be a list of names, not a string")
        for name in self.condition_types:
            if (why := condition_type_problem(name)) is not None:
                raise ReconcilerUsageError(f"operator {self.name!r}: {why}")
        if not isinstance(self.resync, ResyncPolicy):
            raise ReconcilerUsageTypeError(
                f"operator {self.name!r}: resync must be a ResyncPolicy, "
                            f"got {type(self.resync).__name__}")
        if self.leader_election is not None and not isinstance(
            self.leader_election, LeaderElection
        ):
            raise ReconcilerUsageTypeError(
                f"operator {self.name!r}: leader_election must be a LeaderElection "
                            f"or None, got {type(self.leader_election).__name__}")
        parse_ignore_fields(",".join(self.ignore_fields))  # names the bad pointer
        if self.contention is not None and not isinstance(self.contention, Contention):
            raise ReconcilerUsageTypeError(
                f"operator {self.name!r}: contention must be a Contention or None, "
                f"got {type(self.contention).__name__}")
        if self.rollout is not None and not isinstance(self.rollout, Rollout):
            raise ReconcilerUsageTypeError(
                f"operator {self.name!r}: rollout must be a Rollout or None, "
                f"got {type(self.rollout).__name__}")
        if self.sharding is not None and not isinstance(self.sharding, Sharding):
            raise ReconcilerUsageTypeError(
                f"operator {self.name!r}: sharding must be a Sharding or None, "
                f"got {type(self.sharding).__name__}")

    @property
    def status_function(self) -> StatusBuilder | None:
        """``status`` held to ``condition_types`` when some are declared (what the runtime
        calls)."""
        if self.status is None or not self.condition_types:
            return self.status
        return declared_status(self.status, self.condition_types)

    @property
    def election(self) -> LeaderElection | None:
        """The leader election settings with the Lease name filled in (``<name>-leader``)."""
        if self.leader_election is None:
            return None
        return self.leader_election.named(f"{self.name}-leader")

    @property
    def heartbeat_lease(self) -> tuple[str, str] | None:
        """``(namespace, name)`` of the resync heartbeat's Lease, or None when it is off."""
        if self.resync.heartbeat is None:
            return None
        namespace = self.resync.heartbeat_namespace or (
            self.leader_election.namespace if self.leader_election is not None
            else self.sharding.namespace if self.sharding is not None else "default"
        )
        return namespace, f"{self.name}-resync"

    def policy(self, environ: Mapping[str, str] | None = None) -> ResyncPolicy:
        """The resync policy from code and environment (the ConfigMap applies at run time)."""
        return self.resync.with_environment(os.environ if environ is None else environ)

    def pauses(self, environ: Mapping[str, str] | None = None) -> PauseSettings:
        """The operator- and namespace-wide pauses from code and environment."""
        return PauseSettings.of(paused=self.paused, namespaces=self.paused_namespaces,
                                environ=os.environ if environ is None else environ)

    def plan_guard(self, clock: Clock) -> PlanGuard:
        """What the executor asks about each plan: drift mode, ignored fields, contention."""
        return PlanGuard.of(drift=self.drift, ignore_fields=self.ignore_fields,
                            contention=self.contention, clock=clock, field_manager=self.name)

    def start(
        self,
        client: ClusterClient,
        *,
        clock: Clock | None = None,
        identity: str | None = None,
        environ: Mapping[str, str] | None = None,
        metrics_port: int | None = None,
        metrics_bind_address: str | None = None,
        metrics_auth: bool = False,
    ) -> OperatorRuntime:
        """Start the operator against ``client``; returns the running runtime.

        ``metrics_bind_address``: the address ``/metrics``, ``/healthz`` and ``/readyz`` are
        served on (with a metrics port); None: every interface inside a pod, else loopback.
        ``metrics_auth``: ``/metrics`` answers only a bearer token the API server authenticates
        (TokenReview) and allows ``get`` on ``/metrics`` (SubjectAccessReview)."""
        from reconciler._driver.runtime import OperatorRuntime

        runtime = OperatorRuntime(
            self, client, clock=clock, identity=identity, environ=environ,
            metrics_port=self.metrics_port if metrics_port is None else metrics_port,
            metrics_bind_address=metrics_bind_address, metrics_auth=metrics_auth,
        )
        return runtime.start()

    def run(
        self,
        *,
        kubeconfig: str | None = None,
        embedded: bool = False,
        metrics_port: int | None = None,
        metrics_bind_address: str | None = None,
        metrics_auth: bool = False,
    ) -> int:
        """Run until SIGTERM/SIGINT (or lost leadership); returns the process exit code."""
        from reconciler._driver.process import run_operator

        return run_operator(
            self, kubeconfig=kubeconfig, embedded=embedded, metrics_port=metrics_port,
            metrics_bind_address=metrics_bind_address, metrics_auth=metrics_auth,
        )
