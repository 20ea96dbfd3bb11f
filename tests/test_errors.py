"""The error trees: one root per package, errors defined in ``_errors.py``, and the reconciler's
errors built from Status bodies as a real API server sends them."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

import builders
import builders.objects
import builders.schemas
import objectmatcher
import reconciler
import reconciler.embedded
from reconciler import (
    AlreadyExistsError,
    ApiError,
    ClientUsageError,
    ConflictError,
    InvalidError,
    NotFoundError,
    ObjectRef,
    Operator,
    ReconcilerError,
    ReconcilerUsageError,
    ReconcilerUsageTypeError,
    ServerError,
    TooManyRequestsError,
)
from reconciler._base.errors import api_error_from_status
from reconciler._cache.selectors import LabelSelector
from reconciler._commands.loading import load_operator_file
from reconciler._commands.manifests import load_samples
from reconciler._driver.resyncs import parse_duration
from reconciler._leadership.fencing import WriteFence
from reconciler._sharding.decisions import Sharding
from reconciler.embedded import EmbeddedServerError
from reconciler.testing import VirtualClock
from tests.conftest import FIXTURES


def _modules(package: ModuleType) -> list[ModuleType]:
    found = [package]
    for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
        if info.name.endswith(("pytest_plugin", "__main__")):
            continue  # a pytest plugin (imported by pytest itself) or a command line entry
        found.append(importlib.import_module(info.name))
    return found


def _exceptions_defined_in(package: ModuleType) -> dict[type[BaseException], str]:
    """Every public exception class defined (not imported) in the package's modules."""
    found: dict[type[BaseException], str] = {}
    for module in _modules(package):
        for _, value in vars(module).items():
            if (inspect.isclass(value) and issubclass(value, BaseException)
                    and value.__module__ == module.__name__
                    and not value.__name__.startswith("_")):
                found[value] = module.__name__
    return found


@pytest.mark.parametrize(
    ("package", "root", "home"),
    [
        (objectmatcher, objectmatcher.ObjectMatcherError, "objectmatcher._errors"),
        (builders, builders.BuilderError, "builders._errors"),
    ],
)
def test_pure_packages_define_their_errors_in_one_tree_in_errors_module(
    package: ModuleType, root: type[Exception], home: str
) -> None:
    found = _exceptions_defined_in(package)
    assert root in found
    elsewhere = {cls.__name__: module for cls, module in found.items() if module != home}
    assert not elsewhere, f"errors outside {home}: {elsewhere}"
    strays = [cls.__name__ for cls in found if not issubclass(cls, root)]
    assert not strays, f"errors without the {root.__name__} root: {strays}"
    # Misuse errors are also the matching builtin; the tree is drawn in the module docstring.
    doc = importlib.import_module(home).__doc__ or ""
    assert all(cls.__name__ in doc for cls in found)


def test_reconciler_defines_its_errors_in_one_tree_drawn_in_errors_module() -> None:
    """The reconciler's own errors (its subpackages ``embedded`` and ``envtest`` have their own
    roots) are defined in ``reconciler._base.errors``, under ``ReconcilerError``, each named in the
    tree its docstring draws; misuse is also the matching builtin."""
    own = {
        cls: module for cls, module in _exceptions_defined_in(reconciler).items()
        if not module.startswith(("reconciler.embedded", "reconciler.envtest"))
    }
    assert ReconcilerError in own
    elsewhere = {
        cls.__name__: module for cls, module in own.items() if module != "reconciler._base.errors"
    }
    assert not elsewhere, f"errors outside reconciler._base.errors: {elsewhere}"
    strays = [cls.__name__ for cls in own if not issubclass(cls, ReconcilerError)]
    assert not strays, f"errors without the ReconcilerError root: {strays}"
    doc = importlib.import_module("reconciler._base.errors").__doc__ or ""
    assert [cls.__name__ for cls in own if cls.__name__ not in doc] == []
    public = {
        name for name in reconciler.__all__
        if inspect.isclass(value := getattr(reconciler, name)) and issubclass(value, Exception)
    }
    assert public <= {cls.__name__ for cls in own}
    assert issubclass(ReconcilerUsageError, ValueError)
    assert issubclass(ReconcilerUsageTypeError, TypeError)
    assert issubclass(ClientUsageError, ReconcilerUsageError)


