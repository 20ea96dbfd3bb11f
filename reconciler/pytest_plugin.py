"""The ``optk`` pytest plugin: an embedded Kubernetes API server, and optionally a real control
plane, for a user's tests.

Registered through the ``pytest11`` entry point ``optk``, so installing operator-toolkit makes
these fixtures available without any import:

- ``kube_api`` (session): a running ``EmbeddedApiServer`` shared by the whole test session;
  connect with ``kube_api.api_client()`` or ``kube_api.kubeconfig_path``. In a test marked
  ``@pytest.mark.both_servers`` it is parametrized over the servers ``--kube-api`` selects
  (ids ``embedded`` and ``real``); the ``real`` one is ``reconciler.envtest.ControlPlane``.
- ``kube_namespace`` (function): the name of a fresh namespace on that server, deleted (with its
  contents) after the test, so tests never see each other's objects.
- ``kube_api_name`` (function): ``"embedded"`` or ``"real"``, the server ``kube_api`` is.
- ``real_kube_api`` (session): the real control plane alone (skipped when no assets).
- ``kube_assets`` (session): the directory of the kube binaries in use (skipped when none), for
  tests that start a ``ControlPlane`` of their own.

The option ``--kube-api=embedded|real|both`` picks the servers of ``both_servers`` tests; the
default is ``both`` when kube assets are found (``OPTK_KUBE_ASSETS``, else ``KUBEBUILDER_ASSETS``,
else ``../shared/kube-assets`` beside the rootdir), else ``embedded``; an explicit
``real``/``both`` without assets skips the real runs with one line naming both variables and
docs/envtest.md. One control plane per session, started on first use and stopped at session end
(every process it started, even after a failure).

The marker ``@pytest.mark.needs_controller_manager`` is for tests that need what
kube-controller-manager runs (the garbage collector, the namespace or serviceaccount
controllers): when the assets hold no kube-controller-manager
(setup-envtest's do not), their real runs skip in one line, before any fixture is set up, and
their embedded runs go on. Without the marker such a test would wait its full bound for a
collection that never comes and fail, which says nothing about the code under test.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import kubernetes.client
import pytest

from reconciler._client.servers import KubeApiServer

if TYPE_CHECKING:  # the embedded server needs the `embedded` extra: imported when first used
    from reconciler.embedded import EmbeddedApiServer
    from reconciler.envtest import ControlPlane

    def _both_servers_are_kube_api_servers(
        embedded: EmbeddedApiServer, real: ControlPlane
    ) -> tuple[KubeApiServer, KubeApiServer]:
        """Checked by mypy: the two servers satisfy the one protocol ``kube_api`` returns."""
        return embedded, real

__all__ = ["kube_api", "kube_api_name", "kube_assets", "kube_namespace", "real_kube_api"]

_ASSETS_ENV = "OPTK_KUBE_ASSETS"
_KUBEBUILDER_ENV = "KUBEBUILDER_ASSETS"
_SERVERS = pytest.StashKey[tuple[str, ...]]()
_ASSETS = pytest.StashKey["Path | None"]()
_ASSETS_ORIGIN = pytest.StashKey[str]()
_REAL_STATE = pytest.StashKey[dict[str, Any]]()
_MARKER = "both_servers"
_NEEDS_MANAGER = "needs_controller_manager"
_SKIP_PREFIX = "real control plane: "


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--kube-api=embedded|real|both``: the servers of tests marked ``both_servers``."""
    parser.addoption(
        "--kube-api", choices=("embedded", "real", "both"), default=None,
        help="servers for tests marked both_servers: embedded, real (kube-apiserver, etcd, "
             f"kube-controller-manager from ${_ASSETS_ENV} or ${_KUBEBUILDER_ENV}) or both; "
             "default both when kube assets are found, else embedded",
    )


def _find_assets_dir(config: pytest.Config) -> tuple[Path | None, str]:
    """The assets directory and what named it, by the precedence of ``reconciler.envtest``
    (``OPTK_KUBE_ASSETS``, then ``KUBEBUILDER_ASSETS``), then ``../shared/kube-assets`` beside
    the rootdir. A variable naming no directory gives None and says so (it is not skipped over:
    the binaries used are the ones named first)."""
    for variable in (_ASSETS_ENV, _KUBEBUILDER_ENV):
        value = os.environ.get(variable, "").strip()
        if value:
            if Path(value).is_dir():
                return Path(value), variable
            return None, f"{variable}={value} is not a directory"
    beside = config.rootpath.parent / "shared" / "kube-assets"
    if beside.is_dir():
        return beside, "beside the rootdir"
    return None, "none found"


