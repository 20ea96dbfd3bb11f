"""Fixtures of the driver tests: a client on the session's server, the Thing CRD, and helpers
to run small operators and wait for what they do.

Tests that talk to a server and must hold on both are marked ``both_servers`` (the embedded
server and the real control plane, ``--kube-api``); the others use server-only hooks (fault
injection, the embedded server's request breakdown), each saying so."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from reconciler import AlreadyExistsError, KubernetesClient, NotFoundError, Reporting
from reconciler._driver.operators import Operator
from reconciler._driver.runtime import OperatorRuntime
from reconciler.testing import wait_synced
from tests.driver.sample_operator import API_VERSION, THING_CRD, build


@pytest.fixture(scope="session")
def client(kube_api: Any) -> KubernetesClient:
    """A ``KubernetesClient`` with the Thing CRD installed (once per server: the embedded
    server serves marked and unmarked tests alike)."""
    kube = KubernetesClient(kube_api.api_client())
    with contextlib.suppress(AlreadyExistsError):
        kube.create(THING_CRD)
    assert wait_until(lambda: kube.is_served(API_VERSION, "Thing"))
    return kube


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0) -> bool:
    """Poll ``predicate`` (real time) until it is truthy; whether it became so."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return bool(predicate())


def import_file(path: Path) -> ModuleType:
    """Import the Python file ``path`` as a module of its own (a unique name), as a deployed
    version of an operator's code is (its fingerprint reads the file)."""
    name = f"{path.stem}_{uuid.uuid4().hex[:6]}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def make_operator(namespace: str, **options: Any) -> Operator:
    """A Thing operator scoped to ``namespace`` with a unique name."""
    options.setdefault("build", build)
    options.setdefault("name", f"t-{uuid.uuid4().hex[:8]}")
    options.setdefault("reporting", Reporting(events=False))  # a test's own says its events
    return Operator(api_version=API_VERSION, kind="Thing", namespace=namespace, **options)


@contextmanager
def running(
    operator: Operator, client: KubernetesClient, **kwargs: Any
) -> Iterator[OperatorRuntime]:
    """Start ``operator`` and stop it after the block."""
    runtime = operator.start(client, **kwargs)
    try:
        assert wait_synced(runtime, 10)
        yield runtime
    finally:
        runtime.stop(5)


def thing(namespace: str, name: str, value: str = "1", **extra: Any) -> dict[str, Any]:
    """A Thing parent."""
    return {"apiVersion": API_VERSION, "kind": "Thing",
            "metadata": {"name": name, "namespace": namespace, **extra},
            "spec": {"value": value}}


def child_data(client: KubernetesClient, namespace: str, name: str) -> dict[str, str] | None:
    """The data of a Thing's ConfigMap, or None when it is missing."""
    try:
        return dict(client.get("v1", "ConfigMap", f"{name}-cfg", namespace=namespace)
                    .get("data") or {})
    except NotFoundError:
        return None


@pytest.fixture
def ns(kube_namespace: str) -> str:
    """A fresh namespace for this test."""
    return kube_namespace
