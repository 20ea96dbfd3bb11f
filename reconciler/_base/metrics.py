"""Metrics and health over HTTP: ``/metrics`` (Prometheus), ``/healthz`` and ``/readyz``.

Metric names are controller-runtime's, so dashboards and alerts written for Go operators work
unchanged: ``controller_runtime_reconcile_total{controller,result}``,
``controller_runtime_reconcile_errors_total``, ``controller_runtime_reconcile_time_seconds``,
``controller_runtime_max_concurrent_reconciles``, ``controller_runtime_active_workers``, the
``workqueue_*`` family (``depth``, ``adds_total``, ``queue_duration_seconds``,
``work_duration_seconds``, ``retries_total``) and ``leader_election_master_status``. Each
``OperatorMetrics`` has its own registry (several operators in one process, or in one test
session, do not collide). ``/readyz`` answers 200 only once the caller's readiness check passes
(the operator's caches are synced), with the body ``ok``, or ``ok (degraded: ...)`` naming what
the operator cannot do (a child kind it may not list) while it serves the rest; ``/healthz``
answers 200 while the process serves and its ``Liveness`` check (if any) finds nothing wrong,
else 503 with the reason (the runtime's check: ``reconciler._driver.liveness``).

``HealthServer`` binds the address it is given through the operator's one listener
(``reconciler._base.listening``, which the webhook server uses too): the unspecified addresses
``0.0.0.0`` and ``::`` mean every interface and both IP families, and it never resolves its own
name. ``default_bind_address`` is
the default of ``optk run``: every interface inside a pod (``KUBERNETES_SERVICE_HOST`` set), where
the kubelet probes the pod's address, and loopback elsewhere. With an ``authorize`` callable
(``reconciler._client.reviews.MetricsAuthorizer``: the API server's TokenReview and
SubjectAccessReview), ``/metrics`` answers only a scraper it allows; the probes stay open.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from reconciler._base.listening import Listener, listen

__all__ = ["ALL_INTERFACES", "LOOPBACK", "HealthServer", "Liveness", "OperatorMetrics",
           "QueueMetrics", "ShardMetrics", "default_bind_address", "parse_bind_address"]

ALL_INTERFACES = "0.0.0.0"
"""Every interface, both IP families (``::`` means the same)."""
LOOPBACK = "127.0.0.1"

_RECONCILE_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
    0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30,
    40, 50, 60,
)
_QUEUE_BUCKETS = tuple(10.0**e for e in range(-8, 4))


class Interventions(Protocol):
    """What the intervention gauges read (the parent reconciler)."""

    def drifted_count(self) -> int:
        """Children whose drift is reported instead of repaired."""

    def contested_count(self) -> int:
        """Children whose repair is held back by contention."""


class OperatorMetrics:
    """The metric families of one operator (one controller, named ``controller``)."""

    def __init__(self, controller: str, *, max_concurrent: int = 1) -> None:
        self.controller = controller
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ["controller", "result"], registry=r,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller", ["controller"], registry=r,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller", ["controller"],
            buckets=_RECONCILE_BUCKETS, registry=r,
        )
        self.max_concurrent = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller", ["controller"], registry=r,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller", ["controller"], registry=r,
        )
        self.leader = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease.",
            ["name"], registry=r,
        )
        self.max_concurrent.labels(controller).set(max_concurrent)
        self.active_workers.labels(controller).set(0)
        for result in ("success", "error", "requeue", "requeue_after"):
            self.reconcile_total.labels(controller, result)
        self.reconcile_errors.labels(controller)
        self.queue = QueueMetrics(controller, registry=r)
        self.shards = ShardMetrics(controller, registry=r)

    def observe_reconcile(self, *, result: str, seconds: float) -> None:
        """Count one reconcile (``success``, ``error``, ``requeue`` or ``requeue_after``)."""
        self.reconcile_total.labels(self.controller, result).inc()
        if result == "error":
            self.reconcile_errors.labels(self.controller).inc()
        self.reconcile_time.labels(self.controller).observe(seconds)

    def worker_started(self) -> None:
        """A worker took a key."""
        self.active_workers.labels(self.controller).inc()

    def worker_finished(self) -> None:
        """A worker finished its key."""
        self.active_workers.labels(self.controller).dec()

    def set_leader(self, lease: str, leading: bool) -> None:
        """Report whether this process holds ``lease``."""
        self.leader.labels(lease).set(1 if leading else 0)

    def intervention_gauges(self, source: Interventions) -> None:
        """``optk_drifted_objects`` and ``optk_contested_objects``, read when scraped."""
        Gauge("optk_drifted_objects", "Children whose drift is reported, not repaired "
              "(drift mode warn, policy observe)", registry=self.registry).set_function(
                  lambda: float(source.drifted_count()))
        Gauge("optk_contested_objects", "Children whose repair is held back: another writer "
              "keeps changing the same fields", registry=self.registry).set_function(
                  lambda: float(source.contested_count()))

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return bytes(generate_latest(self.registry))


class ShardMetrics:
    """Sharding (``reconciler._sharding.shards``): ``optk_shard_parents{controller,shard}``
    (parents per shard, as the assigner sees them), ``optk_shard_moves_total``,
    ``optk_shard_drains_total``, ``optk_shard_drain_timeouts_total``, ``optk_shard_releases_total``
    (drains this replica acknowledged) and ``optk_shard_assignment_seconds`` (from the assigner's
    first sight of an unassigned parent to its label being written)."""

    def __init__(self, controller: str, *, registry: CollectorRegistry) -> None:
        self.controller = controller
        self._shards: set[str] = set()
        self.parents = Gauge("optk_shard_parents", "Parents assigned to each shard",
                             ["controller", "shard"], registry=registry)
        self.moves = Counter("optk_shard_moves_total", "Parents moved to another shard",
                             ["controller"], registry=registry).labels(controller)
        self.drains = Counter("optk_shard_drains_total", "Drain marks set by the assigner",
                              ["controller"], registry=registry).labels(controller)
        self.drain_timeouts = Counter(
            "optk_shard_drain_timeouts_total", "Drains not acknowledged within the timeout",
            ["controller"], registry=registry).labels(controller)
        self.releases = Counter("optk_shard_releases_total",
                                "Drains acknowledged by this replica", ["controller"],
                                registry=registry).labels(controller)
        self.assignment = Histogram(
            "optk_shard_assignment_seconds", "Time from first sight to assignment of a parent",
            ["controller"], buckets=_QUEUE_BUCKETS, registry=registry).labels(controller)

    def set_parents(self, counts: dict[str, int]) -> None:
        """Publish the parents per shard (shards absent from ``counts`` drop to zero)."""
        for shard in self._shards - set(counts):
            self.parents.labels(self.controller, shard).set(0)
        self._shards |= set(counts)
        for shard, count in counts.items():
            self.parents.labels(self.controller, shard).set(count)


class QueueMetrics:
    """client-go's ``workqueue_*`` metrics for one named queue; a ``QueueObserver``."""

    def __init__(self, name: str, *, registry: CollectorRegistry) -> None:
        self.name = name
        labels = ["name"]
        self.depth = Gauge("workqueue_depth", "Current depth of workqueue", labels,
                           registry=registry).labels(name)
        self.adds = Counter("workqueue_adds_total", "Total number of adds handled by workqueue",
                            labels, registry=registry).labels(name)
        self.latency = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            labels, buckets=_QUEUE_BUCKETS, registry=registry,
        ).labels(name)
        self.work = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            labels, buckets=_QUEUE_BUCKETS, registry=registry,
        ).labels(name)
        self.retries = Counter("workqueue_retries_total", "Total number of retries handled by "
                               "workqueue", labels, registry=registry).labels(name)

    def on_add(self) -> None:
        """Count an add."""
        self.adds.inc()

    def on_depth(self, depth: int) -> None:
        """Set the depth gauge."""
        self.depth.set(depth)

    def on_dequeue(self, waited: float) -> None:
        """Observe the time a key waited."""
        self.latency.observe(waited)

    def on_done(self, worked: float) -> None:
        """Observe the time a key was worked on."""
        self.work.observe(worked)

    def on_retry(self) -> None:
        """Count a retry."""
        self.retries.inc()