def _no_assets(config: pytest.Config) -> str:
    """The one skip line of every real run without assets: why, and both ways to give them."""
    return (f"{_SKIP_PREFIX}no kube assets ({config.stash[_ASSETS_ORIGIN]}): set {_ASSETS_ENV} "
            f"or {_KUBEBUILDER_ENV} to their directory (see docs/envtest.md)")


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker and decide the servers once per session."""
    config.addinivalue_line(
        "markers", f"{_MARKER}: run on every server --kube-api selects (embedded, real)")
    config.addinivalue_line(
        "markers", f"{_NEEDS_MANAGER}: needs kube-controller-manager (garbage collector, "
                   "namespace or serviceaccount controllers); the real runs skip without it")
    assets, origin = _find_assets_dir(config)
    config.stash[_ASSETS_ORIGIN] = origin
    choice = config.getoption("--kube-api", default=None)
    if choice is None:
        choice = "both" if assets is not None else "embedded"
    config.stash[_ASSETS] = assets
    config.stash[_SERVERS] = {"embedded": ("embedded",), "real": ("real",),
                              "both": ("embedded", "real")}[choice]
    # without assets a default run still lists the real runs, skipped in one line
    if choice == "embedded" and assets is None and config.getoption("--kube-api") is None:
        config.stash[_SERVERS] = ("embedded", "real")
    config.stash[_REAL_STATE] = {}


def pytest_report_header(config: pytest.Config) -> str:
    """One header line: which servers ``both_servers`` tests use, where the assets are (or why
    there are none) and whether kube-controller-manager is among them."""
    assets = config.stash.get(_ASSETS, None)
    origin = config.stash.get(_ASSETS_ORIGIN, "")
    servers: tuple[str, ...] = config.stash.get(_SERVERS, ("embedded",))
    if assets is None:
        where = (f"{origin}; set {_ASSETS_ENV} or {_KUBEBUILDER_ENV} (docs/envtest.md), "
                 "real runs skip")
    else:
        where = f"{assets} ({origin})"
        if "real" in servers and _manager_absent(config) is not None:
            where += f"; no kube-controller-manager: {_NEEDS_MANAGER} tests skip on real"
    return f"kube-api: {', '.join(servers)}; kube assets: {where}"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``kube_api`` over the selected servers in tests marked ``both_servers``."""
    if metafunc.definition.get_closest_marker(_MARKER) is None:
        return
    if "kube_api" not in metafunc.fixturenames:
        return
    selected: tuple[str, ...] = metafunc.config.stash[_SERVERS]
    servers = list(selected)
    metafunc.parametrize("kube_api", servers, indirect=True, ids=servers, scope="session")


def _manager_absent(config: pytest.Config) -> str | None:
    """The one skip reason of ``needs_controller_manager`` tests when the session's assets hold
    no kube-controller-manager, else None (also when there are no usable assets at all: the
    real fixtures skip those runs with their own line). Decided once per session."""
    state = config.stash[_REAL_STATE]
    if "manager_absent" not in state:
        state["manager_absent"] = None
        assets: Path | None = config.stash[_ASSETS]
        if assets is not None:
            from reconciler.envtest import AssetsNotFoundError, ControlPlane

            plane = state.get("plane") or ControlPlane(assets)
            try:
                has_manager = plane.has_controller_manager
            except AssetsNotFoundError:
                has_manager = True
            if not has_manager:
                state["manager_absent"] = (
                    f"{_SKIP_PREFIX}no kube-controller-manager in {assets} "
                    f"({config.stash[_ASSETS_ORIGIN]}): no garbage collector, namespace or "
                    f"serviceaccount controllers, so tests marked {_NEEDS_MANAGER} run on the "
                    "embedded server only (see docs/envtest.md)")
    reason: str | None = state["manager_absent"]
    return reason


def _runs_on_real(item: pytest.Item) -> bool:
    """Whether ``item`` runs on a real control plane: its ``kube_api`` parameter says so; else
    it uses ``real_kube_api`` or ``kube_assets``; else only an unparametrized ``kube_api`` (the
    embedded server) says it does not. A marked test with none of these reaches a real control
    plane its own way (the conformance suite's ``pair`` asks for it at run time)."""
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "kube_api" in callspec.params:
        return bool(callspec.params["kube_api"] == "real")
    fixtures = set(getattr(item, "fixturenames", ()))
    if fixtures & {"real_kube_api", "kube_assets"}:
        return True
    return "kube_api" not in fixtures


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip the real run of a ``needs_controller_manager`` test, before its fixtures start
    anything, when the assets hold no kube-controller-manager."""
    if item.get_closest_marker(_NEEDS_MANAGER) is None or not _runs_on_real(item):
        return
    reason = _manager_absent(item.config)
    if reason is not None:
        pytest.skip(reason)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Report every real-server skip at one location, so ``-ra`` folds them into one line."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    longrepr = report.longrepr
    if (report.skipped and isinstance(longrepr, tuple) and len(longrepr) == 3
            and _SKIP_PREFIX in str(longrepr[2])):
        report.longrepr = (__file__, 0, longrepr[2])


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop every control-plane process still running, even after failures."""
    plane = session.config.stash.get(_REAL_STATE, {}).pop("plane", None)
    if plane is not None:
        plane.stop()
    envtest = sys.modules.get("reconciler.envtest")
    if envtest is not None:
        envtest.stop_all()