def test_misuse_raises_the_usage_error_and_the_builtin() -> None:
    with pytest.raises(ReconcilerUsageError, match="malformed label selector"):
        LabelSelector.parse("app in")
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("ten hours")
    with pytest.raises(ReconcilerUsageTypeError, match="build must be callable"):
        Operator(api_version="x.dev/v1", kind="Demo", build=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: WriteFence(clock=VirtualClock(), validity=0), ReconcilerUsageError,
         "write fence needs a positive validity, got 0"),
        (lambda: Sharding(drain_timeout=0), ReconcilerUsageError,
         "sharding: drain_timeout must be > 0, got 0"),
        (lambda: Sharding(replicas_hint=0), ReconcilerUsageError,
         "sharding: replicas_hint must be >= 1, got 0"),
        (lambda: Sharding(shard_id="not a label"), ReconcilerUsageError,
         "sharding: shard_id must be a label value, got 'not a label'"),
        (lambda: Sharding(lease_duration=1), ReconcilerUsageError,
         "sharding needs lease_duration > renew_deadline"),
        (lambda: Sharding().resolve_id({}, "---"), ReconcilerUsageError,
         "sharding: cannot make a shard id"),
        (lambda: load_samples(42, api_version="x.dev/v1", kind="Demo"), ReconcilerUsageTypeError,
         "samples must be a YAML path or a list of objects, got int"),
        (lambda: Operator(name="demo", api_version="x.dev/v1", kind="Demo", build=lambda p: [],
                          sharding=object()),  # type: ignore[arg-type]
         ReconcilerUsageTypeError, "operator 'demo': sharding must be a Sharding or None, got"),
        (lambda: load_operator_file("/nonexistent/operator.py"), ReconcilerUsageError,
         "operator file '/nonexistent/operator.py' does not exist"),
    ],
)
def test_each_usage_error_is_the_toolkits_and_names_what_was_wrong(
    call: Callable[[], object], error: type[ReconcilerUsageError], message: str,
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        call()


ROOT = Path(__file__).resolve().parents[1]
_PENDING_BUILTIN_RAISES: dict[str, int] = {}


def test_the_driver_raises_no_bare_value_or_type_error() -> None:
    """Misuse raises the toolkit's usage errors (also the builtins); a bare ``ValueError`` or
    ``TypeError`` raised in a driver module would escape ``except ReconcilerError``."""
    found: dict[str, int] = {}
    for path in sorted((ROOT / "reconciler").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
                    and isinstance(node.exc.func, ast.Name)
                    and node.exc.func.id in ("ValueError", "TypeError")):
                key = str(path.relative_to(ROOT))
                found[key] = found.get(key, 0) + 1
    assert all(found[key] <= _PENDING_BUILTIN_RAISES.get(key, 0) for key in found), found


def test_embedded_server_errors_share_one_root() -> None:
    found = _exceptions_defined_in(reconciler.embedded)
    assert len(found) >= 5
    strays = [cls.__name__ for cls in found if not issubclass(cls, EmbeddedServerError)]
    assert not strays, f"embedded server errors without the EmbeddedServerError root: {strays}"
    doc = importlib.import_module("reconciler.embedded._errors").__doc__ or ""
    assert all(cls.__name__ in doc for cls in found)


def test_one_version_policy_for_every_layer() -> None:
    """An unknown Kubernetes version is an error naming it and the available ones, whichever
    layer is asked (no silent fallback to a neighbouring version)."""
    available = objectmatcher.available_versions()
    with pytest.raises(objectmatcher.UnsupportedVersionError) as matcher:
        objectmatcher.schema_directory("1.99")
    with pytest.raises(builders.InvalidSpecError) as builder:
        builders.schemas.validate_object(
            builders.objects.config_map(metadata={"name": "a"}), kubernetes_version="1.99"
        )
    for message in (str(matcher.value), str(builder.value)):
        assert "'1.99'" in message
        assert all(version in message for version in available)
    assert builder.value.field == "kubernetes_version"
    # One loader: the embedded server's and builders' schemas are objectmatcher's objects.
    assert objectmatcher.schema_definitions() is objectmatcher.schema_definitions("v1.25.0")


def _statuses() -> list[dict[str, object]]:
    """Every Status body recorded in the fixtures, wherever it sits."""
    found: list[dict[str, object]] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("kind") == "Status" and isinstance(node.get("code"), int):
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for name in ("errors.json", "conflict.json", "immutable-fields.json"):
        walk(json.loads((FIXTURES / name).read_text()))
    return found


def test_recorded_statuses_map_to_their_classes() -> None:
    statuses = [s for s in _statuses() if s.get("status") == "Failure"]
    assert statuses, "fixtures hold failure Status bodies"
    seen: set[type[ApiError]] = set()
    for status in statuses:
        code = int(status["code"])  # type: ignore[call-overload]
        error = api_error_from_status(code, status)
        seen.add(type(error))
        assert error.code == code
        assert error.reason == status.get("reason", "")
        if status.get("reason") == "AlreadyExists":
            assert isinstance(error, AlreadyExistsError)
        if code == 404:
            assert isinstance(error, NotFoundError)
        if code == 409:
            assert isinstance(error, ConflictError)
    assert {NotFoundError, AlreadyExistsError, ConflictError, InvalidError} <= seen


def test_invalid_error_names_immutable_fields_from_causes() -> None:
    invalid = [
        s for s in _statuses() if s.get("reason") == "Invalid" and "immutable" in str(s)
    ]
    assert invalid
    error = api_error_from_status(422, invalid[0])
    assert isinstance(error, InvalidError)
    assert error.immutable_fields
    assert all(field for field in error.immutable_fields)


def test_server_and_throttle_errors_keep_retry_after() -> None:
    error = api_error_from_status(429, None, retry_after=3.0, text="slow down")
    assert isinstance(error, TooManyRequestsError)
    assert error.retry_after == 3.0
    assert "slow down" in str(error)
    assert isinstance(api_error_from_status(503, {}), ServerError)


def test_error_message_names_the_object() -> None:
    ref = ObjectRef.of({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "a", "namespace": "ns"}})
    error = api_error_from_status(404, {"reason": "NotFound", "message": "gone"}, ref=ref)
    assert "ConfigMap.v1 ns/a" in str(error)
    with pytest.raises(NotFoundError):
        raise error
