"""``ControlPlane``: etcd, kube-apiserver and kube-controller-manager as a context manager.

The surface is ``EmbeddedApiServer``'s (``url``, ``token``, ``kubeconfig_path``, ``api_client()``,
``request_counts()``) plus ``kubeconfig_for(user, groups)`` for least-privilege tests. Everything
runs on free loopback ports with a temporary PKI and data directory that are removed on stop;
every process is stopped (process group, SIGTERM then SIGKILL) on exit, on an exception and on
Ctrl-C. Request counts come from the API server's audit log (``_audit``). kube-apiserver and
kube-controller-manager can be restarted alone with the argv they started with (``_argv`` builds
it once), so a restart keeps the port, PKI, tokens and etcd: what a cluster's restart keeps.

kube-controller-manager is optional, since setup-envtest's binaries (``KUBEBUILDER_ASSETS``)
include none: without it the control plane serves the API alone, as controller-runtime's
envtest does, and says so (``has_controller_manager``, ``controllers``), so a test that needs the
garbage collector or the namespace controller can skip instead of waiting for what never comes.

The module is over 500 lines because the users' credentials live beside the processes that
honour them: ``kubeconfig_for`` makes a client certificate signed by the plane's own CA, or for
a ServiceAccount a token from the TokenRequest API (a certificate's common name cannot hold a
long ServiceAccount name), and both need the running API server and its PKI; splitting the
class would hand its private PKI to another module.
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import shutil
import socket
import ssl
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import kubernetes.client
import yaml

from reconciler.envtest._argv import (
    ADMIN_USER,
    AUDIT_POLICY,
    CONTROLLER_MANAGER_USER,
    CONTROLLERS,
    MARKER_USER,
    SERVICE_ACCOUNT_ISSUER,
    Layout,
    apiserver_argv,
    csv_field,
    etcd_argv,
    kubeconfig,
    manager_argv,
    token_file,
)
from reconciler.envtest._assets import KubeAssets, find_assets
from reconciler.envtest._audit import AuditLog
from reconciler.envtest._errors import ControlPlaneError, StartTimeoutError, UnknownUserError
from reconciler.envtest._pki import Pki, generate_pki
from reconciler.envtest._processes import Component, read_from

__all__ = ["ADMIN_USER", "ControlPlane"]

_INTERNAL_USERS = frozenset({"system:apiserver", CONTROLLER_MANAGER_USER, MARKER_USER})
_ETCD = "etcd"
_APISERVER = "kube-apiserver"
_MANAGER = "kube-controller-manager"
_GC_SYNCED = b"all resource monitors have synced"


_SERVICE_ACCOUNTS = "system:serviceaccounts"
_SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
_TOKEN_SECONDS = 24 * 3600


def _service_account(user: str) -> tuple[str, str] | None:
    """``(namespace, name)`` of a ServiceAccount user name, else None."""
    if not user.startswith(_SERVICE_ACCOUNT_PREFIX):
        return None
    namespace, colon, name = user.removeprefix(_SERVICE_ACCOUNT_PREFIX).partition(":")
    return (namespace, name) if colon and namespace and name and ":" not in name else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def _http_get(url: str, *, token: str | None, cafile: Path) -> bytes:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    context = ssl.create_default_context(cafile=str(cafile)) if url.startswith("https:") else None
    with urllib.request.urlopen(request, timeout=5, context=context) as response:
        return bytes(response.read())


def _wait_for(component: Component, what: str, ready: Callable[[], bool], *,
              timeout: float) -> None:
    """Poll ``ready()`` until true; ``ComponentCrashedError`` if ``component`` exits meanwhile,
    ``StartTimeoutError`` (with its log's tail) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        component.check()
        try:
            if ready():
                return
        except (OSError, urllib.error.URLError, kubernetes.client.ApiException):
            pass
        if time.monotonic() > deadline:
            raise StartTimeoutError(component=component.name, timeout=timeout,
                                    waited_for=what, log_tail=component.log_tail())
        time.sleep(0.1)


class ControlPlane:
    """A real Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager) for tests.

    ``with ControlPlane() as cp:`` starts it; the binaries come from ``assets``, else
    ``$OPTK_KUBE_ASSETS``, else ``$KUBEBUILDER_ASSETS`` (``find_assets``), resolved once, on
    first need. kube-controller-manager runs when that directory has one. ``users`` registers
    token users (name to groups) before start, since the API server reads its token file only
    then. ``start_timeout`` bounds each component's start-up.
    """

    def __init__(
        self,
        assets: str | os.PathLike[str] | None = None,
        *,
        users: Mapping[str, Iterable[str]] | None = None,
        start_timeout: float = 60.0,
    ) -> None:
        self._assets_arg = assets
        self._assets: KubeAssets | None = None
        self._start_timeout = start_timeout
        self._users: dict[str, tuple[str, tuple[str, ...]]] = {}
        for user, groups in (users or {}).items():
            self._users[csv_field(user)] = (
                secrets.token_urlsafe(24), tuple(csv_field(g) for g in groups)
            )
        self._token = secrets.token_urlsafe(32)
        self._cm_token = secrets.token_urlsafe(32)
        self._marker_token = secrets.token_urlsafe(32)
        self._layout: Layout | None = None
        self._pki: Pki | None = None
        self._components: list[Component] = []
        self._pids: list[int] = []
        self._audit: AuditLog | None = None
        self._kubeconfig: Path | None = None
        self._apiserver_argv: list[str] = []
        self._manager_argv: list[str] = []

    # -- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        """Start etcd, kube-apiserver and kube-controller-manager (when the assets hold one);
        returns once all are ready (``AssetsNotFoundError`` first if binaries are missing).

        Any failure (or Ctrl-C) while starting stops what was started and re-raises."""
        if self._components:
            return self
        assets = self.assets
        try:
            self._start(assets)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, assets: KubeAssets) -> None:
        workdir = Path(tempfile.mkdtemp(prefix="optk-envtest-"))
        os.chmod(workdir, 0o700)
        self._layout = layout = Layout(workdir=workdir, etcd_port=_free_port(),
                                       peer_port=_free_port(), apiserver_port=_free_port())
        self._pki = pki = generate_pki(workdir)
        etcd = self._spawn(_ETCD, etcd_argv(assets.etcd, layout))
        self._wait(etcd, "etcd /health",
                   lambda: b"true" in self._http_get(f"{layout.etcd_url}/health"))
        _write_private(workdir / "tokens.csv", token_file(
            admin=self._token, controller_manager=self._cm_token, marker=self._marker_token,
            users=self._users))
        _write_private(workdir / "audit-policy.yaml", yaml.safe_dump(dict(AUDIT_POLICY)))
        self._audit = AuditLog(layout.audit_log)
        self._apiserver_argv = apiserver_argv(
            assets.kube_apiserver, layout, pki,
            service_account_admission=assets.kube_controller_manager is not None)
        apiserver = self._spawn(_APISERVER, self._apiserver_argv)
        self._wait_ready(apiserver)
        self._kubeconfig = self._write_kubeconfig(workdir / "kubeconfig", ADMIN_USER,
                                                  {"token": self._token})
        if assets.kube_controller_manager is None:
            self._wait(apiserver, "the default namespace", self._default_namespace_exists)
        else:
            self._start_controller_manager(assets.kube_controller_manager)
        self.reset_request_counts()  # count from zero, as a fresh embedded server does

    def _start_controller_manager(self, executable: Path) -> None:
        assert self._layout is not None
        assert self._pki is not None
        workdir, pki = self._layout.workdir, self._pki
        cm_kubeconfig = self._write_kubeconfig(workdir / "controller-manager.kubeconfig",
                                               CONTROLLER_MANAGER_USER, {"token": self._cm_token})
        self._manager_argv = manager_argv(executable, kubeconfig_path=cm_kubeconfig, pki=pki)
        manager = self._spawn(_MANAGER, self._manager_argv)
        self._wait(manager, "the default ServiceAccount (serviceaccount controller)",
                   self._default_service_account_exists)

    def _spawn(self, name: str, argv: list[str], *, at: int | None = None) -> Component:
        """Start a component; ``at`` keeps its place in the start order (stop goes backwards)."""
        assert self._layout is not None
        component = Component(name=name, argv=argv,
                              log_path=self._layout.workdir / f"{name}.log")
        self._components.insert(len(self._components) if at is None else at, component)
        self._pids.append(component.pid)
        return component

    def _wait(self, component: Component, what: str, ready: Callable[[], bool]) -> None:
        _wait_for(component, what, ready, timeout=self._start_timeout)

    def _http_get(self, url: str, *, token: str | None = None) -> bytes:
        assert self._pki is not None
        return _http_get(url, token=token, cafile=self._pki.ca_cert_path)

    def _wait_ready(self, apiserver: Component) -> None:
        self._wait(apiserver, "kube-apiserver /readyz",
                   lambda: self._http_get(f"{self.url}/readyz", token=self._token) == b"ok")

    def _default_namespace_exists(self) -> bool:
        with self.api_client() as client:
            kubernetes.client.CoreV1Api(client).read_namespace("default")
        return True

    def _default_service_account_exists(self) -> bool:
        with self.api_client() as client:
            kubernetes.client.CoreV1Api(client).read_namespaced_service_account(
                "default", "default")
        return True

    def stop(self) -> None:
        """Stop every started process (newest first) and remove the temporary directory."""
        components, self._components = self._components, []
        for component in reversed(components):
            component.stop()
        if self._layout is not None:
            shutil.rmtree(self._layout.workdir, ignore_errors=True)
            self._layout = None
        self._kubeconfig = None

    def restart_controller_manager(self) -> None:
        """Restart kube-controller-manager; returns once its garbage collector has synced. Its
        collector learns new CRD kinds only at start and on a ~30 s rescan: call this (1-2 s)
        after creating CRDs whose objects' dependents a test expects collected promptly.
        A no-op on a control plane without kube-controller-manager (no collector to tell)."""
        self._require_running()
        if not self._manager_argv:
            return
        old = next(c for c in self._components if c.name == _MANAGER)
        old.stop()
        place = self._components.index(old)
        self._components.remove(old)
        offset = old.log_path.stat().st_size if old.log_path.exists() else 0
        manager = self._spawn(_MANAGER, self._manager_argv, at=place)
        self._wait(manager, "the garbage collector's sync after a restart",
                   lambda: _GC_SYNCED in read_from(manager.log_path, offset))

    def stop_apiserver(self, *, grace: float = 2.0) -> None:
        """Stop kube-apiserver alone: SIGTERM, SIGKILL after ``grace`` seconds (no-op when it is
        stopped). etcd and kube-controller-manager keep running, ``url``, ``token`` and every
        kubeconfig stay valid; requests are refused until ``start_apiserver()``."""
        self._require_running()
        apiserver = next((c for c in self._components if c.name == _APISERVER), None)
        if apiserver is not None:
            apiserver.stop(grace=grace)
            self._components.remove(apiserver)

    def start_apiserver(self) -> None:
        """Start kube-apiserver again after ``stop_apiserver()`` (no-op when it runs): the same
        port, PKI, tokens, flags and etcd, so clients holding the old kubeconfig keep working;
        returns once ``/readyz`` answers. ``ComponentCrashedError`` if it exits (e.g. another
        process took its port meanwhile), ``StartTimeoutError`` after ``start_timeout``."""
        self._require_running()
        if all(c.name != _APISERVER for c in self._components):
            self._wait_ready(self._spawn(_APISERVER, self._apiserver_argv, at=1))

    def restart_apiserver(self, *, down_seconds: float = 0.0) -> None:
        """Restart kube-apiserver over the same etcd: ``stop_apiserver()``, ``down_seconds`` of
        outage, ``start_apiserver()``. Objects and resourceVersions continue (they live in
        etcd); a watch from a resourceVersion older than the restart gets 410 Gone, as after
        any real API server restart, since the new server's watch cache starts at its list."""
        if down_seconds < 0:
            raise ValueError(f"down_seconds must be >= 0, not {down_seconds}")
        self.stop_apiserver()
        time.sleep(down_seconds)
        self.start_apiserver()

    def check(self) -> None:
        """Raise ``ComponentCrashedError`` (with its log's tail) if a component has exited."""
        for component in self._components:
            component.check()

    # -- what runs --------------------------------------------------------------------------

    @property
    def assets(self) -> KubeAssets:
        """The binaries this control plane runs (``find_assets(assets)``, resolved on first use
        and kept); ``AssetsNotFoundError`` names what is missing where."""
        if self._assets is None:
            self._assets = find_assets(self._assets_arg)
        return self._assets

    @property
    def has_controller_manager(self) -> bool:
        """Whether kube-controller-manager runs (it does when the assets hold one). Without it
        nothing collects garbage (owner references are kept, dependents stay), a deleted
        namespace stays ``Terminating`` with its objects, and namespaces get no ``default``
        ServiceAccount (the ServiceAccount admission plugin is then disabled)."""
        return self.assets.kube_controller_manager is not None

    @property
    def components(self) -> tuple[str, ...]:
        """The components this control plane runs, in start order: etcd, kube-apiserver and,
        when the assets hold one, kube-controller-manager."""
        manager = (_MANAGER,) if self.has_controller_manager else ()
        return (_ETCD, _APISERVER, *manager)

    @property
    def controllers(self) -> tuple[str, ...]:
        """The controllers that run: garbagecollector, namespace, serviceaccount and
        serviceaccount-token with kube-controller-manager; none without it."""
        return CONTROLLERS if self.has_controller_manager else ()

    # -- connection data ------------------------------------------------------------------

    def _require_running(self) -> None:
        if self._layout is None or self._pki is None:
            raise ControlPlaneError("the control plane is not running; use start() or `with`")

    @property
    def url(self) -> str:
        """``https://127.0.0.1:<port>`` of kube-apiserver."""
        self._require_running()
        assert self._layout is not None
        return self._layout.apiserver_url

    @property
    def audit_log_path(self) -> Path:
        """kube-apiserver's audit log (JSON lines, level Metadata: who, from which address,
        what, when, the answer's code); written before each answer (blocking mode)."""
        self._require_running()
        assert self._layout is not None
        return self._layout.audit_log

    @property
    def token(self) -> str:
        """The bearer token of ``optk-admin`` (group ``system:masters``)."""
        return self._token

    @property
    def kubeconfig_path(self) -> Path:
        """The admin kubeconfig (mode 0600): server URL, CA and token."""
        self._require_running()
        assert self._kubeconfig is not None
        return self._kubeconfig

    @property
    def ca_cert_path(self) -> Path:
        """The PEM file of the control plane's CA."""
        self._require_running()
        assert self._pki is not None
        return self._pki.ca_cert_path

    def configuration(self) -> kubernetes.client.Configuration:
        """An official-client ``Configuration`` for the admin (verified TLS, bearer token)."""
        config = kubernetes.client.Configuration()
        config.host = self.url
        config.ssl_ca_cert = str(self.ca_cert_path)
        config.verify_ssl = True
        config.api_key = {"authorization": self._token}
        config.api_key_prefix = {"authorization": "Bearer"}
        return config

    def api_client(self) -> kubernetes.client.ApiClient:
        """A new official ``ApiClient`` connected as the admin."""
        return kubernetes.client.ApiClient(self.configuration())

    def _write_kubeconfig(self, path: Path, user: str, credentials: Mapping[str, str]) -> Path:
        assert self._pki is not None
        document = kubeconfig(url=self.url, ca_pem=self._pki.ca_pem, user=user,
                              credentials=credentials)
        _write_private(path, yaml.safe_dump(document, sort_keys=False))
        return path

    def kubeconfig_for(self, user: str, groups: Iterable[str] = ()) -> Path:
        """A kubeconfig for ``user`` in ``groups`` (not an admin unless a group makes it one).

        A user registered with ``users=`` gets its bearer token (``groups`` must then be empty
        or the registered ones). A ServiceAccount, ``system:serviceaccount:NS:NAME``, gets a
        token of the TokenRequest API, as a pod does (the ServiceAccount is created when
        missing; its namespace must exist), whose groups are the ServiceAccount's own
        (``system:serviceaccounts``, ``system:serviceaccounts:NS``, ``system:authenticated``):
        ``groups`` must be among them. Any other user gets a client certificate signed by the
        control plane's CA (user = common name, of any length; groups = organizations), which
        needs no restart.
        """
        self._require_running()
        assert self._layout is not None
        assert self._pki is not None
        wanted = tuple(csv_field(g) for g in groups)
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in user)
        path = self._layout.workdir / f"kubeconfig-{safe}-{uuid.uuid4().hex[:6]}"
        if user in self._users:
            token, registered = self._users[user]
            if wanted and set(wanted) != set(registered):
                raise UnknownUserError(user=f"{user} (groups {', '.join(wanted)})",
                                       registered=tuple(self._users))
            return self._write_kubeconfig(path, user, {"token": token})
        account = _service_account(user)
        if account is not None:
            namespace, name = account
            implied = {_SERVICE_ACCOUNTS, f"{_SERVICE_ACCOUNTS}:{namespace}",
                       "system:authenticated"}
            if not set(wanted) <= implied:
                raise ControlPlaneError(
                    f"kubeconfig_for({user!r}): a ServiceAccount's token carries the groups "
                    f"{', '.join(sorted(implied))}, not {', '.join(sorted(set(wanted) - implied))}")
            return self._write_kubeconfig(path, user,
                                          {"token": self._service_account_token(namespace, name)})
        cert, key = self._pki.client_certificate(user=csv_field(user), groups=wanted)
        return self._write_kubeconfig(path, user, {
            "client-certificate-data": base64.b64encode(cert).decode(),
            "client-key-data": base64.b64encode(key).decode(),
        })

    def _service_account_token(self, namespace: str, name: str) -> str:
        """A token of the ServiceAccount ``namespace/name`` from the TokenRequest API (valid for
        a day; the ServiceAccount created when missing)."""
        with self.api_client() as client:
            core = kubernetes.client.CoreV1Api(client)
            try:
                account = kubernetes.client.V1ServiceAccount(
                    metadata=kubernetes.client.V1ObjectMeta(name=name))
                core.create_namespaced_service_account(namespace, account)
            except kubernetes.client.ApiException as exc:
                if exc.status == 404:
                    raise ControlPlaneError(
                        f"kubeconfig_for('system:serviceaccount:{namespace}:{name}'): the "
                        f"namespace {namespace!r} does not exist; create it first") from exc
                if exc.status != 409:
                    raise
            answer = core.create_namespaced_service_account_token(
                name, namespace, kubernetes.client.AuthenticationV1TokenRequest(
                    spec=kubernetes.client.V1TokenRequestSpec(
                        audiences=[SERVICE_ACCOUNT_ISSUER], expiration_seconds=_TOKEN_SECONDS)))
        assert answer.status is not None
        return str(answer.status.token)

    # -- request accounting ---------------------------------------------------------------

    def _flush_audit(self, *, timeout: float = 10.0) -> None:
        """Read the audit log up to a fresh marker request, so the counts cover every request
        that completed before this call."""
        assert self._audit is not None
        marker = uuid.uuid4().hex
        with contextlib.suppress(urllib.error.HTTPError):  # any answer is audited
            self._http_get(f"{self.url}/version?optk-audit-marker={marker}",
                           token=self._marker_token)
        deadline = time.monotonic() + timeout
        while not any(marker in uri for uri in self._audit.read_new()):
            if time.monotonic() > deadline:
                self.check()
                raise ControlPlaneError(f"audit marker {marker} not logged after {timeout} s")
            time.sleep(0.01)

    def request_counts(self, user: str | None = None) -> dict[str, int]:
        """Cumulative requests by verb (get list watch create update patch delete
        deletecollection) from the audit log, complete up to this call.

        ``user`` counts that user's requests only; None counts every client's requests but not
        the control plane's own (kube-apiserver's loopback client, kube-controller-manager)."""
        self._require_running()
        self._flush_audit()
        assert self._audit is not None
        users = None if user is None else frozenset({user})
        return self._audit.by_verb(users=users, excluded=_INTERNAL_USERS)

    def reset_request_counts(self) -> None:
        """Start counting from zero (for every ``user`` argument)."""
        self._require_running()
        self._flush_audit()
        assert self._audit is not None
        self._audit.reset()

    @property
    def pids(self) -> tuple[int, ...]:
        """The process ids of every component this control plane started (also after stop)."""
        return tuple(self._pids)

    def describe(self) -> dict[str, Any]:
        """The pids and log files of the components (for diagnostics)."""
        return {c.name: {"pid": c.pid, "log": str(c.log_path), "running": c.running()}
                for c in self._components}

