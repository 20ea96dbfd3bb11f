"""The ``optk`` pytest plugin: an embedded Kubernetes API server for a user's tests.

Registered through the ``pytest11`` entry point ``optk``, so installing operator-toolkit makes
these fixtures available without any import:

- ``kube_api`` (session): a running ``EmbeddedApiServer`` shared by the whole test session;
  connect with ``kube_api.api_client()`` or ``kube_api.kubeconfig_path``.
- ``kube_namespace`` (function): the name of a fresh namespace on that server, deleted (with its
  contents) after the test, so tests never see each other's objects.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import kubernetes.client
import pytest

from reconciler.embedded._server import EmbeddedApiServer

__all__ = ["kube_api", "kube_namespace"]


@pytest.fixture(scope="session")
def kube_api() -> Iterator[EmbeddedApiServer]:
    """A running embedded API server for the whole session."""
    with EmbeddedApiServer() as server:
        yield server


@pytest.fixture
def kube_namespace(kube_api: EmbeddedApiServer) -> Iterator[str]:
    """A fresh namespace (``test-<random>``) on ``kube_api``, deleted after the test."""
    name = f"test-{uuid.uuid4().hex[:10]}"
    with kube_api.api_client() as client:
        core = kubernetes.client.CoreV1Api(client)
        core.create_namespace(kubernetes.client.V1Namespace(
            metadata=kubernetes.client.V1ObjectMeta(name=name)
        ))
        yield name
        try:
            core.delete_namespace(name)
        except kubernetes.client.ApiException as exc:
            if exc.status != 404:
                raise