class Liveness(Protocol):
    """What ``/healthz`` asks on each probe; it must be cheap (no request to anything)."""

    def failing(self) -> str:
        """Why a restart is needed ("" while the process is live)."""
        ...


def parse_bind_address(value: str) -> str:
    """``value`` as an IP address to bind (IPv4 or IPv6, brackets allowed); a ``ValueError``
    saying why for anything else (a host name, or an address with a port: the port is
    ``--metrics-port``'s)."""
    text = value.strip()
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        host, colon, port = text.rpartition(":")
        hint = (f" (the port is set with --metrics-port: give the address alone, e.g. "
                f"{host.strip('[]') or ALL_INTERFACES})" if colon and port.isdigit() else "")
        raise ValueError(f"{value!r} is not an IP address to bind{hint}") from None


def default_bind_address(environ: Mapping[str, str]) -> str:
    """Every interface inside a pod (``KUBERNETES_SERVICE_HOST`` set: the kubelet probes the
    pod's address), loopback elsewhere (a developer's machine)."""
    return ALL_INTERFACES if environ.get("KUBERNETES_SERVICE_HOST") else LOOPBACK


def _bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer TOKEN`` header, else None."""
    scheme, _, token = (header or "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


class HealthServer:
    """A small threaded HTTP server for ``/metrics``, ``/healthz`` and ``/readyz``.

    ``host`` is the address to bind (``0.0.0.0`` or ``::``: every interface, both families);
    ``port=0`` picks a free port (read it from ``.port``). ``authorize``, when given, guards
    ``/metrics`` only: it gets the request's bearer token (None without one) and returns the
    HTTP status and body to answer unless the status is 200 (a 401 says ``WWW-Authenticate:
    Bearer``); ``/healthz`` and ``/readyz`` stay open for the kubelet. ``liveness``, when
    given, makes ``/healthz`` answer 503 with its reason while it fails. Use as a context
    manager, or call ``start``/``stop``.
    """

    def __init__(
        self,
        metrics: OperatorMetrics,
        *,
        ready: Callable[[], bool],
        degraded: Callable[[], str] | None = None,
        liveness: Liveness | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        authorize: Callable[[str | None], tuple[int, str]] | None = None,
    ) -> None:
        self._metrics = metrics
        self._ready = ready
        self._degraded = degraded
        self._liveness = liveness
        self._authorize = authorize
        self._server: Listener = listen(host, port, self._handler_class())
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://host:port`` (the bound address; an IPv6 one in brackets)."""
        host = str(self._server.server_address[0])
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    def start(self) -> HealthServer:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="optk-metrics", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> HealthServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        metrics = self._metrics
        ready = self._ready
        degraded = self._degraded
        liveness = self._liveness
        authorize = self._authorize

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    code, why = 200, ""
                    if authorize is not None:
                        code, why = authorize(_bearer(self.headers.get("Authorization")))
                    if code == 200:
                        self._answer(200, metrics.exposition(), CONTENT_TYPE_LATEST)
                    else:
                        self._answer(code, why.encode(), "text/plain")
                elif path in ("/healthz", "/livez"):
                    why = "" if liveness is None else liveness.failing()
                    self._answer(503 if why else 200, why.encode() if why else b"ok",
                                 "text/plain")
                elif path == "/readyz":
                    ok = ready()
                    why = degraded() if ok and degraded is not None else ""
                    body = (f"ok (degraded: {why})".encode() if why
                            else b"ok" if ok else b"caches not synced")
                    self._answer(200 if ok else 503, body, "text/plain")
                else:
                    self._answer(404, b"not found", "text/plain")

            def _answer(self, code: int, body: bytes, content_type: str) -> None:
                self.send_response(code)
                if code == 401:
                    self.send_header("WWW-Authenticate", 'Bearer realm="metrics"')
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return  # scrapes are not worth a log line each

        return Handler
