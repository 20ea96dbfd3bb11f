"""Loading an operator for the ``optk`` commands that name one, and their one bootstrap.

``load_target`` is the one loader of an operator for every ``optk`` command that names one
(``run``, ``plan``, ``plan --all``, ``trace``, ``rollout``, ``manifests``, ``uninstall``): a
module, or a file imported as pytest's ``prepend`` mode imports it (inside a package by its dotted
name, from the package's root), with the module kept (``LoadedOperator``) so that ``optk
manifests`` finds its ``samples`` beside it. :func:`connected` is the commands' one bootstrap:
the operator and a client of the cluster the kubeconfig names (its field manager the operator's
name). Boundary: loading and connecting; what each command does is its own module's.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import attrs

from reconciler._base.errors import ReconcilerUsageError
from reconciler._driver.operators import Operator

__all__ = ["LoadedOperator", "connected", "load_operator", "load_operator_file", "load_target"]


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


def connected(target: str, kubeconfig: str | None, *,
              check: Callable[[Operator], None] | None = None) -> tuple[Operator, Any]:
    """The bootstrap of the commands that name an operator and read a cluster: the operator
    ``target`` names and a ``KubernetesClient`` of the cluster ``kubeconfig`` names (None: the
    in-cluster config or the default kubeconfig), writing as the operator's field manager.
    ``check(operator)`` runs before connecting (a command's own argument checks: a wrong
    argument is said without reaching for a cluster). Raises ``ValueError`` (a
    ``KubeconfigError`` for a cluster that cannot be reached) with one line for the command
    line to print."""
    from reconciler._client.connect import connect
    from reconciler._client.kubernetes import KubernetesClient

    operator = load_operator(target)
    if check is not None:
        check(operator)
    return operator, KubernetesClient(connect(kubeconfig), operator_name=operator.name)
