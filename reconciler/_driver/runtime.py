"""The runtime: one running operator, wired from its parts, started and stopped as a whole.

DESIGN.md section 6. ``OperatorRuntime`` builds the parts from an ``Operator`` value and owns
their lifecycle: a parent ``Informer`` and a dynamic child ``InformerManager`` whose events the
``EventRouter`` (``reconciler._driver.routing``) turns into keys of one deduplicating
``WorkQueue``; the ``ResyncLoop`` (``reconciler._driver.resync_loop``) queues parents as their
periodic time falls due and records the heartbeat; the ``WorkerPool``
(``reconciler._driver.workers``) reconciles; with leader election, the ``Standby``
(``reconciler._driver.standby``) holds events until this runtime leads and then takes over; with
sharding, ``Shards`` (``reconciler._sharding.shards``) holds this replica's shard Lease, scopes the
informers to its shard and runs the assigner when elected, and ``ForeignWatches``
(``reconciler._sharding.foreign``) watches by name what another owner holds that a parent waits
on, which the shard's child informers cannot see; the ``UpgradeCheck``
(``reconciler._driver.upgrades``) reconciles every parent once after the operator's code changed
(in batches with ``Operator.rollout``: the ``RolloutRunner``, ``reconciler._driver.rollouts``); a
``HealthServer`` (``reconciler._driver.serving``) serves metrics and probes. Each loop's logic
lives in its own module; this one only constructs, starts, stops and answers what tests and
benchmarks ask.

This is the only composition root (issue 22). No part receives the runtime: each receives the
values and shared objects it uses (the reconciler, the shards, ...) and callables into the
runtime or into a part built before it (``step_down()``, ``last_started(key)``, ...), and none
imports this module (the import-linter contract ``driver-parts-know-no-runtime``). What several
parts share comes as one small frozen value each (issue 37): ``Triggering`` (queue, schedule,
``kick()``) and ``Telemetry`` (clock, stats, metrics) from ``reconciler._driver.parts``,
``Caches`` (the parent and child informers) and ``Lifecycle`` (``stopping()``, ``stop()``,
``track(thread)``). ``__init__`` wires them in this order, a tree:

1. plain values: clock, identity, policy, stats, lock; the client (fenced when electing); the
   shard id, which the informers' selectors and the heartbeat's Lease name need before
   ``Shards`` itself exists; metrics, queue, schedule;
2. the informers, since everything reads through them; their handlers belong to the router
   and the standby, which come last, so they are late-bound lambdas (the only ones);
3. the recording client (it writes own writes through to the informers), the reader and the
   parent reconciler (which read through them), the resync ConfigMap's informer;
4. the shared values, then the heartbeat store and the resync loop (``_start_workers`` tells it
   when the workers run: ``lead``), and the rollout runner (its record sits beside the
   heartbeat; the workers ask it what it holds);
5. ``Shards``, which builds through the reconciler and patches through the client;
6. the leader gate (``reconciler._driver.leading``: what a standby holds, stepping down), the
   workers (they step down through the gate; drift is ``reconciler._driver.drift``'s), the
   router (it asks the workers when a key last started and the gate whether it holds a key),
   the named watches of contested objects (sharded: they wake through the router), the
   standby (it takes the gate's held events over and queues through the router): each is
   handed callables of the parts before it, none of one after;
7. the elector (it calls back the gate and the runtime) and the upgrade check.

The module is over 500 lines because it is the one composition root: each part's construction,
start and stop is a few lines here, and splitting them apart would scatter the one order above.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from functools import partial

import attrs

from builders import ObjectRef
from builders.names import MANAGED_BY_LABEL
from reconciler._base.clocks import Clock, RealClock
from reconciler._base.lifecycle import Lifecycle
from reconciler._base.metrics import HealthServer, OperatorMetrics
from reconciler._cache.children import Caches, InformerManager
from reconciler._cache.informers import Informer, WatchOptions
from reconciler._cache.inputs import InputWatch
from reconciler._cache.pool import InformerPool
from reconciler._cache.readers import InformerReader
from reconciler._cache.recording import RecordingClient
from reconciler._cache.remote import RemoteCaches
from reconciler._client.kubernetes import KubernetesClient, for_operator
from reconciler._client.protocol import ClusterClient, KubeObject
from reconciler._driver.event_sender import EventSender
from reconciler._driver.hooks import StartContext
from reconciler._driver.leading import LeaderGate
from reconciler._driver.liveness import DEFAULT_WATCH_TIMEOUT, ProgressWatch
from reconciler._driver.liveness import liveness_bound as liveness_bound_for
from reconciler._driver.operators import Operator
from reconciler._driver.parts import Telemetry, Triggering
from reconciler._driver.resync_loop import HeartbeatStore, ResyncLoop
from reconciler._driver.resyncs import ResyncSchedule
from reconciler._driver.rollouts import rollout_runner
from reconciler._driver.routing import EventRouter, RoutingSettings
from reconciler._driver.serving import health_server
from reconciler._driver.settings import Serving
from reconciler._driver.standby import Standby
from reconciler._driver.stats import RuntimeStats
from reconciler._driver.triggers import ParentKey
from reconciler._driver.upgrades import UpgradeCheck, operator_fingerprint
from reconciler._driver.workers import WorkerPool
from reconciler._leadership.election import LeaderElector
from reconciler._leadership.fencing import FencingClient, WriteFence
from reconciler._reconcile.events import EventRecorder
from reconciler._reconcile.install import install_all
from reconciler._reconcile.parents import ParentReconciler
from reconciler._reconcile.reconciling import ResourceReconciler
from reconciler._sharding.foreign import ForeignWatches
from reconciler._sharding.shards import ReplicaShard, Shards, shard_selector
from reconciler._workqueue.queues import WorkQueue

__all__ = ["OperatorRuntime", "RuntimeStats"]

_log = logging.getLogger("optk.operator")


class OperatorRuntime:
    """A running operator: informers, queue, resync loop, workers, leader election, health."""

    def __init__(
        self,
        operator: Operator,
        client: ClusterClient,
        *,
        clock: Clock | None = None,
        identity: str | None = None,
        environ: Mapping[str, str] | None = None,
        serving: Serving | None = None,
        watch_timeout: int = DEFAULT_WATCH_TIMEOUT,
        liveness_bound: float | None = None,
    ) -> None:
        # The composition root (the module docstring says the order and why).
        self.operator = operator
        serving = operator.serving if serving is None else serving
        self.clock: Clock = clock or RealClock()
        self.identity = identity or f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
        self.base_policy = operator.policy(environ)
        self.stats = RuntimeStats()
        self.lock = threading.Condition()
        """The one lock of the runtime's state (stopping, workers, standby); reentrant."""
        self._stopping = False
        self._finished = False
        self._threads: list[threading.Thread] = []
        self._loops: list[threading.Thread] = []
        """The threads that must live until ``stop`` (``/healthz`` fails when one ended)."""
        self._cleanups: list[Callable[[], object]] = []
        if isinstance(client, KubernetesClient) and client.operator_name is None:
            client = for_operator(client, operator.name)  # User-Agent and fieldManager
        self._inner = client
        # Election and sharding exclude each other's leases: a sharded replica holds its own.
        election = operator.election if operator.sharding is None else None
        self.fence = None if election is None else WriteFence(
            clock=self.clock, validity=election.renew_deadline, identity=self.identity)
        # every write of the reconciles and the heartbeat: fenced when electing
        writer = client if self.fence is None else FencingClient(client, fence=self.fence)
        # The shard id comes before the informers (their selectors), the builders (the shard
        # label) and the heartbeat (its Lease name); ``Shards`` itself comes later.
        shard = None if operator.sharding is None else operator.sharding.resolve_id(
            os.environ if environ is None else environ, self.identity)
        shard_scope = None if shard is None else shard_selector(shard)
        self.metrics = OperatorMetrics(operator.name, max_concurrent=operator.workers)
        self.queue: WorkQueue[ParentKey] = WorkQueue(clock=self.clock, observer=self.metrics.queue)
        self.schedule = ResyncSchedule(self.base_policy)
        # The informers. Their handlers are the router's and the standby's, which read
        # through the reconciler, which reads through these informers: late-bound.
        watch = WatchOptions(watch_timeout=watch_timeout,
                             inactivity_timeout=operator.watching.inactivity_timeout)
        self.parents = _parent_informer(operator, client, clock=self.clock, scope=shard_scope,
                                        watch=watch)
        # One reference-counted pool for what starts on use: the child informers and the
        # declared inputs' (two scopes alike share one informer).
        self.pool = InformerPool(client, clock=self.clock, options=watch)
        self.informers = InformerManager(
            client, handler=lambda *event: self.router.on_child(*event),
            namespace=operator.namespace,
            label_selector=f"{MANAGED_BY_LABEL}={operator.name}"
                           + ("" if shard_scope is None else f",{shard_scope}"),
            on_late_sync=lambda type_key: self.standby.recheck(type_key), pool=self.pool,
        )
        # The client records own writes and writes them through to the informers; the
        # reconciler reads through them (``reader``) and writes through this client.
        self.client = RecordingClient(writer, informers=self._informer_of, clock=self.clock)
        self.reader = InformerReader(client, self.informers,
                                     extra={self.parents.type_key: self.parents})
        # declared inputs, the clusters among them (their Secrets' informer)
        self.inputs = None if operator.inputs is None and operator.clusters is None else (
            InputWatch(client, operator.inputs or _no_inputs, on_change=self._input_changed,
                       alive=lambda key: self.parents.cache.get(*key) is not None,
                       pool=self.pool, clusters=operator.clusters))
        self.events = EventSender(EventRecorder(  # off the workers' path
            self.client, component=operator.name, clock=self.clock),
        ) if operator.reporting.events else None
        self.reconciler = _parent_reconciler(operator, self.client, self.reader,
            inputs=self.inputs, events=self.events,
            clock=self.clock, environ=environ, parent_alive=partial(_parent_alive, self.parents))
        self.metrics.intervention_gauges(self.reconciler)  # drifted and contested children
        # the placed children's informers per (cluster, kind), the clusters from the Secrets'
        self.remote = None if self.reconciler.placement is None else RemoteCaches(
            label_selector=f"{MANAGED_BY_LABEL}={operator.name}", on_change=self._placed_changed,
            clock=self.clock, options=watch,
            sync_timeout=self.reconciler.placement.secrets.request_timeout)
        if self.remote is not None and self.inputs is not None:
            placement = self.reconciler.placement
            assert placement is not None
            placement.use_informers(self.remote, self.inputs.secrets_reader())
            self.parents.add_handler(lambda event, old, new: placement.forget(
                ObjectRef.of(new).namespaced_name) if event == "DELETED" else None)
        if self.inputs is not None and self.reconciler.builds is not None:
            self.reconciler.builds.inputs_key = self.inputs.versions_of  # reuse keyed on them
        if self.inputs is not None:  # a deleted parent's inputs are released
            self.parents.add_handler(self.inputs.on_parent)
        self.config_informer = _config_informer(operator, client, clock=self.clock, watch=watch)
        # What several parts share goes down as one value each (``reconciler._driver.parts``).
        lifecycle = Lifecycle(stopping=lambda: self.stopping, stop=self.stop, track=self.track)
        telemetry = Telemetry(clock=self.clock, stats=self.stats, metrics=self.metrics)
        caches = Caches(parents=self.parents, informers=self.informers)
        # The resync loop needs only the schedule, the queue and the heartbeat; ``_start_workers``
        # tells it when the workers run (``lead``).
        self.heartbeats = _heartbeat_store(operator, writer, shard=shard, identity=self.identity,
                                           watch_others=election is None)
        self.resync = ResyncLoop(
            schedule=self.schedule, queue=self.queue, heartbeats=self.heartbeats,
            period=operator.resync.heartbeat, clock=self.clock, stats=self.stats,
            stopping=lifecycle.stopping,
        )
        triggering = Triggering(queue=self.queue, schedule=self.schedule, kick=self.resync.kick)
        self.fingerprint = operator_fingerprint(operator)  # a gradual rollout's, if one is set:
        self.rollout = rollout_runner(operator.rollout, operator_name=operator.name,
            events=operator.reporting.events, fingerprint=self.fingerprint,
            heartbeats=self.heartbeats, client=self.client, parents=self.parents,
            triggering=triggering, telemetry=telemetry,
            stopping=lifecycle.stopping)
        # Sharding builds (and adopts) through the reconciler and patches through the client;
        # a shard Lease not renewed stops the runtime leaving the Lease to expire.
        self.shards = None if operator.sharding is None or shard is None else Shards(
            ReplicaShard(operator_name=operator.name, api_version=operator.api_version,
                         kind=operator.kind, namespace=operator.namespace,
                         prune=operator.policies.prune,
                         leader_election=operator.leader_election, sharding=operator.sharding,
                         shard=shard, identity=self.identity),
            leases=client, client=self.client, caches=caches, declared=self.reconciler.declared,
            clock=self.clock, metrics=self.metrics,
            lifecycle=attrs.evolve(lifecycle, stop=partial(self.stop, release_lease=False)),
        )
        # A tree, each part handed what the ones before it offer: the leader gate (what a
        # standby holds; stepping down), the workers (step down through the gate), the router
        # (asks the workers when a key last started, the gate whether it holds a key), the
        # standby (takes the gate's held events over, queues through the router).
        self.gate = LeaderGate(election, clock=self.clock, metrics=self.metrics,
                               lifecycle=lifecycle)
        self.workers = WorkerPool(
            lock=self.lock, triggering=triggering, caches=caches, reconciler=self.reconciler,
            shards=self.shards, telemetry=telemetry, step_down=self.gate.lost_leadership,
            stopping=lifecycle.stopping,
            held=None if self.rollout is None else self.rollout.holds)
        self.router = EventRouter(
            triggering, caches=caches, telemetry=telemetry, shards=self.shards, gate=self.gate,
            settings=RoutingSettings(base_policy=self.base_policy,
                                     event_coalesce=operator.watching.coalesce,
                                     watch_children=operator.watching.children),
            decide_echo=self.client.decide_echo, last_started=self.workers.last_started,
            waits=self.reconciler.waits)
        # Sharded, the objects another owner holds that a parent waits on reach no child
        # informer (they lack this shard's label): watched by name while the wait lasts.
        self.foreign = None if self.shards is None else ForeignWatches(
            self.pool, self.reconciler.waits, visible=self._child_cached,
            wake=self.router.on_awaited)
        self.standby = Standby(
            self.gate, queue=self.queue, caches=caches, reconciler=self.reconciler,
            telemetry=telemetry, lifecycle=lifecycle, first_sight=self.router.first_sight,
            queue_for_event=self.router.queue_for_event, resume=self.resync.resume,
        )
        # The elector calls back into the gate (lost) and the runtime (elected).
        self.elector = None if election is None else LeaderElector(
            client, election, identity=self.identity, on_started=self._start_workers,
            on_stopped=self.gate.lost_leadership, clock=self.clock, fence=self.fence,
        )
        self.liveness = ProgressWatch(
            informers=self._running_informers, loops=self._living_loops,
            stopping=lifecycle.stopping, clock=self.clock,
            bound=liveness_bound_for(watch_timeout, liveness_bound))
        self._serve_health = health_server(
            metrics=self.metrics, ready=lambda: self.ready, degraded=self.degraded,
            liveness=self.liveness, client=self._inner, port=serving.metrics_port,
            host=serving.bind_address, environ=environ, auth=serving.auth)
        self.health: HealthServer | None = None
        self.upgrade = UpgradeCheck(
            self.fingerprint, heartbeats=self.heartbeats, parents=self.parents,
            queue=self.queue, schedule=self.schedule, stats=self.stats,
            force_beat=self.resync.force_beat, stopping=lifecycle.stopping,
            roll=None if self.rollout is None else self.rollout.run)

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> OperatorRuntime:
        """Start informers, timer, health server and (when leading, or without election) workers."""
        install_all(self._inner, self.operator.install, clock=self.clock)
        if self.shards is not None:
            self.shards.start()
        if self.elector is None:
            self.resync.resume()
        self.parents.add_handler(self.router.on_parent)
        self.parents.start()
        if self.config_informer is not None:
            self.config_informer.add_handler(self.router.on_config)
            self.config_informer.start()
        try:
            context = StartContext(
                client=self._inner, clock=self.clock, request=self.request,
                waits=self.reconciler.waits, stats=self.stats, runtime=self)
            for hook in self.operator.on_start:
                cleanup = hook(context)
                if cleanup is not None:
                    self._cleanups.append(cleanup)
        except Exception:
            self.stop(timeout=0.0)
            raise
        self._loops.append(self._spawn(self.resync.run_timer, "optk-resync"))
        if self.heartbeats is not None:
            self._loops.append(self._spawn(self.resync.run_beat, "optk-heartbeat"))
        if self._serve_health is not None:
            self.health = self._serve_health()
        self._spawn(self.standby.warm_children, "optk-warm")
        if self.elector is not None:
            self.metrics.set_leader(self.elector.config.name, False)
            self._loops.append(self._spawn(self.elector.run, "optk-leader"))
        else:
            self._start_workers()
        return self

    def stop(self, timeout: float | None = None, *, release_lease: bool = True) -> bool:
        """Stop taking work, let in-flight reconciles finish within ``timeout`` (real seconds),
        then stop everything; whether every worker finished in time.

        ``release_lease=False`` leaves the Lease to expire, as a crashed process would.
        """
        timeout = self.operator.shutdown_timeout if timeout is None else timeout
        with self.lock:
            self._stopping = True
        self.queue.shutdown()
        self.resync.wake_all()
        deadline = time.monotonic() + timeout
        clean = self.workers.join(deadline)
        if self.events is not None:  # the reconciles' last Events, while the lease is held
            self.events.close(max(0.5, min(5.0, deadline - time.monotonic())))
        if self.workers.started:
            self.resync.write_heartbeat(last=release_lease)  # the last word; a release too
        if self.elector is not None:
            self.elector.stop(release=release_lease)
        if self.shards is not None:
            self.shards.stop(release=release_lease)
        for thread in self._threads:
            thread.join(max(0.0, min(5.0, deadline - time.monotonic())))
        _clean_up(self._cleanups, self.operator.name)
        self.parents.stop()
        self.informers.stop()
        if self.inputs is not None:
            self.inputs.stop()
        if self.foreign is not None:
            self.foreign.stop()
        self.pool.stop()
        if self.remote is not None:  # the other clusters' informers and clients (issue 41)
            self.remote.stop()
        if self.reconciler.placement is not None:
            self.reconciler.placement.connections.close()
        if self.config_informer is not None:
            self.config_informer.stop()
        if self.health is not None:
            self.health.stop()
        with self.lock:
            self._finished = True
            self.lock.notify_all()
        if not clean:
            _log.warning("shutdown: reconciles still running after %.0fs", timeout)
        return clean

    def __enter__(self) -> OperatorRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- state -------------------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        """Whether ``stop`` was called."""
        with self.lock:
            return self._stopping

    @property
    def finished(self) -> bool:
        """Whether the runtime stopped (by ``stop`` or because leadership was lost)."""
        with self.lock:
            return self._finished

    @property
    def ready(self) -> bool:
        """Whether the operator serves (``/readyz``): its parent (and resync ConfigMap) caches
        are synced, and every child cache is synced or its kind's lists are refused (403, say:
        then it is ready but degraded, see ``degraded``; only the children of that kind wait).
        """
        config = self.config_informer
        if not self.parents.has_synced or (config is not None and not config.has_synced):
            return False
        return _children_serve(self.informers)

    def degraded(self) -> str:
        """Why the operator serves only in part ("" when it does not): the child kinds it
        cannot list, with the reason, and another instance writing beside it (a second run
        without leader election: ``HeartbeatStore.check_others``); ``/readyz`` says it."""
        reasons = [f"{kind} {api_version} cannot be listed: {error}"
                   for (api_version, kind), error in sorted(self.informers.unlistable().items())]
        other = None if self.heartbeats is None else self.heartbeats.contender
        if other is not None and other.fresh(self.clock.time()):
            reasons.append(f"another instance, {other.holder}, writes beside this one "
                           f"(heartbeat Lease {other.where})")
        return "; ".join(reasons)

    @property
    def leading(self) -> bool:
        """Whether this runtime's workers run (it leads, or election is off)."""
        with self.lock:
            return self.workers.started and not self._stopping

    @property
    def idle(self) -> bool:
        """Whether nothing is queued, being reconciled or waiting to be sent (Events), and the
        start-up look at every parent's children (``Standby.warm_children``) has finished."""
        return not (self.workers.busy or len(self.queue) or self.queue.processing
                    or (self.events is not None and self.events.pending)
                    or self.standby.warming)

    def request(self, namespace: str | None, name: str) -> None:
        """Queue a reconcile of one parent now."""
        self.stats.triggers["manual"] += 1
        self.queue.add((namespace or "", name))

    def _placed_changed(self, key: ParentKey) -> None:
        """A child ``key`` placed in another cluster changed there (not by us): queued."""
        self.stats.triggers["placed"] += 1
        self.queue.add(key)

    def _input_changed(self, key: ParentKey) -> None:
        """An input ``key``'s builders read changed: its reused build goes, it is queued."""
        self.reconciler.forget_builds(key)
        self.stats.triggers["input"] += 1
        self.queue.add(key)

    def resync_all(self) -> int:
        """Queue every known parent now, as if all were due; returns how many. Reused builds
        (``Applying.reuse_builds``) are dropped first: every parent's builders run again."""
        self.reconciler.forget_builds()
        keys = self.parents.cache.keys()
        for key in keys:
            self.stats.triggers["resync"] += 1
            self.queue.add(key)
        return len(keys)

    def triggers(self) -> Mapping[str, int]:
        """Counts of what queued parents, by cause."""
        return dict(self.stats.triggers)

    # --- internals ---------------------------------------------------------------------------

    @property
    def inner_client(self) -> ClusterClient:
        """The client the runtime was given (no own-write recording)."""
        return self._inner

    def track(self, thread: threading.Thread) -> None:
        """Join ``thread`` (started by a part of the runtime) when the runtime stops."""
        self._threads.append(thread)

    def _spawn(self, target: Callable[[], None], name: str) -> threading.Thread:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()
        return thread

    def _informer_of(self, api_version: str, kind: str) -> Informer | None:
        """The running informer of a type (parents' or children's): own writes go there."""
        if (api_version, kind) == self.parents.type_key:
            return self.parents
        return self.informers.informer(api_version, kind)

    def _child_cached(self, ref: ObjectRef) -> bool:
        """Whether a child informer's cache holds this object (its events reach the router)."""
        informer = self.informers.informer(ref.api_version, ref.kind)
        return informer is not None and informer.cache.get(ref.namespace, ref.name) is not None

    def _running_informers(self) -> list[Informer]:
        """The parent informer, the resync ConfigMap's and every child informer."""
        found = [self.parents, *(() if self.config_informer is None else (self.config_informer,))]
        return found + [informer for key in self.informers.types()
                        if (informer := self.informers.informer(*key)) is not None]

    def _living_loops(self) -> list[threading.Thread]:
        """The threads that must live until ``stop``: the runtime's loops and the workers."""
        return [*self._loops, *self.workers.threads]

    def _start_workers(self) -> None:
        """Start reconciling: at once without election, else when elected (after takeover)."""
        if self.elector is not None:
            self.standby.take_over()
        if not self.workers.start(self.operator.workers):
            return
        self._spawn(self.upgrade.run, "optk-upgrade")  # a changed operator reconciles all
        self.resync.lead()  # the timer queues what is due; a new leader beats at once
        if self.elector is not None:
            self.metrics.set_leader(self.elector.config.name, True)


