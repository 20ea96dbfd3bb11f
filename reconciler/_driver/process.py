"""The one process shell of ``optk run`` (both forms) and ``Operator.run``.

``run_command`` is ``optk run MODULE[:ATTR]`` (or ``FILE.py[:ATTR]``), plain or as deployed: it
sets up logging (text, or one JSON object per line with ``JsonLogFormatter``; the level of
``--log-level``/``-v``/``-q``; the official client's loggers kept at INFO or above), loads the
operator with ``load_operator``, lets ``reconciler._driver.deployed.deployed_operator`` adapt it to
``--leader-elect``/``--lease-namespace``/``--watch-namespace`` (the value only: nothing else
differs between the two forms) and runs it with ``run_operator``. ``run_operator`` is
``Operator.run``'s body: it connects (a kubeconfig, the in-cluster config or a fresh embedded API
server) through ``reconciler._client.connect.connect``, whose ``/version`` probe turns an
unreachable server into one ``KubeconfigError`` naming the URL; starts the runtime (with its
metrics port); freezes the long-lived heap (``reconciler._driver.heap``); waits for SIGTERM/SIGINT
(or lost leadership) and shuts down gracefully: in-flight reconciles finish within the operator's
``shutdown_timeout``, then everything stops and the Lease is released. Nothing here decides what
to reconcile; this is the outermost shell of the driver.

``load_target`` is the one loader of an operator for every ``optk`` command that names one
(``run``, ``plan``, ``manifests``, ``uninstall``): a module, or a file imported as pytest's
``prepend`` mode imports it (inside a package by its dotted name, from the package's root), with
the module kept (``LoadedOperator``) so that ``optk manifests`` finds its ``samples`` beside it.
"""

from __future__ import annotations

import datetime
import importlib
import importlib.util
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import attrs

from reconciler._base.errors import ReconcilerUsageError
from reconciler._driver.operators import Operator
from reconciler._driver.settings import Serving

__all__ = ["JsonLogFormatter", "LoadedOperator", "load_api_client", "load_operator",
           "load_operator_file", "load_target", "run_command", "run_operator"]

_log = logging.getLogger("optk.operator")


def run_operator(
    operator: Operator,
    *,
    kubeconfig: str | None = None,
    embedded: bool = False,
    serving: Serving | None = None,
) -> int:
    """Run ``operator`` until SIGTERM/SIGINT (or lost leadership); the process exit code.
    ``serving``: where health and metrics are served (default: ``operator.serving``)."""
    serving = operator.serving if serving is None else serving
    stop = _StopFlag()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, stop.on_signal)
    if embedded:
        from reconciler.embedded import EmbeddedApiServer

        with EmbeddedApiServer() as server:
            _log.info("embedded API server at %s (kubeconfig %s)", server.url,
                      server.kubeconfig_path)
            return _run_with(operator, server.api_client(), stop, serving)
    from reconciler._client.connect import connect

    return _run_with(operator, connect(kubeconfig), stop, serving)


def load_api_client(kubeconfig: str | None = None) -> Any:
    """An official ``ApiClient`` from ``kubeconfig``; when None, the in-cluster service account
    (when running in a pod) or the default kubeconfig (``KUBECONFIG``, ``~/.kube/config``). Wrap
    it in a ``KubernetesClient``. Raises ``KubeconfigError`` (a ``ValueError``) naming the path."""
    from reconciler._client.connect import load_client

    return load_client(kubeconfig)


def _run_with(operator: Operator, api_client: Any, stop: _StopFlag, serving: Serving) -> int:
    from reconciler._client.kubernetes import KubernetesClient
    from reconciler._driver.deployed import local_webhooks
    from reconciler._driver.heap import HeapSettler

    operator = local_webhooks(operator, str(api_client.configuration.host))
    client = KubernetesClient(api_client, operator_name=operator.name)
    runtime = operator.start(client, serving=serving)
    _log.info("operator %s started (identity %s)", operator.name, runtime.identity)
    heap = HeapSettler()  # this process runs one operator: freeze its long-lived heap
    heap.started()
    try:
        while not stop.requested and not runtime.finished:
            time.sleep(0.2)  # a signal interrupts the sleep and runs its handler
            heap.poll(runtime)
    finally:
        clean = runtime.stop(timeout=operator.shutdown_timeout)
    lost = not stop.requested
    _log.info("operator %s stopped%s", operator.name, " (leadership lost)" if lost else "")
    return 1 if lost or not clean else 0