@pytest.fixture(scope="session")
def _optk_embedded_server() -> Iterator[EmbeddedApiServer]:
    try:
        from reconciler.embedded import EmbeddedApiServer
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        pytest.skip(f"the embedded API server needs operator-toolkit[embedded]: {exc}")
    with EmbeddedApiServer() as server:
        yield server


def _real_plane(config: pytest.Config) -> ControlPlane:
    """The session's control plane, started on first use (a start failure is remembered)."""
    state = config.stash[_REAL_STATE]
    if "plane" in state:
        plane: ControlPlane = state["plane"]
        return plane
    if "skip" in state:
        pytest.skip(state["skip"])
    if "error" in state:
        raise state["error"]
    from reconciler.envtest import AssetsNotFoundError, ControlPlane

    plane = ControlPlane(config.stash[_ASSETS])  # the first start of this session
    try:
        plane.start()
    except AssetsNotFoundError as exc:
        state["skip"] = f"{_SKIP_PREFIX}{exc}"
        pytest.skip(state["skip"])
    except Exception as exc:
        state["error"] = exc
        raise
    state["plane"] = plane
    return plane


@pytest.fixture(scope="session")
def kube_assets(request: pytest.FixtureRequest) -> Path:
    """The directory of the kube binaries this session uses (skips when there is none)."""
    assets: Path | None = request.config.stash[_ASSETS]
    if assets is None:
        pytest.skip(_no_assets(request.config))
    return assets


@pytest.fixture(scope="session")
def real_kube_api(request: pytest.FixtureRequest) -> ControlPlane:
    """The real control plane (``reconciler.envtest.ControlPlane``) of this session."""
    if request.config.stash[_ASSETS] is None:
        pytest.skip(_no_assets(request.config))
    return _real_plane(request.config)


@pytest.fixture(scope="session")
def kube_api(request: pytest.FixtureRequest) -> KubeApiServer:
    """A running API server for the whole session: the embedded one, or in ``both_servers``
    tests each server ``--kube-api`` selects; either satisfies ``KubeApiServer``."""
    server: KubeApiServer
    if getattr(request, "param", "embedded") == "real":
        server = request.getfixturevalue("real_kube_api")
    else:
        server = request.getfixturevalue("_optk_embedded_server")
    return server


@pytest.fixture
def kube_api_name(kube_api: KubeApiServer) -> str:
    """``"embedded"`` or ``"real"``: which server ``kube_api`` is in this test."""
    return "embedded" if _is_embedded(kube_api) else "real"


def _wait_for_default_service_account(core: kubernetes.client.CoreV1Api, name: str) -> None:
    # the real ServiceAccount admission refuses Pods until the controller made "default"
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        try:
            core.read_namespaced_service_account("default", name)
            return
        except kubernetes.client.ApiException as exc:
            if exc.status != 404:
                raise
        time.sleep(0.05)


@pytest.fixture
def kube_namespace(kube_api: KubeApiServer) -> Iterator[str]:
    """A fresh namespace (``test-<random>``) on ``kube_api``, deleted after the test."""
    name = f"test-{uuid.uuid4().hex[:10]}"
    with kube_api.api_client() as client:
        core = kubernetes.client.CoreV1Api(client)
        core.create_namespace(kubernetes.client.V1Namespace(
            metadata=kubernetes.client.V1ObjectMeta(name=name)
        ))
        if kube_api.has_controller_manager:
            _wait_for_default_service_account(core, name)
        yield name
        try:
            core.delete_namespace(name)
        except kubernetes.client.ApiException as exc:
            if exc.status != 404:
                raise


def _is_embedded(server: object) -> bool:
    """Whether ``server`` is the embedded API server (without importing it when it is not)."""
    embedded = sys.modules.get("reconciler.embedded._server")
    return embedded is not None and isinstance(server, embedded.EmbeddedApiServer)