def _parent_alive(parents: Informer, parent: KubeObject) -> bool:
    """Whether the parent cache still holds ``parent`` (same uid), not being deleted."""
    meta = parent.get("metadata") or {}
    cached = parents.cache.get(meta.get("namespace"), str(meta.get("name") or ""))
    cached_meta = (cached or {}).get("metadata") or {}
    return (cached is not None and cached_meta.get("uid") == meta.get("uid")
            and not cached_meta.get("deletionTimestamp"))


def _clean_up(cleanups: list[Callable[[], object]], operator_name: str) -> None:
    """Run the ``on_start`` hooks' cleanups, last first (a failing one is logged), and forget
    them."""
    for cleanup in reversed(cleanups):
        try:
            cleanup()
        except Exception:
            _log.exception("shutdown: an on_start cleanup of %s failed", operator_name)
    cleanups.clear()


def _parent_reconciler(
    operator: Operator, client: ClusterClient, reader: InformerReader, *,
    clock: Clock, parent_alive: Callable[[KubeObject], bool], environ: Mapping[str, str] | None,
    inputs: InputWatch | None, events: EventSender | None,
) -> ParentReconciler:
    """The parent reconcile of ``operator``: its builders (given their declared ``inputs``;
    their children stamped with their parent's shard label when sharded) over ``client``,
    reading through ``reader``."""
    build = operator.build if inputs is None or operator.inputs is None else inputs.bind(
        operator.build)
    resources = ResourceReconciler(client, settings=operator.resource_settings(), reader=reader,
                                   clock=clock, guard=operator.plan_guard(clock))
    return ParentReconciler(
        client, build, operator_name=operator.name, settings=operator.parent_settings(environ),
        reader=reader, resources=resources, clock=clock, event_sink=events,
        parent_alive=parent_alive)


