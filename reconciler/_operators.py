"""The operator: a definition users write in a few lines, and the runtime that drives it.

``Operator`` names the parent kind, the builders and the options (resync interval, workers,
recreate, pruning, operator name, leader election, metrics port). ``Operator.start(client)``
returns a running ``OperatorRuntime``; ``Operator.run()`` (and ``optk run MODULE[:ATTR]``) runs
one until SIGTERM/SIGINT and shuts down gracefully: in-flight reconciles finish within
``shutdown_timeout``, then everything stops and the Lease is released.

The runtime wires DESIGN.md section 6: a parent informer and a dynamic child ``InformerManager``
feed one deduplicating ``WorkQueue``; the event rules are here (``parent_event_triggers``,
``child_event_triggers``): a parent passes on creation, a ``metadata.generation`` change,
deletion and the ``optk.dev/reconcile-requested-at`` annotation; a child maps to its parent by
controller owner reference or ``optk.dev/owner-uid`` and triggers on any change except a
status-only one and the echo of the toolkit's own write (recognised by ``RecordingClient``); a
timer thread feeds due parents from the ``ResyncSchedule``; a bounded pool of workers calls the
reconciler's ``ParentReconciler.reconcile`` (reads from the informer caches) and turns its
result into a requeue, a backoff (honouring ``Retry-After``) or a new resync time.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, cast

import attrs

from builders import MANAGED_BY_LABEL, ResourceBuilder
from reconciler._clients import ClusterClient, KubeObject
from reconciler._clocks import Clock, RealClock
from reconciler._errors import AlreadyExistsError, ApiError
from reconciler._events import parse_rfc3339
from reconciler._informers import Informer, InformerManager, TypeKey
from reconciler._readers import InformerReader
from reconciler._recording import RecordingClient
from reconciler._stores import object_key, owner_uids
from reconciler._leadership import LeaderElector, LeaseConfig
from reconciler._metrics import HealthServer, OperatorMetrics
from reconciler._parents import ParentReconciler, ParentResult
from reconciler._queues import WorkQueue
from reconciler._reconciling import ResourceReconciler
from reconciler._resyncs import (
    Heartbeat,
    HeartbeatStore,
    ResyncPolicy,
    ResyncSchedule,
    last_reconcile_time,
)

__all__ = [
    "REQUESTED_AT_ANNOTATION",
    "JsonLogFormatter",
    "Operator",
    "OperatorRuntime",
    "ParentKey",
    "child_event_triggers",
    "load_operator",
    "parent_event_triggers",
    "parent_needs_reconcile",
    "run_command",
]

REQUESTED_AT_ANNOTATION = "optk.dev/reconcile-requested-at"

ParentKey = tuple[str, str]

StartHook = Callable[["OperatorRuntime"], "Callable[[], object] | None"]
"""An ``Operator.on_start`` hook: called with the running runtime; may return a cleanup."""
"""``(namespace, name)`` of a parent (namespace ``""`` for cluster-scoped parents)."""

_log = logging.getLogger("optk.operator")

_VOLATILE_META = ("resourceVersion", "managedFields", "generation")


def _meta(obj: KubeObject | None) -> Mapping[str, Any]:
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _annotation(obj: KubeObject | None, name: str) -> Any:
    return (_meta(obj).get("annotations") or {}).get(name)


def parent_needs_reconcile(parent: KubeObject) -> bool:
    """Whether a parent seen for the first time must be reconciled regardless of its schedule.

    True when it was never reconciled, its last reconcile failed (its ``Reconciled`` condition
    is not true: failures are retried by backoff, off the periodic grid), its spec changed since
    (``observedGeneration``), it is being deleted, or a manual trigger is newer than its last
    reconcile.
    """
    meta = _meta(parent)
    status = parent.get("status")
    status = status if isinstance(status, Mapping) else {}
    last = last_reconcile_time(parent)
    if last is None or meta.get("deletionTimestamp"):
        return True
    conditions = status.get("conditions")
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping) and condition.get("type") == "Reconciled" and (
            condition.get("status") != "True"
        ):
            return True
    if meta.get("generation") is not None and status.get("observedGeneration") != meta.get(
        "generation"
    ):
        return True
    requested = parse_rfc3339(_annotation(parent, REQUESTED_AT_ANNOTATION))
    return requested is not None and requested > last


def parent_event_triggers(
    event_type: str, new: KubeObject, *, old: KubeObject | None = None
) -> bool:
    """Whether a parent's watch event (not the toolkit's own write) calls for a reconcile.

    Creation, deletion, a ``metadata.generation`` change, a newly set ``deletionTimestamp`` and a
    change of the ``optk.dev/reconcile-requested-at`` annotation pass; so does any change outside
    ``metadata`` and ``status`` (the spec of a kind without a generation, such as a ConfigMap
    used as a parent). Status-only and other metadata changes do not.
    """
    if event_type in ("ADDED", "DELETED") or old is None:
        return True
    before, after = _meta(old), _meta(new)
    return (
        before.get("generation") != after.get("generation")
        or _content(old) != _content(new)
        or (after.get("deletionTimestamp") is not None and not before.get("deletionTimestamp"))
        or _annotation(old, REQUESTED_AT_ANNOTATION) != _annotation(new, REQUESTED_AT_ANNOTATION)
    )


def _content(obj: KubeObject) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _without_volatile(obj: KubeObject) -> dict[str, Any]:
    rest = {k: v for k, v in obj.items() if k != "status"}
    rest["metadata"] = {k: v for k, v in _meta(obj).items() if k not in _VOLATILE_META}
    return rest


def child_event_triggers(
    event_type: str, new: KubeObject, *, old: KubeObject | None = None
) -> bool:
    """Whether a child's watch event (not the toolkit's own write) calls for its parent's reconcile.

    Every creation, deletion and change passes (a user's edit of a labelled ConfigMap included)
    except one that touched only ``status`` and server-maintained metadata.
    """
    if event_type != "MODIFIED" or old is None:
        return True
    return _without_volatile(old) != _without_volatile(new)


@attrs.frozen(kw_only=True)
class Operator:
    """An operator: parents of one kind, the builders of their children, and driver options.

    ``build(parent)`` returns the parent's ``ResourceBuilder`` list. ``resync_interval`` (seconds
    or a duration such as ``"10h"``) sets the periodic resync in code; ``OPTK_RESYNC_INTERVAL``
    and the ConfigMap ``config_map`` (``"namespace/name"``, key ``resyncInterval``) override it.
    ``prune`` lists ``(apiVersion, kind)`` pairs whose unbuilt children are deleted. ``install``
    holds objects (e.g. the parent's CRD) created at start when missing. ``event_coalesce``
    bounds event-driven reconciles of one parent to one per that many seconds: the first event
    after a quiet period is handled at once, a burst is folded into one reconcile per window.
    ``watch_children=False`` ignores child events (drift waits for the periodic resync): the
    periodic-only configuration, kept for comparison and for very large, rarely drifting fleets.
    ``on_start`` hooks are called with the runtime once its parent informer runs and before any
    worker starts (e.g. to watch what ``build`` depends on, such as whether a CRD is served);
    each may return a cleanup callable, run in reverse order when the runtime stops.
    ``resync_heartbeat`` is the period (seconds) of the one write that makes the periodic
    resync restart-proof (skipped when nothing was reconciled since): the leader records in
    the Lease ``<name>-resync`` (in ``lease_namespace``) up to when every due parent was
    reconciled; a restart reconciles at once only the parents whose grid time passed since
    (see ``reconciler._resyncs``). ``None`` turns
    it off: a restart then trusts only the parents' ``status.lastReconcileTime``.
    """

    api_version: str
    kind: str
    build: Callable[[KubeObject], Iterable[ResourceBuilder]]
    name: str = "optk"
    resync_interval: float | str | None = None
    resync: ResyncPolicy = attrs.field(factory=ResyncPolicy)
    resync_heartbeat: float | None = 60.0
    workers: int = 4
    recreate: bool = False
    prune: Collection[tuple[str, str]] = ()
    namespace: str | None = None
    config_map: str | None = None
    leader_election: bool = False
    lease_namespace: str = "default"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    metrics_port: int | None = None
    shutdown_timeout: float = 30.0
    event_coalesce: float = 0.05
    watch_children: bool = True
    events: bool = True
    install: Sequence[KubeObject] = ()
    on_start: Sequence[StartHook] = ()

    def __attrs_post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"operator {self.name!r}: workers must be >= 1, got {self.workers}")
        if not self.name or len(self.name) > 63:
            raise ValueError(f"operator name must be a label value of 1..63 chars: {self.name!r}")
        if self.config_map is not None and self.config_map.count("/") != 1:
            raise ValueError(
                f"operator {self.name!r}: config_map is 'namespace/name', got {self.config_map!r}"
            )
        if not callable(self.build):
            raise TypeError(f"operator {self.name!r}: build must be callable")
        if self.resync_heartbeat is not None and not self.resync_heartbeat > 0:
            raise ValueError(f"operator {self.name!r}: resync_heartbeat must be positive or None, "
                             f"got {self.resync_heartbeat}")

    def policy(self, environ: Mapping[str, str] | None = None) -> ResyncPolicy:
        """The resync policy from code and environment (the ConfigMap applies at run time)."""
        policy = self.resync
        if self.resync_interval is not None:
            policy = policy.with_interval_text(str(self.resync_interval), source="resync_interval")
        return policy.with_environment(os.environ if environ is None else environ)

    def start(
        self,
        client: ClusterClient,
        *,
        clock: Clock | None = None,
        identity: str | None = None,
        environ: Mapping[str, str] | None = None,
        metrics_port: int | None = None,
    ) -> OperatorRuntime:
        """Start the operator against ``client``; returns the running runtime."""
        runtime = OperatorRuntime(
            self, client, clock=clock, identity=identity, environ=environ,
            metrics_port=self.metrics_port if metrics_port is None else metrics_port,
        )
        return runtime.start()

    def run(
        self,
        *,
        kubeconfig: str | None = None,
        embedded: bool = False,
        metrics_port: int | None = None,
    ) -> int:
        """Run until SIGTERM/SIGINT (or lost leadership); returns the process exit code."""
        stop = _StopFlag()
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, stop.on_signal)
        if embedded:
            from reconciler.embedded import EmbeddedApiServer

            with EmbeddedApiServer() as server:
                _log.info("embedded API server at %s (kubeconfig %s)", server.url,
                          server.kubeconfig_path)
                return self._run_with(server.api_client(), stop, metrics_port)
        from kubernetes import config as kube_config

        try:
            api_client = kube_config.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig
            )
        except kube_config.ConfigException:
            if kubeconfig is not None:
                raise
            kube_config.load_incluster_config()  # type: ignore[no-untyped-call]
            from kubernetes import client as kube_client

            api_client = kube_client.ApiClient()
        return self._run_with(api_client, stop, metrics_port)

    def _run_with(self, api_client: Any, stop: _StopFlag, metrics_port: int | None) -> int:
        from reconciler._kubernetes import KubernetesClient

        runtime = self.start(KubernetesClient(api_client), metrics_port=metrics_port)
        _log.info("operator %s started (identity %s)", self.name, runtime.identity)
        try:
            while not stop.requested and not runtime.finished:
                time.sleep(0.2)  # a signal interrupts the sleep and runs its handler
        finally:
            clean = runtime.stop(timeout=self.shutdown_timeout)
        lost = not stop.requested
        _log.info("operator %s stopped%s", self.name, " (leadership lost)" if lost else "")
        return 1 if lost or not clean else 0


class _StopFlag:
    """Set by SIGTERM/SIGINT. A plain attribute: a handler must take no lock the interrupted
    main thread may hold (``Event.set`` could deadlock against ``Event.wait``)."""

    def __init__(self) -> None:
        self.requested = False

    def on_signal(self, signum: int, frame: Any) -> None:
        """The signal handler."""
        self.requested = True


@attrs.define
class RuntimeStats:
    """What the runtime did, for tests, logs and benchmarks."""

    reconciles: Counter[ParentKey] = attrs.field(factory=Counter)
    failures: Counter[ParentKey] = attrs.field(factory=Counter)
    writes: int = 0
    heartbeats: int = 0
    triggers: Counter[str] = attrs.field(factory=Counter)

    @property
    def total(self) -> int:
        """Reconciles of all parents."""
        return sum(self.reconciles.values())


class _ParentLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """Puts the parent key on every line (as text and as the ``parent`` record field)."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        extra = self.extra or {}
        kwargs.setdefault("extra", {}).update(extra)
        return f"[{extra.get('parent')}] {msg}", kwargs


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the ``parent`` key if any."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line."""
        line: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        parent = getattr(record, "parent", None)
        if parent is not None:
            line["parent"] = parent
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line)


