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
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from builders import ResourceBuilder
from builders.inputs import InputDeclaration
from reconciler._base.clocks import Clock
from reconciler._base.errors import ReconcilerUsageError, ReconcilerUsageTypeError
from reconciler._client.cluster_secrets import ClusterSecrets
from reconciler._client.protocol import ClusterClient, KubeObject
from reconciler._driver.hooks import StartHook
from reconciler._driver.resyncs import ResyncPolicy
from reconciler._driver.rollout_plan import Rollout
from reconciler._driver.settings import (
    GROUPS,
    MOVED,
    Applying,
    Policies,
    Reporting,
    Serving,
    Watching,
)
from reconciler._leadership.election import LeaderElection
from reconciler._reconcile.custom_conditions import declared_status
from reconciler._reconcile.guard import PlanGuard
from reconciler._reconcile.parent_settings import ParentSettings
from reconciler._reconcile.policies import PauseSettings
from reconciler._reconcile.readiness import StatusBuilder
from reconciler._reconcile.resource_settings import ResourceSettings
from reconciler._sharding.decisions import Sharding, child_labels

if TYPE_CHECKING:
    from reconciler._driver.runtime import OperatorRuntime

__all__ = ["Operator", "StartHook"]


@attrs.frozen(kw_only=True, init=False)
class Operator:
    """An operator: parents of one kind, the builders of their children, and driver options.

    ``build(parent)`` returns the parent's ``ResourceBuilder`` list. ``inputs=fn`` declares
    what the builders read besides the parent, as a pure function of it (``fn(parent)`` returns
    ``ObjectRef``s: a Secret, a ConfigMap, any object); then ``build(parent, inputs)`` receives
    them as a read-only ``builders.Inputs`` read from informers, and exactly the parents that
    read an input are reconciled when it changes (``reconciler._cache.inputs``; docs/driver.md,
    "Declared inputs"). ``namespace`` limits the operator to one namespace (None: all).
    ``workers`` reconcile in parallel; ``shutdown_timeout`` bounds a clean stop. ``install``
    holds objects (e.g. the parent's CRD) created at start when missing; ``on_start`` hooks run
    once the runtime started (each may return a cleanup); ``on_delete(parent)`` runs before a
    parent's finalizer is removed.

    Settings that belong together are values of their own:
    ``resync=ResyncPolicy(...)`` (interval, bounds, heartbeat, ConfigMap; ``OPTK_RESYNC_INTERVAL``
    and the ConfigMap override the interval); ``leader_election=LeaderElection(...)`` (the Lease
    and its timing; None: off); ``sharding=Sharding(...)`` (scale-out across replicas);
    ``rollout=Rollout(...)`` (a new version of the code moves parents in batches, docs/driver.md
    "Gradual rollouts"; None: all at once); and the groups of ``reconciler._driver.settings``:
    ``policies=Policies(...)`` (recreate, prune, pauses, drift mode, ignored fields, contention),
    ``applying=Applying(...)`` (strategy, per-kind strategies, reused builds),
    ``watching=Watching(...)`` (coalescing, child watches, inactivity timeout),
    ``serving=Serving(...)`` (metrics port, bind address, auth) and
    ``reporting=Reporting(...)`` (Events, status function, condition types, readiness).

    The flat keywords of earlier releases (``recreate=``, ``apply=``, ``events=``, ...: the
    keys of ``settings.MOVED``) still work for this release, with a ``DeprecationWarning``
    naming the new place; so do reads of them (``operator.events``).
    """

    api_version: str
    kind: str
    build: Callable[..., Iterable[ResourceBuilder]]
    name: str = "optk"
    namespace: str | None = None
    inputs: InputDeclaration | None = None
    workers: int = 4
    shutdown_timeout: float = 30.0
    install: Sequence[KubeObject] = ()
    on_start: Sequence[StartHook] = ()
    on_delete: Callable[[KubeObject], object] | None = None
    resync: ResyncPolicy = attrs.field(factory=ResyncPolicy)
    leader_election: LeaderElection | None = None
    sharding: Sharding | None = None
    rollout: Rollout | None = None
    policies: Policies = attrs.field(factory=Policies)
    applying: Applying = attrs.field(factory=Applying)
    watching: Watching = attrs.field(factory=Watching)
    serving: Serving = attrs.field(factory=Serving)
    reporting: Reporting = attrs.field(factory=Reporting)

    def __init__(
        self,
        *,
        api_version: str,
        kind: str,
        build: Callable[..., Iterable[ResourceBuilder]],
        name: str = "optk",
        namespace: str | None = None,
        inputs: InputDeclaration | None = None,
        workers: int = 4,
        shutdown_timeout: float = 30.0,
        install: Sequence[KubeObject] = (),
        on_start: Sequence[StartHook] = (),
        on_delete: Callable[[KubeObject], object] | None = None,
        resync: ResyncPolicy | None = None,
        leader_election: LeaderElection | None = None,
        sharding: Sharding | None = None,
        rollout: Rollout | None = None,
        policies: Policies | None = None,
        applying: Applying | None = None,
        watching: Watching | None = None,
        serving: Serving | None = None,
        reporting: Reporting | None = None,
        clusters: ClusterSecrets | None = None,
        **moved: Any,
    ) -> None:
        groups: dict[str, Any] = {
            "policies": Policies() if policies is None else policies,
            "applying": Applying() if applying is None else applying,
            "watching": Watching() if watching is None else watching,
            "serving": Serving() if serving is None else serving,
            "reporting": Reporting() if reporting is None else reporting,
        }
        for group, value in groups.items():
            if not isinstance(value, GROUPS[group]):
                raise ReconcilerUsageTypeError(
                    f"operator {name!r}: {group} must be a {GROUPS[group].__name__}, "
                    f"got {type(value).__name__}")
        groups = _moved_into(groups, moved, operator=name)
        if clusters is not None:  # issue 41's spelling: where a child is written is applying's
            if groups["applying"].clusters not in (None, clusters):
                raise ReconcilerUsageError(
                    f"operator {name!r}: clusters given twice, as Operator(clusters=...) and "
                    "Applying(clusters=...): give one")
            groups["applying"] = attrs.evolve(groups["applying"], clusters=clusters)
        self.__attrs_init__(
            api_version=api_version, kind=kind, build=build, name=name, namespace=namespace,
            inputs=inputs, workers=workers, shutdown_timeout=shutdown_timeout, install=install,
            on_start=on_start, on_delete=on_delete,
            resync=ResyncPolicy() if resync is None else resync,
            leader_election=leader_election, sharding=sharding, rollout=rollout, **groups)

    def __attrs_post_init__(self) -> None:
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
        if self.rollout is not None and not isinstance(self.rollout, Rollout):
            raise ReconcilerUsageTypeError(
                f"operator {self.name!r}: rollout must be a Rollout or None, "
                f"got {type(self.rollout).__name__}")
        if self.sharding is not None and not isinstance(self.sharding, Sharding):
            raise ReconcilerUsageTypeError(
                f"operator {self.name!r}: sharding must be a Sharding or None, "
                f"got {type(self.sharding).__name__}")

    @property
    def clusters(self) -> ClusterSecrets | None:
        """The other clusters a child may be written to: ``Operator(clusters=...)``, kept as
        ``applying.clusters`` (docs/clusters.md)."""
        return self.applying.clusters

    def __getattr__(self, name: str) -> Any:
        """A flat setting of earlier releases (``operator.events``), read from its group with
        a ``DeprecationWarning`` naming the new place."""
        where = MOVED.get(name)
        if where is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        group, field = where
        warnings.warn(f"Operator.{name} is deprecated: read Operator.{group}.{field}",
                      DeprecationWarning, stacklevel=2)
        return getattr(getattr(self, group), field)

    @property
    def status_function(self) -> StatusBuilder | None:
        """``status`` held to ``condition_types`` when some are declared (what the runtime
        calls)."""
        reporting = self.reporting
        if reporting.status is None or not reporting.condition_types:
            return reporting.status
        return declared_status(reporting.status, reporting.condition_types)

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
        return PauseSettings.of(paused=self.policies.paused,
                                namespaces=self.policies.paused_namespaces,
                                environ=os.environ if environ is None else environ)

    def resource_settings(self) -> ResourceSettings:
        """How its children are written (``ResourceReconciler``): the apply strategies, the
        operator's name as field manager, recreation."""
        return ResourceSettings(apply=self.applying.strategy, apply_kinds=self.applying.kinds,
                                field_manager=self.name, recreate=self.policies.recreate)

    def parent_settings(self, environ: Mapping[str, str] | None = None, *,
                        dry_run: bool = False) -> ParentSettings:
        """What its parents' reconciles do besides the children (``ParentReconciler``), with
        the pauses from code and ``environ``; ``dry_run`` for a plan."""
        reporting = self.reporting
        return ParentSettings(
            prune_kinds=self.policies.prune, events=reporting.events, dry_run=dry_run,
            on_delete=self.on_delete, readiness=reporting.readiness,
            status=self.status_function, reuse_builds=self.applying.reuse_builds,
            pause=self.pauses(environ), child_labels=child_labels(self.sharding),
            clusters=self.applying.clusters)

    def plan_guard(self, clock: Clock) -> PlanGuard:
        """What the executor asks about each plan: drift mode, ignored fields, contention."""
        policies = self.policies
        return PlanGuard.of(drift=policies.drift, ignore_fields=policies.ignore_fields,
                            contention=policies.contention, clock=clock, field_manager=self.name)

    def start(
        self,
        client: ClusterClient,
        *,
        clock: Clock | None = None,
        identity: str | None = None,
        environ: Mapping[str, str] | None = None,
        serving: Serving | None = None,
        **flat_serving: Any,
    ) -> OperatorRuntime:
        """Start the operator against ``client``; returns the running runtime.

        ``serving`` (default: ``self.serving``) says where ``/metrics``, ``/healthz`` and
        ``/readyz`` are served (``Serving``: port, bind address, auth). The keywords of earlier
        releases (``metrics_port``, ``metrics_bind_address``, ``metrics_auth``) still work,
        with a ``DeprecationWarning``."""
        from reconciler._driver.runtime import OperatorRuntime

        serving = _serving_of(self, serving, flat_serving, call="start")
        runtime = OperatorRuntime(self, client, clock=clock, identity=identity,
                                  environ=environ, serving=serving)
        return runtime.start()

    def run(
        self,
        *,
        kubeconfig: str | None = None,
        embedded: bool = False,
        serving: Serving | None = None,
        **flat_serving: Any,
    ) -> int:
        """Run until SIGTERM/SIGINT (or lost leadership); returns the process exit code.
        ``serving`` as for :meth:`start`."""
        from reconciler._driver.process import run_operator

        return run_operator(self, kubeconfig=kubeconfig, embedded=embedded,
                            serving=_serving_of(self, serving, flat_serving, call="run"))


