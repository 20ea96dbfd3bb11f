"""Fixtures of the reconciler tests: a ``KubernetesClient`` on the session's embedded API server.

The server (``kube_api``) and the per-test namespace (``kube_namespace``) come from the embedded
server's fixtures; this module adds the client under test and request accounting helpers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from reconciler import KubernetesClient

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


@pytest.fixture(scope="session")
def client(kube_api: Any) -> KubernetesClient:
    """The client under test, over the official ``ApiClient`` of the session server."""
    return KubernetesClient(kube_api.api_client())


@pytest.fixture
def ns(kube_namespace: str) -> str:
    """A fresh namespace for this test."""
    return kube_namespace


class Requests:
    """Counts the server's requests by verb between two points of a test."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.before: dict[str, int] = {}

    def __enter__(self) -> Requests:
        self.before = dict(self.server.request_counts())
        self.delta: dict[str, int] = {}
        return self

    def __exit__(self, *exc: object) -> None:
        after = self.server.request_counts()
        verbs = set(after) | set(self.before)
        self.delta = {v: after.get(v, 0) - self.before.get(v, 0) for v in verbs}

    @property
    def writes(self) -> int:
        """Write requests made inside the block."""
        return sum(self.delta.get(v, 0) for v in WRITE_VERBS)

    def count(self, verb: str) -> int:
        """Requests of one verb made inside the block."""
        return self.delta.get(verb, 0)


@pytest.fixture
def requests(kube_api: Any) -> Callable[[], Requests]:
    """``with requests() as r: ...; r.writes`` counts the server's requests in the block."""
    return lambda: Requests(kube_api)


@pytest.fixture
def configmap(ns: str) -> Callable[..., dict[str, Any]]:
    """Build a ConfigMap in the test namespace: ``configmap("name", key="value")``."""

    def make(name: str, **data: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns},
            "data": dict(data),
        }

    return make


def wait_for(predicate: Callable[[], bool], *, timeout: float = 10.0) -> None:
    """Poll ``predicate`` until it holds (the server's garbage collector works asynchronously)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)



def install_crd(
    client: KubernetesClient, *, group: str, kind: str, plural: str, status: bool = False
) -> str:
    """Create a namespaced, free-form ``v1`` CRD and wait until it is served; its apiVersion."""
    version: dict[str, Any] = {
        "name": "v1", "served": True, "storage": True,
        "schema": {"openAPIV3Schema": {"type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}},
    }
    if status:
        version["subresources"] = {"status": {}}
    client.create({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"kind": kind, "plural": plural}, "versions": [version]},
    })
    api_version = f"{group}/v1"
    wait_for(lambda: client.is_served(api_version, kind))
    return api_version
