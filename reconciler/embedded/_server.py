"""``EmbeddedApiServer``: the embedded Kubernetes API server as a Python object.

It owns one store, one kind registry, the garbage collector and the aiohttp application, and
runs them on a private event loop, either in a background thread (``start()`` or ``with``) or in
the foreground (``serve_forever()``, used by ``optk apiserver``). At its first start it generates
a CA and server certificate, a random bearer token, and a kubeconfig that carries both, so
the official client and kubectl connect over verified HTTPS. It binds to loopback unless told
otherwise. Python callers can read request counts, inject faults and compact the watch history.

A server can be stopped and started again (``stop()`` then ``start()``) with its state: the same
port, CA, token, stored objects and request counts, resourceVersions continuing. As after a
real kube-apiserver restart, its watch cache then starts at the current resourceVersion, so a
watch from an older version answers 410 Expired. A kubeconfig at a user's path is added to,
never overwritten (``_kubeconfig``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import os
import secrets
import shutil
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

import kubernetes.client
from aiohttp import web

from reconciler.embedded._collecting import GarbageCollector
from reconciler.embedded._errors import EmbeddedServerError
from reconciler.embedded._http import ApiApplication
from reconciler.embedded._instruments import ServerInstruments
from reconciler.embedded._kinds import KindRegistry, ServerContext
from reconciler.embedded._kubeconfig import KubeconfigEntry, KubeconfigFile
from reconciler.embedded._operations import Operations
from reconciler.embedded._storage import DEFAULT_HISTORY_BYTES, Storage
from reconciler.embedded._tls import TlsFiles, TlsMaterial, generate_tls, write_tls
from reconciler.embedded._watching import (
    DEFAULT_WATCH_BUFFER_BYTES,
    DEFAULT_WATCH_BUFFER_TOTAL_BYTES,
    WatchBudget,
)

__all__ = ["EmbeddedApiServer", "ServerNotRunningError"]

_INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class ServerNotRunningError(EmbeddedServerError, RuntimeError, ValueError):
    """Misuse: the server was used before ``start()`` or after ``stop()``."""


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _make_registry() -> KindRegistry:
    from reconciler.embedded._registry import make_registry

    return make_registry()


class EmbeddedApiServer(ServerInstruments):
    """A Kubernetes API server in this process, for tests, benchmarks and demos.

    A context manager; ``.url``, ``.token``, ``.kubeconfig_path``, ``.api_client()`` connect to
    it; ``stop()`` then ``start()`` restarts it with its state. A ``kubeconfig_path`` gets a
    context (current when ``set_current_context``) until ``stop()``; a file that is not a
    kubeconfig raises ``KubeconfigError`` (``ValueError``). A watcher may have
    ``watch_buffer_bytes`` unsent (all: ``watch_buffer_total_bytes``) before it is ended; the
    history keeps at most ``history_size`` events and about ``history_bytes`` of objects.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        allow_non_loopback: bool = False,
        kubeconfig_path: str | os.PathLike[str] | None = None,
        history_size: int = 20_000,
        history_bytes: int = DEFAULT_HISTORY_BYTES,
        bookmark_interval: float = 60.0,
        registry: KindRegistry | None = None,
        set_current_context: bool = True,
        watch_buffer_bytes: int = DEFAULT_WATCH_BUFFER_BYTES,
        watch_buffer_total_bytes: int = DEFAULT_WATCH_BUFFER_TOTAL_BYTES,
    ) -> None:
        if not _is_loopback(host) and not allow_non_loopback:
            raise ValueError(
                f"refusing to bind the embedded API server to non-loopback host {host!r}; "
                "pass allow_non_loopback=True to do so"
            )
        if not 0 <= port <= 65535:
            raise ValueError(f"port must be within 0..65535, got {port}")
        self._host = host
        self._port = port
        self._kubeconfig_file: KubeconfigFile | None = None
        if kubeconfig_path:
            self._kubeconfig_file = KubeconfigFile(path=Path(kubeconfig_path),
                                                   set_current=set_current_context)
            self._kubeconfig_file.check()
        self._watch_budget = WatchBudget(per_watcher=watch_buffer_bytes,
                                         total=watch_buffer_total_bytes)
        self._tls_material: TlsMaterial | None = None
        self._token = secrets.token_urlsafe(32)
        super().__init__()
        self._storage = Storage(history_size=history_size, history_bytes=history_bytes)
        self._registry = registry if registry is not None else _make_registry()
        self._ops = Operations(self._storage, self._registry, ServerContext())
        self._bookmark_interval = bookmark_interval
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._collector: GarbageCollector | None = None
        self._application: ApiApplication | None = None
        self._bound_port: int | None = None
        self._workdir: Path | None = None
        self._workdir_path: Path | None = None
        self._tls: TlsFiles | None = None
        self._kubeconfig: Path | None = None
        self._started = threading.Event()
        self._start_error: BaseException | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> EmbeddedApiServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _prepare(self) -> None:
        self._workdir = self._make_workdir()
        if self._tls_material is None:
            hosts = tuple(dict.fromkeys(("127.0.0.1", "::1", self._host)))
            self._tls = generate_tls(self._workdir, hosts=hosts)
            self._tls_material = self._tls.material()
        else:  # a restart: the same CA and certificate, and a fresh watch cache
            self._tls = write_tls(self._workdir, self._tls_material)
            self._storage.compact()
        for name in _INITIAL_NAMESPACES:
            if self._storage.get(("", "namespaces"), namespace="", name=name) is None:
                self._ops.create(self._namespace_type(), {
                    "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
                }, namespace="")

    def _make_workdir(self) -> Path:
        """A private directory; a restart gets the same path again (clients keep their CA
        file path), or a new one if that path was taken meanwhile."""
        if self._workdir_path is not None:
            with contextlib.suppress(OSError):
                os.mkdir(self._workdir_path, 0o700)
                return self._workdir_path
        self._workdir_path = Path(tempfile.mkdtemp(prefix="optk-apiserver-"))
        os.chmod(self._workdir_path, 0o700)
        return self._workdir_path

    def _namespace_type(self) -> Any:
        rt = self._registry.lookup("", "v1", "namespaces")
        if rt is None:
            raise RuntimeError("the kind registry does not serve namespaces")
        return rt

    async def _start_site(self) -> None:
        assert self._tls is not None
        application = ApiApplication(
            self._ops, token=self._token, accounting=self._accounting, faults=self._faults,
            address=lambda: f"{self._host}:{self._bound_port}",
            bookmark_interval=self._bookmark_interval,
            watch_budget=self._watch_budget,
        )
        self._application = application
        # handler_cancellation: a closed connection cancels its handler, so a watch whose
        # client left ends at once (not at its next event or timeout)
        self._runner = web.AppRunner(
            application.make_app(), access_log=None, handle_signals=False,
            shutdown_timeout=0.5, handler_cancellation=True,
        )
        await self._runner.setup()
        port = self._port or self._bound_port or 0  # a restart binds the same port again
        site = web.TCPSite(
            self._runner, self._host, port, ssl_context=self._tls.server_context(),
            backlog=512,
        )
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or ()
        self._bound_port = int(sockets[0].getsockname()[1]) if sockets else port
        self._collector = GarbageCollector(self._ops, offloader=application.offloader)
        self._collector.start()
        self._kubeconfig = self._write_kubeconfig()

    async def _shutdown(self) -> None:
        if self._collector is not None:
            self._collector.stop()
        if self._application is not None:
            self._application.close()
            await asyncio.sleep(0)  # let the cancelled watches unwind before closing
        if self._runner is not None:
            await self._runner.cleanup()
        # aiohttp closes each connection gracefully: a TLS close waits for the peer's
        # close_notify (an idle keep-alive connection's client never reads it) and the loop,
        # closed next, never sees it, so the socket stayed open. A client then sent its next
        # request (a watch, after a restart) on that pooled connection and waited forever: a
        # restarted server's operator saw no event of that kind again. Every connection is cut.
        loop = asyncio.get_running_loop()
        for transport in list(getattr(loop, "_transports", {}).values()):  # CPython's selector
            if transport is not None:  # loop keeps its socket transports there, by fd
                transport.abort()
        await asyncio.sleep(0)  # the aborts close their sockets on the next turn

    def _run_loop(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._start_site())
        except BaseException as exc:
            self._start_error = exc
            self._started.set()
            loop.close()
            return
        self._started.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._shutdown())
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def start(self) -> EmbeddedApiServer:
        """Start serving in a background thread; returns ``self`` once the port is bound."""
        if self._thread is not None:
            return self
        self._started.clear()
        self._start_error = None
        self._prepare()
        self._thread = threading.Thread(
            target=self._run_loop, name="optk-embedded-apiserver", daemon=True
        )
        self._thread.start()
        self._started.wait()
        if self._start_error is not None:
            self._thread.join()
            self._thread = None
            self._remove_files()
            raise self._start_error
        return self

    def stop(self) -> None:
        """Stop serving, end every watch and remove the generated files (and what was added
        to a user's kubeconfig). The state stays: ``start()`` serves it again."""
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
        self._thread = None
        self._loop = None
        self._application = None
        self._remove_files()

    def _remove_files(self) -> None:
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        if self._kubeconfig_file is not None:
            self._kubeconfig_file.uninstall()
        self._kubeconfig = None

    def serve_forever(self, stop: threading.Event | None = None) -> None:
        """Serve in the calling thread until ``stop`` is set (or forever)."""
        self.start()
        try:
            (stop or threading.Event()).wait()
        finally:
            self.stop()

    # -- connection data ------------------------------------------------------------------

    def _require_running(self) -> None:
        if self._bound_port is None or self._thread is None:
            raise ServerNotRunningError("the embedded API server is not running; use start()")

    @property
    def url(self) -> str:
        """``https://127.0.0.1:<port>``."""
        self._require_running()
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"https://{host}:{self._bound_port}"

    @property
    def token(self) -> str:
        """The bearer token every request must carry."""
        return self._token

    @property
    def has_controller_manager(self) -> bool:
        """Always ``False``: no controllers run here (no garbage collector, no namespace or
        ServiceAccount controllers); the server does what they would where a test needs it
        (a deleted namespace's objects go with it). As ``ControlPlane.has_controller_manager``,
        so that tests ask either server alike (``reconciler.testing.KubeApiServer``)."""
        return False

    @property
    def kubeconfig_path(self) -> Path:
        """The kubeconfig (mode 0600) with the server URL, CA and token."""
        self._require_running()
        assert self._kubeconfig is not None
        return self._kubeconfig

    @property
    def ca_cert_path(self) -> Path:
        """The PEM file of the server's CA."""
        self._require_running()
        assert self._tls is not None
        return self._tls.ca_cert_path

    def _write_kubeconfig(self) -> Path:
        assert self._tls is not None
        assert self._workdir is not None
        entry = KubeconfigEntry(
            name=f"optk-embedded-{self._bound_port}", server=self.url_unchecked(),
            ca_data=base64.b64encode(self._tls.ca_pem).decode(), token=self._token,
        )
        if self._kubeconfig_file is not None:
            self._kubeconfig_file.install(entry)
            return self._kubeconfig_file.path
        private = KubeconfigFile(path=self._workdir / "kubeconfig")
        private.install(entry)  # removed with the private directory
        return private.path

    def url_unchecked(self) -> str:
        """The URL without the running check (used while starting)."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"https://{host}:{self._bound_port}"

    def configuration(self) -> kubernetes.client.Configuration:
        """An official-client ``Configuration`` for this server (verified TLS, bearer token)."""
        self._require_running()
        config = kubernetes.client.Configuration()
        config.host = self.url
        config.ssl_ca_cert = str(self.ca_cert_path)
        config.verify_ssl = True
        config.api_key = {"authorization": self._token}
        config.api_key_prefix = {"authorization": "Bearer"}
        return config

    def api_client(self) -> kubernetes.client.ApiClient:
        """A new official ``ApiClient`` connected to this server."""
        return kubernetes.client.ApiClient(self.configuration())

    # -- history (request counts and faults: ServerInstruments) ---------------------------

    def compact(self) -> int:
        """Forget the watch history (as an etcd compaction does); returns the oldest version
        still watchable. Watches and exact lists from older versions then get 410."""
        return self._storage.compact()

    @property
    def resource_version(self) -> int:
        """The latest committed ``resourceVersion``."""
        return self._storage.resource_version

    def active_watches(self) -> int:
        """How many watch streams are open right now (informers, kubectl --watch, ...)."""
        return self._application.active_watches if self._application is not None else 0

    def object_count(self) -> int:
        """How many objects the server stores."""
        return self._storage.count()