def _moved_into(groups: dict[str, Any], moved: Mapping[str, Any], *, operator: str,
                ) -> dict[str, Any]:
    """``groups`` with the flat keywords of earlier releases set in their groups, each with a
    ``DeprecationWarning`` naming its new place; an unknown keyword is a ``TypeError`` as
    Python's own."""
    changes: dict[str, dict[str, Any]] = {}
    for keyword, value in moved.items():
        where = MOVED.get(keyword)
        if where is None:
            raise ReconcilerUsageTypeError(
                f"Operator() got an unexpected keyword argument {keyword!r} "
                f"(operator {operator!r})")
        group, field = where
        warnings.warn(
            f"Operator({keyword}=...) is deprecated: use "
            f"Operator({group}={GROUPS[group].__name__}({field}=...))",
            DeprecationWarning, stacklevel=3)
        changes.setdefault(group, {})[field] = value
    return {group: attrs.evolve(value, **changes[group]) if group in changes else value
            for group, value in groups.items()}


_FLAT_SERVING = {"metrics_port": "metrics_port", "metrics_bind_address": "bind_address",
                 "metrics_auth": "auth"}


def _serving_of(operator: Operator, serving: Serving | None, flat: Mapping[str, Any], *,
                call: str) -> Serving:
    """Where a started operator serves: ``serving`` or the operator's, with the flat keywords
    of earlier releases on top (deprecated; a None port or address leaves the setting as is,
    as those keywords did)."""
    base = operator.serving if serving is None else serving
    if not isinstance(base, Serving):
        raise ReconcilerUsageTypeError(
            f"Operator.{call}(serving=...) must be a Serving, got {type(base).__name__}")
    changes: dict[str, Any] = {}
    for keyword, value in flat.items():
        field = _FLAT_SERVING.get(keyword)
        if field is None:
            raise ReconcilerUsageTypeError(
                f"Operator.{call}() got an unexpected keyword argument {keyword!r}")
        warnings.warn(f"Operator.{call}({keyword}=...) is deprecated: use "
                      f"Operator.{call}(serving=Serving({field}=...))",
                      DeprecationWarning, stacklevel=3)
        if value is not None and (field != "auth" or value):
            changes[field] = value
    return attrs.evolve(base, **changes) if changes else base