class _StopFlag:
    """Set by SIGTERM/SIGINT. A plain attribute: a handler must take no lock the interrupted
    main thread may hold (``Event.set`` could deadlock against ``Event.wait``)."""

    def __init__(self) -> None:
        self.requested = False

    def on_signal(self, signum: int, frame: Any) -> None:
        """The signal handler."""
        self.requested = True


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the ``parent`` key if any.

    ``ts`` is RFC 3339 in UTC with milliseconds (``2026-11-26T15:04:05.123Z``): ordered across
    replicas and nodes in whatever time zone they run, as log pipelines parse it."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line."""
        line: dict[str, Any] = {
            "ts": _rfc3339(record.created),
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


@attrs.frozen(kw_only=True)
class LoadedOperator:
    """An operator as ``MODULE[:ATTR]`` or ``FILE.py[:ATTR]`` named it: the ``Operator``, the
    module that defines it and the target spelled as ``optk run`` elsewhere would load it."""

    operator: Operator
    module: ModuleType
    target: str
    """``MODULE:ATTR`` (the dotted name also for a file inside a package), or ``PATH.py:ATTR``
    for a lone file (its path as given)."""

    def beside(self, path: str | os.PathLike[str]) -> str:
        """``path`` resolved against the module's directory when relative (as the module's own
        ``Path(__file__).with_name(...)`` would); unchanged when absolute or the module has no
        file."""
        where = getattr(self.module, "__file__", None)
        if os.path.isabs(path) or not where:
            return os.fspath(path)
        return os.path.join(os.path.dirname(os.path.abspath(where)), path)


def _rfc3339(created: float) -> str:
    """``created`` (seconds since the epoch) as ``YYYY-MM-DDTHH:MM:SS.mmmZ``."""
    moment = datetime.datetime.fromtimestamp(created, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def load_operator(target: str) -> Operator:
    """The ``Operator`` named by ``MODULE[:ATTR]`` or ``FILE.py[:ATTR]`` (``load_target``).

    Raises ``ValueError`` naming the target when it cannot be imported or is no ``Operator``.
    """
    return load_target(target).operator


def load_operator_file(target: str) -> Operator | None:
    """The ``Operator`` in a Python file named by ``PATH.py[:ATTR]`` (as ``kopf run PATH.py``),
    or ``None`` when ``target`` names no file (then it is ``MODULE[:ATTR]``)."""
    return load_target(target).operator if _split_file(target) is not None else None


def load_target(target: str) -> LoadedOperator:
    """The one loader of ``optk run``, ``plan``, ``manifests`` and ``uninstall``: the operator
    named by ``MODULE[:ATTR]`` or ``FILE.py[:ATTR]``, with its module.

    A module is imported with the current directory on ``sys.path`` (as ``python -m`` finds the
    user's modules). A file is imported as pytest's ``prepend`` import mode does: inside a
    package (its directory holds ``__init__.py``), the directories are walked up while they hold
    ``__init__.py``, the first one without is put first on ``sys.path`` and the file is imported
    by its dotted name (``examples/thanos/operator.py`` is ``examples.thanos.operator``), so its
    relative and absolute package imports work from any directory; a lone file is imported as a
    module named after it, its directory first on ``sys.path`` so it imports its neighbours.

    ``ATTR`` defaults to ``operator``, else to the one ``Operator`` the module defines. Raises
    ``ValueError`` with one line naming the target when the file is missing, the import fails
    (whatever the module raised) or the attribute is missing, ambiguous or no ``Operator``.
    """
    split = _split_file(target)
    if split is None:
        module_name, _, attr = target.partition(":")
        label = module_name
        cwd = os.getcwd()
        if cwd not in sys.path and "" not in sys.path:
            sys.path.insert(0, cwd)
        module = _import(module_name, f"cannot import operator module {module_name!r}")
    else:
        path, attr = split
        label = path
        dotted, module = _import_file(path)
        module_name = path if dotted is None else dotted  # a lone file: named by its path
    name = _operator_attribute(module, attr, label=label)
    return LoadedOperator(operator=getattr(module, name), module=module,
                          target=f"{module_name}:{name}")


def _is_file_target(path: str) -> bool:
    return path.endswith(".py") or os.sep in path or path.startswith(".")


def _split_file(target: str) -> tuple[str, str] | None:
    """``(path, attr)`` when ``target`` names a file, else ``None``."""
    path, colon, attr = target.rpartition(":")
    if not colon or not _is_file_target(path):
        path, attr = target, ""
    return (path, attr) if _is_file_target(path) else None


def _import(module_name: str, failure: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except Exception as error:  # the user's module may raise anything: one line, no traceback
        raise ReconcilerUsageError(f"{failure}: {type(error).__name__}: {error}") from error


def _package_root(full: str) -> tuple[str, str]:
    """``(root, dotted name)`` of the file ``full`` inside a package, as pytest's ``prepend``
    mode finds them; a lone file's root is its directory and its name its stem."""
    folder, base = os.path.split(full)
    parts = [] if base == "__init__.py" else [os.path.splitext(base)[0]]
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        folder, package = os.path.split(folder)
        parts.insert(0, package)
    return folder, ".".join(parts)


def _import_file(path: str) -> tuple[str | None, ModuleType]:
    """The dotted module name (``None`` for a lone file) and the module of the file ``path``."""
    if not os.path.isfile(path):
        raise ReconcilerUsageError(f"operator file {path!r} does not exist")
    full = os.path.abspath(path)
    root, name = _package_root(full)
    if root not in sys.path:
        sys.path.insert(0, root)
    failure = f"cannot load operator file {path!r}"
    if os.path.dirname(full) == root:  # a lone file: as it always was
        spec = importlib.util.spec_from_file_location(name, full)
        if spec is None or spec.loader is None:
            raise ReconcilerUsageError(f"operator file {path!r} is not a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as error:
            sys.modules.pop(name, None)
            raise ReconcilerUsageError(
                f"{failure}: {type(error).__name__}: {error}") from error
        return None, module
    module = _import(name, failure)
    found = getattr(module, "__file__", None)
    if found is None or os.path.realpath(found) != os.path.realpath(full):
        raise ReconcilerUsageError(  # pytest's ImportPathMismatchError
            f"{failure}: its module name {name!r} is already imported from {found}")
    return name, module


def _operator_attribute(module: ModuleType, attr: str, *, label: str) -> str:
    """The name of the ``Operator`` in ``module``: ``attr``, else ``operator``, else its one."""
    found = sorted(key for key, item in vars(module).items() if isinstance(item, Operator))
    have = (f"the module's Operator objects: {', '.join(found)}" if found
            else "the module has no Operator object")
    name = attr or "operator"
    if not attr and not isinstance(getattr(module, name, None), Operator) and len(found) == 1:
        return found[0]
    if not attr and len(found) > 1 and not hasattr(module, name):
        raise ReconcilerUsageError(
            f"{label} has no attribute 'operator' and defines {len(found)} Operator objects "
            f"({', '.join(found)}): name one as {label}:ATTR")
    if not hasattr(module, name):
        raise ReconcilerUsageError(
            f"{label}:{name}: module {module.__name__!r} has no attribute {name!r} ({have})")
    value = getattr(module, name)
    if not isinstance(value, Operator):
        raise ReconcilerUsageError(
            f"{label}:{name} is not an Operator (got {type(value).__name__}; {have})")
    return name


def run_command(
    target: str,
    *,
    kubeconfig: str | None = None,
    embedded: bool = False,
    metrics_port: int | None = None,
    metrics_bind_address: str | None = None,
    metrics_auth: bool = False,
    log_format: str = "text",
    log_level: str = "INFO",
    leader_elect: bool = False,
    lease_namespace: str | None = None,
    watch_namespace: str | None = None,
    paused: bool = False,
    pause_namespaces: Sequence[str] = (),
) -> int:
    """``optk run MODULE[:ATTR]``, both forms: set up logging, load the operator, adapt it to
    the deployed flags (``deployed_operator``), run it until SIGTERM; the process exit code.

    Raises ``ValueError`` (a ``KubeconfigError`` for a cluster that cannot be reached) with one
    line for the command line to print."""
    from reconciler._driver.deployed import deployed_operator

    _configure_logging(log_format=log_format, log_level=log_level)
    operator = deployed_operator(load_operator(target), leader_elect=leader_elect,
                                 lease_namespace=lease_namespace,
                                 watch_namespace=watch_namespace, paused=paused,
                                 pause_namespaces=pause_namespaces)
    _log.info("running operator %s for %s.%s", operator.name, operator.kind, operator.api_version)
    if (pauses := operator.pauses()).everything or pauses.namespaces:
        _log.warning("paused for maintenance: %s; nothing is written there until restarted "
                     "without it", "every parent" if pauses.everything
                     else "namespaces " + ", ".join(sorted(pauses.namespaces)))
    serving = operator.serving  # a flag not given leaves the operator's setting
    if metrics_port is not None:
        serving = attrs.evolve(serving, metrics_port=metrics_port)
    if metrics_bind_address is not None:
        serving = attrs.evolve(serving, bind_address=metrics_bind_address)
    if metrics_auth:
        serving = attrs.evolve(serving, auth=True)
    return operator.run(kubeconfig=kubeconfig, embedded=embedded, serving=serving)


def _configure_logging(*, log_format: str, log_level: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLogFormatter() if log_format == "json" else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s"
    ))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(log_level.upper())
    for noisy in ("kubernetes", "urllib3"):  # their DEBUG shows request bodies (Secret data)
        logging.getLogger(noisy).setLevel(max(logging.INFO, root.level))