class OperatorRuntime:
    """A running operator: informers, queue, timer, workers, leader election, health server."""

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
        self.metrics = OperatorMetrics(operator.name, max_concurrent=operator.workers)
        self.queue: WorkQueue[ParentKey] = WorkQueue(clock=self.clock,
                                                     observer=self.metrics.queue)
        self.schedule = ResyncSchedule(self.base_policy)
        self.parents = Informer(
            client, operator.api_version, operator.kind, namespace=operator.namespace,
            clock=self.clock,
        )
        self.client = RecordingClient(client, informers=self._informer_of, clock=self.clock)
        self._cleanups: list[Callable[[], object]] = []
        self.informers = InformerManager(
            client, handler=self._on_child, clock=self.clock, namespace=operator.namespace,
            label_selector=f"{MANAGED_BY_LABEL}={operator.name}",
        )
        self.reader = InformerReader(
            client, self.informers, extra={self.parents.type_key: self.parents}
        )
        self.reconciler = ParentReconciler(
            self.client, operator.build, operator_name=operator.name, reader=self.reader,
            resources=ResourceReconciler(
                self.client, reader=self.reader, recreate=operator.recreate, clock=self.clock
            ),
            prune_kinds=operator.prune, events=operator.events, clock=self.clock,
        )
        self.config_informer: Informer | None = None
        if operator.config_map:
            namespace, name = operator.config_map.split("/")
            self.config_informer = Informer(
                client, "v1", "ConfigMap", namespace=namespace,
                field_selector=f"metadata.name={name}", clock=self.clock,
            )
        self.heartbeats: HeartbeatStore | None = None
        if operator.resync_heartbeat is not None:
            self.heartbeats = HeartbeatStore(
                client, name=f"{operator.name}-resync", namespace=operator.lease_namespace,
                identity=self.identity,
            )
        self.elector: LeaderElector | None = None
        if operator.leader_election:
            self.elector = LeaderElector(
                client, LeaseConfig(
                    name=f"{operator.name}-leader", namespace=operator.lease_namespace,
                    lease_duration=operator.lease_duration,
                    renew_deadline=operator.renew_deadline, retry_period=operator.retry_period,
                ),
                identity=self.identity, on_started=self._start_workers,
                on_stopped=self._lost_leadership, clock=self.clock,
            )
        self._metrics_port = metrics_port
        self.health: HealthServer | None = None
        self._lock = threading.Condition()
        self._timer_cond = threading.Condition()
        self._beat_cond = threading.Condition()
        self._last_heartbeat: Heartbeat | None = None
        self._standby_events: dict[ParentKey, float] = {}
        self._taking_over = False
        self._threads: list[threading.Thread] = []
        self._workers: list[threading.Thread] = []
        self._stopping = False
        self._finished = False
        self._active = 0
        self._inner = client
        self._last_started: dict[ParentKey, float] = {}

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> OperatorRuntime:
        """Start informers, timer, health server and (when leading, or without election) workers."""
        self._install()
        if self.elector is None:
            self._resume()
        self.parents.add_handler(self._on_parent)
        self.parents.start()
        if self.config_informer is not None:
            self.config_informer.add_handler(self._on_config)
            self.config_informer.start()
        try:
            for hook in self.operator.on_start:
                cleanup = hook(self)
                if cleanup is not None:
                    self._cleanups.append(cleanup)
        except Exception:
            self.stop(timeout=0.0)
            raise
        self._spawn(self._timer, "optk-resync")
        if self.heartbeats is not None:
            self._spawn(self._beat, "optk-heartbeat")
        if self._metrics_port is not None:
            self.health = HealthServer(self.metrics, ready=lambda: self.ready,
                                       port=self._metrics_port).start()
            _log.info("metrics and health on %s", self.health.url)
        self._spawn(self._warm_children, "optk-warm")
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
        with self._lock:
            self._stopping = True
        self.queue.shutdown()
        for condition in (self._timer_cond, self._beat_cond):
            with condition:
                condition.notify_all()
        deadline = time.monotonic() + timeout
        clean = True
        for worker in list(self._workers):
            worker.join(max(0.0, deadline - time.monotonic()))
            clean = clean and not worker.is_alive()
        if self._workers:
            self._write_heartbeat()  # the last word: what this run covered
        if self.elector is not None:
            self.elector.stop(release=release_lease)
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
        with self._lock:
            self._finished = True
            self._lock.notify_all()
        if not clean:
            _log.warning("shutdown: reconciles still running after %.0fs", timeout)
        return clean

    def __enter__(self) -> OperatorRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def finished(self) -> bool:
        """Whether the runtime stopped (by ``stop`` or because leadership was lost)."""
        with self._lock:
            return self._finished

    @property
    def ready(self) -> bool:
        """Whether the caches are synced (``/readyz``)."""
        config = self.config_informer
        return (self.parents.has_synced and self.informers.synced()
                and (config is None or config.has_synced))

    @property
    def leading(self) -> bool:
        """Whether this runtime's workers run (it leads, or election is off)."""
        with self._lock:
            return bool(self._workers) and not self._stopping

    def wait_synced(self, timeout: float = 30.0) -> bool:
        """Block (real time) until ``ready``."""
        deadline = time.monotonic() + timeout
        while not self.ready:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def wait_idle(self, timeout: float = 30.0, *, settle: float = 0.05) -> bool:
        """Block (real time) until nothing is queued or running for ``settle`` seconds."""
        deadline = time.monotonic() + timeout
        quiet_since: float | None = None
        while time.monotonic() < deadline:
            with self._lock:
                busy = self._active > 0
            if busy or len(self.queue) or self.queue.processing:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= settle:
                return True
            time.sleep(0.002)
        return False

    def request(self, namespace: str | None, name: str) -> None:
        """Queue a reconcile of one parent now."""
        self.stats.triggers["manual"] += 1
        self.queue.add((namespace or "", name))

    def resync_all(self) -> int:
        """Queue every known parent now, as if all were due; returns how many."""
        keys = self.parents.cache.keys()
        for key in keys:
            self.stats.triggers["resync"] += 1
            self.queue.add(key)
        return len(keys)

    # --- threads -----------------------------------------------------------------------------

    def _spawn(self, target: Callable[[], None], name: str) -> threading.Thread:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()
        return thread

    def _start_workers(self) -> None:
        if self.elector is not None:
            self._take_over()
        with self._lock:
            if self._stopping or self._workers:
                return
            for index in range(self.operator.workers):
                worker = threading.Thread(target=self._work, name=f"optk-worker-{index}",
                                          daemon=True)
                self._workers.append(worker)
                worker.start()
        self._kick_timer()
        with self._beat_cond:  # a new leader records its heartbeat at once
            self._beat_cond.notify_all()
        if self.elector is not None:
            self.metrics.set_leader(self.elector.config.name, True)

    def _take_over(self) -> None:
        """Becoming leader: resume the schedule from the previous leader's heartbeat, queue the
        parents whose status or grid time calls for it, and replay the events held as standby
        that came after the previous leader's last possible renewal (one lease duration ago);
        earlier ones it handled while it renewed. No herd: the rest keep their grid times."""
        with self._lock:
            self._taking_over = True
            held, self._standby_events = self._standby_events, {}
        self._resume()
        known = self.parents.cache.keys()
        for key in known:
            parent = self.parents.cache.get(*key)
            if parent is not None:
                self._first_sight(key, parent)
        horizon = self.clock.monotonic() - self.operator.lease_duration
        for key, seen in held.items():
            if seen >= horizon:
                self.stats.triggers["standby-event"] += 1
                self.queue.add(key)

    def _standby_holds(self, key: ParentKey) -> bool:
        """On a standby, remember an event's parent instead of queueing it (the leader handles
        it; ``_take_over`` replays the recent ones)."""
        if self.elector is None:
            return False
        with self._lock:
            if self._workers or self._taking_over:
                return False
            self._standby_events[key] = self.clock.monotonic()
            return True

    def _warm_children(self) -> None:
        """Start the child informers the parents' builders need, so that a takeover reconciles
        from warm caches and, after a restart, drift of children whose parents are not due yet is
        seen at once (builders are pure, so building costs no request). A parent already
        reconciled by this runtime has declared its own types and is skipped."""
        if not self.parents.wait_synced(None):
            return
        parents = self.parents.cache.keys()
        for key in parents:
            with self._lock:
                if self._stopping:
                    return
            if self.stats.reconciles.get(key):
                continue  # its reconcile declared its types
            parent = self.parents.cache.get(*key)
            if parent is None:
                continue
            try:
                built = [builder()[0] for builder in self.operator.build(parent)]
            except Exception as error:  # the leader reports build failures; a standby only warms
                _log.debug("warming for %s/%s: build failed: %s", key[0], key[1], error)
                continue
            self.informers.use(key, {(str(o.get("apiVersion")), str(o.get("kind")))
                                     for o in built})

    def _lost_leadership(self) -> None:
        if self.elector is not None:
            self.metrics.set_leader(self.elector.config.name, False)
        with self._lock:
            stopping = self._stopping
        if not stopping:
            _log.error("leadership lost; stopping so that a restart campaigns afresh")
            threading.Thread(target=self.stop, name="optk-stop", daemon=True).start()

    def _timer(self) -> None:
        with self._timer_cond:
            while True:
                with self._lock:
                    if self._stopping:
                        return
                    leading = bool(self._workers)
                if not leading:  # a standby keeps its schedule; the leader's timer fires
                    self.clock.wait(self._timer_cond, None)
                    continue
                for key in self.schedule.pop_due(self.clock.time()):
                    self.stats.triggers["resync"] += 1
                    self.queue.add(cast(ParentKey, key))
                due = self.schedule.next_due()
                wait = None if due is None else max(0.0, due - self.clock.time())
                self.clock.wait(self._timer_cond, wait)

    def _resume(self) -> None:
        """Read the previous run's heartbeat so first-seen parents keep their grid times."""
        if self.heartbeats is None:
            return
        try:
            heartbeat = self.heartbeats.read()
        except ApiError as error:
            _log.warning("reading the resync heartbeat failed (%s); restarting from the "
                         "parents' status alone", error)
            heartbeat = None
        if heartbeat is not None:
            _log.info("resuming the periodic resync: covered until %.0f", heartbeat.covered)
        self.schedule.resume_from(heartbeat)

    def _beat(self) -> None:
        """Record what this run covered, every ``resync_heartbeat`` seconds while leading."""
        period = self.operator.resync_heartbeat or 60.0
        next_beat = self.clock.monotonic()
        while True:
            with self._lock:
                if self._stopping:
                    return
                leading = bool(self._workers)
            now = self.clock.monotonic()
            if leading and now >= next_beat:
                self._write_heartbeat()
                next_beat = now + period
            wait = next_beat - now if leading and now < next_beat else period
            with self._beat_cond:
                self.clock.wait(self._beat_cond, wait)

    def _write_heartbeat(self) -> None:
        """Record the schedule's heartbeat unless it is the one recorded last (a record stays
        true as time passes: only a reconcile moves ``covered``)."""
        if self.heartbeats is None:
            return
        heartbeat = self.schedule.heartbeat(self.clock.time())
        if heartbeat == self._last_heartbeat:
            return
        try:
            self.heartbeats.write(heartbeat)
            self.stats.heartbeats += 1
            self._last_heartbeat = heartbeat
        except ApiError as error:  # a missed beat only widens what a restart re-checks
            _log.warning("writing the resync heartbeat failed: %s", error)

    def _kick_timer(self) -> None:
        with self._timer_cond:
            self._timer_cond.notify_all()

    def _work(self) -> None:
        while (key := self.queue.get()) is not None:
            with self._lock:
                self._active += 1
            self.metrics.worker_started()
            try:
                self._process(key)
            except Exception:  # never lose a worker to a bug: back off and keep going
                _ParentLog(_log, {"parent": "/".join(key)}).exception("reconcile crashed")
                self.queue.add_rate_limited(key)
            finally:
                self.metrics.worker_finished()
                with self._lock:
                    self._active -= 1
                self.queue.done(key)

    # --- one reconcile -----------------------------------------------------------------------

    def _process(self, key: ParentKey) -> None:
        log = _ParentLog(_log, {"parent": f"{key[0]}/{key[1]}" if key[0] else key[1]})
        parent = self.parents.cache.get(*key)
        if parent is None or _meta(parent).get("deletionTimestamp"):
            log.info("parent %s; its children are collected by their owner references",
                     "is gone" if parent is None else "is being deleted")
            self.schedule.remove(key)
            self.queue.forget(key)
            self.informers.release(key)
            with self._lock:
                self._last_started.pop(key, None)
            return
        with self._lock:
            self._last_started[key] = self.clock.monotonic()
        started = time.perf_counter()
        try:
            result: ParentResult | None = self.reconciler.reconcile(parent)
            error: Exception | None = None
        except (ApiError, ValueError, TypeError) as exc:
            result, error = None, exc
        seconds = time.perf_counter() - started
        self.stats.reconciles[key] += 1
        if result is not None:
            self.stats.writes += result.writes
            self.informers.use(key, self._types_of(result))
        if result is not None and result.ok:
            self.queue.forget(key)
            self.schedule.reconciled(key, parent, at=self.clock.time())
            self._kick_timer()
            if result.requeue_after is not None:
                self.queue.add_after(key, result.requeue_after)
                self.metrics.observe_reconcile(result="requeue_after", seconds=seconds)
            else:
                self.metrics.observe_reconcile(result="success", seconds=seconds)
            log.debug("reconciled in %.3fs: %d writes", seconds, result.writes)
            return
        self.stats.failures[key] += 1
        self.metrics.observe_reconcile(result="error", seconds=seconds)
        retry_after = getattr(error, "retry_after", None) or 0.0
        if result is not None:
            retry_after = max([retry_after, *(e.retry_after or 0.0 for e in result.errors)])
        if self.schedule.policy.retry_failed_by_backoff:
            delay = self.queue.add_rate_limited(key, at_least=retry_after)
            self.schedule.suspend(key)
        else:  # failures wait for the next event or the periodic resync
            self.schedule.reconciled(key, parent, at=self.clock.time())
            due = self.schedule.due_at(key)
            delay = 0.0 if due is None else due - self.clock.time()
            self._kick_timer()
        reason = str(error) if error is not None else "; ".join(
            [f"{e.ref}: {e.message}" for e in (result.errors if result else ())]
            + ([result.status_error] if result is not None and result.status_error else [])
        )
        log.warning("reconcile failed (%s); retrying in %.3fs", reason, delay)

    @staticmethod
    def _types_of(result: ParentResult) -> set[TypeKey]:
        types = {(r.ref.api_version, r.ref.kind) for r in (*result.children, *result.pruned)}
        types |= {(e.ref.api_version, e.ref.kind) for e in result.errors
                  if e.ref.api_version and e.ref.kind != "builder"}
        return types

    # --- events ------------------------------------------------------------------------------

    def _event_add(self, key: ParentKey) -> None:
        """Queue ``key`` for an event: at once after a quiet window, else at the window's end."""
        if self._standby_holds(key):
            return
        window = self.operator.event_coalesce
        with self._lock:
            last = self._last_started.get(key)
        elapsed = None if last is None else self.clock.monotonic() - last
        if elapsed is None or elapsed >= window:
            self.queue.add(key)
        else:
            self.queue.add_after(key, window - elapsed)

    def _informer_of(self, api_version: str, kind: str) -> Informer | None:
        if (api_version, kind) == self.parents.type_key:
            return self.parents
        return self.informers.informer(api_version, kind)

    def _on_parent(self, event_type: str, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        if self.client.is_own_echo(event_type, new):
            self.stats.triggers["own-echo"] += 1
            return
        key = object_key(new)
        if event_type == "DELETED":
            self.stats.triggers["parent-deleted"] += 1
            if not self._standby_holds(key):
                self.queue.add(key)
            return
        if event_type == "ADDED" and old is None:  # first sight: startup, or a new parent
            self._first_sight(key, new)
            return
        if parent_event_triggers(event_type, new, old=old):
            self.stats.triggers["parent-changed"] += 1
            self._event_add(key)

    def _first_sight(self, key: ParentKey, parent: KubeObject) -> None:
        """Schedule a parent seen for the first time (or afresh at a takeover): queue it now
        when it needs a reconcile or its grid time passed while no one was watching."""
        now = self.clock.time()
        due = self.schedule.observe(key, parent, now=now)
        standby = self.elector is not None and not self.leading and not self._taking_over
        if (parent_needs_reconcile(parent) or due <= now) and not standby:  # else: takeover
            self.stats.triggers["parent-new"] += 1
            self.schedule.take(key)  # in flight: the reconcile sets its next time
            self.queue.add(key)
        self._kick_timer()

    def _on_child(
        self, type_key: TypeKey, event_type: str, old: dict[str, Any] | None,
        new: dict[str, Any],
    ) -> None:
        if self.client.is_own_echo(event_type, new):
            self.stats.triggers["own-echo"] += 1
            return
        if not self.operator.watch_children or not child_event_triggers(event_type, new, old=old):
            return
        for uid in owner_uids(new):
            parent = self.parents.cache.get_by_uid(uid)
            if parent is not None:
                self.stats.triggers["child"] += 1
                self._event_add(object_key(parent))
                return

    def _on_config(self, event_type: str, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        try:
            policy = (self.base_policy if event_type == "DELETED"
                      else self.base_policy.with_configmap(new))
        except ValueError as error:
            _log.error("ignoring the resync ConfigMap: %s", error)
            return
        if policy != self.schedule.policy:
            _log.info("resync interval is now %.0fs", policy.interval)
            self.schedule.set_policy(policy)
            self._kick_timer()

    def _install(self) -> None:
        for obj in self.operator.install:
            try:
                self._inner.create(obj)
                _log.info("installed %s %s", obj.get("kind"), _meta(obj).get("name"))
            except AlreadyExistsError:
                pass

    # used by tests and benchmarks to count API-visible behaviour
    def triggers(self) -> Mapping[str, int]:
        """Counts of what queued parents, by cause."""
        return dict(self.stats.triggers)


def load_operator(target: str) -> Operator:
    """The ``Operator`` named by ``MODULE[:ATTR]`` (``ATTR`` defaults to ``operator``).

    Raises ``ValueError`` naming the target when it cannot be imported or is no ``Operator``.
    """
    module_name, _, attr = target.partition(":")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)  # as `python -m` and `kopf run -m` find the user's modules
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"cannot import operator module {module_name!r}: {error}") from error
    value = getattr(module, attr or "operator", None)
    if not isinstance(value, Operator):
        raise ValueError(
            f"{module_name}:{attr or 'operator'} is not an Operator (got {type(value).__name__})"
        )
    return value


def run_command(
    target: str,
    *,
    kubeconfig: str | None = None,
    embedded: bool = False,
    metrics_port: int | None = None,
    log_format: str = "text",
    log_level: str = "INFO",
) -> int:
    """``optk run MODULE[:ATTR]``: load the operator, set up logging, run until SIGTERM."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLogFormatter() if log_format == "json" else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s"
    ))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(log_level.upper())
    operator = load_operator(target)
    _log.info("running operator %s for %s.%s", operator.name, operator.kind, operator.api_version)
    return operator.run(kubeconfig=kubeconfig, embedded=embedded, metrics_port=metrics_port)
