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
default is ``both`` when kube assets are found (``OPTK_KUBE_ASSETS``, else ``../shared/kube-assets``
beside the rootdir), else ``embedded``; an explicit ``real``/``both`` without assets skips the
real runs with one line naming ``OPTK_KUBE_ASSETS``. One control plane per session, started on
first use and stopped at session end (every process it started, even after a failure).
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

if TYPE_CHECKING:  # the embedded server needs the `embedded` extra: imported when first used
    from reconciler.embedded import EmbeddedApiServer

__all__ = ["kube_api", "kube_api_name", "kube_assets", "kube_namespace", "real_kube_api"]

_ASSETS_ENV = "OPTK_KUBE_ASSETS"
_SERVERS = pytest.StashKey[tuple[str, ...]]()
_ASSETS = pytest.StashKey["Path | None"]()
_REAL_STATE = pytest.StashKey[dict[str, Any]]()
_MARKER = "both_servers"


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--kube-api=embedded|real|both``: the servers of tests marked ``both_servers``."""
    parser.addoption(
        "--kube-api", choices=("embedded", "real", "both"), default=None,
        help="servers for tests marked both_servers: embedded, real (kube-apiserver, etcd, "
             f"kube-controller-manager from ${_ASSETS_ENV}) or both; default both when kube "
             "assets are found, else embedded",
    )


def _find_assets_dir(config: pytest.Config) -> Path | None:
    value = os.environ.get(_ASSETS_ENV, "").strip()
    if value:
        return Path(value) if Path(value).is_dir() else None
    beside = config.rootpath.parent / "shared" / "kube-assets"
    return beside if beside.is_dir() else None


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker and decide the servers once per session."""
    config.addinivalue_line(
        "markers", f"{_MARKER}: run on every server --kube-api selects (embedded, real)")
    assets = _find_assets_dir(config)
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
    """One header line: which servers ``both_servers`` tests use and where the assets are."""
    assets = config.stash.get(_ASSETS, None)
    where = str(assets) if assets is not None else f"none (set {_ASSETS_ENV})"
    servers: tuple[str, ...] = config.stash.get(_SERVERS, ("embedded",))
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


_SKIP_PREFIX = "real control plane: "


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


def _real_plane(config: pytest.Config) -> Any:
    """The session's control plane, started on first use (a start failure is remembered)."""
    state = config.stash[_REAL_STATE]
    if "plane" in state:
        return state["plane"]
    if "skip" in state:
        pytest.skip(state["skip"])
    if "error" in state:
        raise state["error"]
    from reconciler.envtest import AssetsNotFoundError, ControlPlane

    plane = ControlPlane(config.stash[_ASSETS])
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
    """The directory of kube-apiserver and kube-controller-manager this session uses (skips
    when there is none)."""
    assets: Path | None = request.config.stash[_ASSETS]
    if assets is None:
        pytest.skip(f"{_SKIP_PREFIX}no kube assets; set {_ASSETS_ENV} to their directory")
    return assets


@pytest.fixture(scope="session")
def real_kube_api(request: pytest.FixtureRequest) -> Any:
    """The real control plane (``reconciler.envtest.ControlPlane``) of this session."""
    if request.config.stash[_ASSETS] is None:
        pytest.skip(f"{_SKIP_PREFIX}no kube assets; set {_ASSETS_ENV} to their directory")
    return _real_plane(request.config)


@pytest.fixture(scope="session")
def kube_api(request: pytest.FixtureRequest) -> Any:
    """A running API server for the whole session: the embedded one, or in ``both_servers``
    tests each server ``--kube-api`` selects."""
    if getattr(request, "param", "embedded") == "real":
        return request.getfixturevalue("real_kube_api")
    return request.getfixturevalue("_optk_embedded_server")


@pytest.fixture
def kube_api_name(kube_api: Any) -> str:
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
def kube_namespace(kube_api: Any) -> Iterator[str]:
    """A fresh namespace (``test-<random>``) on ``kube_api``, deleted after the test."""
    name = f"test-{uuid.uuid4().hex[:10]}"
    with kube_api.api_client() as client:
        core = kubernetes.client.CoreV1Api(client)
        core.create_namespace(kubernetes.client.V1Namespace(
            metadata=kubernetes.client.V1ObjectMeta(name=name)
        ))
        if not _is_embedded(kube_api):
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