def _no_inputs(parent: KubeObject) -> tuple[()]:
    """The declaration of an operator that declares no inputs (its clusters are read)."""
    return ()


def _parent_informer(operator: Operator, client: ClusterClient, *, clock: Clock,
                     scope: str | None, watch: WatchOptions) -> Informer:
    """The informer of the parents (of this shard, when ``scope`` selects one)."""
    return Informer(client, operator.api_version, operator.kind, namespace=operator.namespace,
                    clock=clock, label_selector=scope, options=watch)


def _config_informer(operator: Operator, client: ClusterClient, *, clock: Clock,
                     watch: WatchOptions) -> Informer | None:
    """The informer of the resync ConfigMap (``ResyncPolicy.config_map``), if one is named."""
    if (config_map := operator.resync.config_map_ref) is None:
        return None
    return Informer(client, "v1", "ConfigMap", namespace=config_map[0],
                    field_selector=f"metadata.name={config_map[1]}", clock=clock,
                    options=watch)


def _heartbeat_store(operator: Operator, writer: ClusterClient, *, shard: str | None,
                     identity: str, watch_others: bool) -> HeartbeatStore | None:
    """The heartbeat's Lease (one per shard when sharded), if the operator keeps one;
    ``watch_others``: warn of a second instance writing it (no leader election)."""
    if (lease := operator.heartbeat_lease) is None:
        return None
    name = lease[1] if shard is None else f"{lease[1]}-{shard}"
    return HeartbeatStore(writer, name=name, namespace=lease[0], identity=identity,
                          watch_others=watch_others)


def _children_serve(informers: InformerManager) -> bool:
    """Whether every child cache is synced or its kind's lists are refused."""
    if informers.synced():
        return True
    refused = informers.unlistable()
    return all(informer.has_synced or key in refused for key in informers.types()
               if (informer := informers.informer(*key)) is not None)
