"""The runtime: one running operator, wired from its parts, started and stopped as a whole.

DESIGN.md section 6. ``OperatorRuntime`` builds the parts from an ``Operator`` value and owns
their lifecycle: a parent ``Informer`` and a dynamic child ``InformerManager`` whose events the
``EventRouter`` (``reconciler._driver.routing``) turns into keys of one deduplicating
``WorkQueue``; the ``ResyncLoop`` (``reconciler._driver.resync_loop``) queues parents as their
periodic time falls due and records the heartbeat; the ``WorkerPool``
(``reconciler._driver.workers``) reconciles; with leader election, the ``Standby``
(``reconciler._driver.standby``) holds events until this runtime leads and then takes over; with
sharding, ``Shards`` (``reconciler._sharding.shards``) holds this replica's shard Lease, scopes the
informers to its shard and runs the assigner when elected; a ``HealthServer`` serves metrics and
probes. Each loop's logic lives in its own module; this one only constructs, starts, stops and
answers what tests and benchmarks ask.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping

from builders.names import MANAGED_BY_LABEL
from reconciler._base.clocks import Clock, RealClock
from reconciler._base.metrics import HealthServer, OperatorMetrics
from reconciler._cache.informers import Informer, InformerManager
from reconciler._cache.readers import InformerReader
from reconciler._cache.recording import RecordingClient
from reconciler._client.kubernetes import KubernetesClient, for_operator
from reconciler._client.protocol import ClusterClient, KubeObject
from reconciler._driver.operators import Operator
from reconciler._driver.resync_loop import HeartbeatStore, ResyncLoop
from reconciler._driver.resyncs import ResyncSchedule
from reconciler._driver.routing import EventRouter
from reconciler._driver.standby import Standby
from reconciler._driver.stats import RuntimeStats
from reconciler._driver.triggers import ParentKey
from reconciler._driver.upgrades import UpgradeCheck, operator_fingerprint
from reconciler._driver.workers import WorkerPool
from reconciler._leadership.election import LeaderElector
from reconciler._leadership.fencing import FencingClient, WriteFence
from reconciler._reconcile.install import install_object
from reconciler._reconcile.parents import ParentReconciler
from reconciler._reconcile.reconciling import ResourceReconciler
from reconciler._sharding.shards import Shards, stamp_shard
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
        metrics_port: int | None = None,
    ) -> None:
        self.operator = operator
        self.clock: Clock = clock or RealClock()
        self.identity = identity or f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
        self.base_policy = operator.policy(environ)
        self.stats = RuntimeStats()
        self.lock = threading.Condition()
        """The one lock of the runtime's state (stopping, workers, standby); reentrant."""
        self._stopping = False
        self._finished = False
        self._threads: list[threading.Thread] = []
        self._cleanups: list[Callable[[], object]] = []
        if isinstance(client, KubernetesClient) and client.operator_name is None:
            client = for_operator(client, operator.name)  # User-Agent and fieldManager
        self._inner = client
        self.fence: WriteFence | None = None
        writer = client  # every write of the reconciles and the heartbeat: fenced when electing
        if operator.election is not None and operator.sharding is None:  # shards: own leases
            self.fence = WriteFence(clock=self.clock, validity=operator.election.renew_deadline,
                                    identity=self.identity)
            writer = FencingClient(client, fence=self.fence)
        self.shards: Shards | None = None
        if operator.sharding is not None:
            self.shards = Shards(self, operator.sharding, os.environ if environ is None
                                 else environ)
        shard_selector = "" if self.shards is None else f",{self.shards.selector}"
        self.metrics = OperatorMetrics(operator.name, max_concurrent=operator.workers)
        self.queue: WorkQueue[ParentKey] = WorkQueue(clock=self.clock,
                                                     observer=self.metrics.queue)
        self.schedule = ResyncSchedule(self.base_policy)
        self.router = EventRouter(self)
        self.workers = WorkerPool(self)
        self.standby = Standby(self)
        self.parents = Informer(
            client, operator.api_version, operator.kind, namespace=operator.namespace,
            clock=self.clock, label_selector=None if self.shards is None else self.shards.selector,
        )
        self.client = RecordingClient(writer, informers=self.router.informer_of, clock=self.clock)
        self.informers = InformerManager(
            client, handler=self.router.on_child, clock=self.clock, namespace=operator.namespace,
            label_selector=f"{MANAGED_BY_LABEL}={operator.name}{shard_selector}",
            on_late_sync=self.standby.recheck,
        )
        self.reader = InformerReader(
            client, self.informers, extra={self.parents.type_key: self.parents}
        )
        build = (operator.build if self.shards is None
                 else stamp_shard(operator.build, self.shards.shard))
        self.reconciler = ParentReconciler(
            self.client, build, operator_name=operator.name, reader=self.reader,
            resources=ResourceReconciler(
                self.client, reader=self.reader, recreate=operator.recreate, clock=self.clock
            ),
            prune_kinds=operator.prune, events=operator.events, clock=self.clock,
            on_delete=operator.on_delete,
            readiness=operator.readiness, status=operator.status,
            reuse_builds=operator.reuse_builds, parent_alive=self._parent_alive,
        )
        self.config_informer: Informer | None = None
        if (config_map := operator.resync.config_map_ref) is not None:
            self.config_informer = Informer(
                client, "v1", "ConfigMap", namespace=config_map[0],
                field_selector=f"metadata.name={config_map[1]}", clock=self.clock,
            )
        self.heartbeats: HeartbeatStore | None = None
        if (lease := operator.heartbeat_lease) is not None:
            name = lease[1] if self.shards is None else f"{lease[1]}-{self.shards.shard}"
            self.heartbeats = HeartbeatStore(
                writer, name=name, namespace=lease[0], identity=self.identity,
            )
        self.resync = ResyncLoop(
            schedule=self.schedule, queue=self.queue, heartbeats=self.heartbeats,
            period=operator.resync.heartbeat, clock=self.clock, stats=self.stats,
            leading=lambda: self.workers.started, stopping=lambda: self.stopping,
        )
        self.elector: LeaderElector | None = None
        if (election := operator.election) is not None and self.shards is None:
            self.elector = LeaderElector(
                client, election, identity=self.identity, on_started=self._start_workers,
                on_stopped=self.standby.lost_leadership, clock=self.clock, fence=self.fence,
            )
        self._metrics_port = metrics_port
        self.health: HealthServer | None = None
        self.upgrade = UpgradeCheck(self, operator_fingerprint(operator))

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> OperatorRuntime:
        """Start informers, timer, health server and (when leading, or without election) workers."""
        self._install()
        self._await_installed_kinds()
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
            for hook in self.operator.on_start:
                cleanup = hook(self)
                if cleanup is not None:
                    self._cleanups.append(cleanup)
        except Exception:
            self.stop(timeout=0.0)
            raise
        self._spawn(self.resync.run_timer, "optk-resync")
        if self.heartbeats is not None:
            self._spawn(self.resync.run_beat, "optk-heartbeat")
        if self._metrics_port is not None:
            self.health = HealthServer(self.metrics, ready=lambda: self.ready,
                                       degraded=self.degraded,
                                       port=self._metrics_port).start()
            _log.info("metrics and health on %s", self.health.url)
        self._spawn(self.standby.warm_children, "optk-warm")
        if self.elector is not None:
            self.metrics.set_leader(self.elector.config.name, False)
            self._spawn(self.elector.run, "optk-leader")
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
        if self.workers.started:
            self.resync.write_heartbeat()  # the last word: what this run covered
        if self.elector is not None:
            self.elector.stop(release=release_lease)
        if self.shards is not None:
            self.shards.stop(release=release_lease)
        for thread in self._threads:
            thread.join(max(0.0, min(5.0, deadline - time.monotonic())))
        for cleanup in reversed(self._cleanups):
            try:
                cleanup()
            except Exception:
                _log.exception("shutdown: an on_start cleanup of %s failed", self.operator.name)
        self._cleanups.clear()
        self.parents.stop()
        self.informers.stop()
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
        if self.informers.synced():
            return True
        refused = self.informers.unlistable()
        return all(informer.has_synced or key in refused
                   for key in self.informers.types()
                   if (informer := self.informers.informer(*key)) is not None)

    def degraded(self) -> str:
        """Why the operator serves only in part ("" when it does not): the child kinds it
        cannot list, with the reason (``/readyz`` says it)."""
        return "; ".join(f"{kind} {api_version} cannot be listed: {error}"
                         for (api_version, kind), error in sorted(
                             self.informers.unlistable().items()))

    @property
    def leading(self) -> bool:
        """Whether this runtime's workers run (it leads, or election is off)."""
        with self.lock:
            return self.workers.started and not self._stopping

    @property
    def idle(self) -> bool:
        """Whether nothing is queued or being reconciled right now."""
        return not (self.workers.busy or len(self.queue) or self.queue.processing)

    def request(self, namespace: str | None, name: str) -> None:
        """Queue a reconcile of one parent now."""
        self.stats.triggers["manual"] += 1
        self.queue.add((namespace or "", name))

    def resync_all(self) -> int:
        """Queue every known parent now, as if all were due; returns how many. Reused builds
        (``Operator.reuse_builds``) are dropped first: every parent's builders run again."""
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

    def _parent_alive(self, parent: KubeObject) -> bool:
        """Whether the parent cache still holds ``parent`` (same uid), not being deleted."""
        meta = parent.get("metadata") or {}
        cached = self.parents.cache.get(meta.get("namespace"), str(meta.get("name") or ""))
        cached_meta = (cached or {}).get("metadata") or {}
        return (cached is not None and cached_meta.get("uid") == meta.get("uid")
                and not cached_meta.get("deletionTimestamp"))

    def _start_workers(self) -> None:
        """Start reconciling: at once without election, else when elected (after takeover)."""
        if self.elector is not None:
            self.standby.take_over()
        if not self.workers.start(self.operator.workers):
            return
        self._spawn(self.upgrade.run, "optk-upgrade")  # a changed operator reconciles all
        self.resync.kick()
        self.resync.beat_now()  # a new leader records its heartbeat at once
        if self.elector is not None:
            self.metrics.set_leader(self.elector.config.name, True)

    def _await_installed_kinds(self, timeout: float = 60.0) -> None:
        """Return once every kind a CRD of ``install`` defines is served (bounded).

        A real API server serves a new CRD's kind a moment after the CRD is created (about 2 s
        here); waiting means a caller may create parents as soon as ``start()`` returns.
        """
        kinds = [
            (f"{spec.get('group')}/{version.get('name')}", str(spec.get("names", {}).get("kind")))
            for obj in self.operator.install
            if obj.get("kind") == "CustomResourceDefinition"
            for spec in [obj.get("spec") or {}]
            for version in spec.get("versions") or ()
            if version.get("served", True)
        ]
        deadline = self.clock.monotonic() + timeout
        for api_version, kind in kinds:
            while not self._inner.is_served(api_version, kind):
                if self.clock.monotonic() >= deadline:
                    _log.warning("%s %s is not served %.0fs after its CRD was installed",
                                 kind, api_version, timeout)
                    return
                self.clock.sleep(0.1)

    def _install(self) -> None:
        for obj in self.operator.install:  # created, or patched when it changed (logged)
            install_object(self._inner, obj)
