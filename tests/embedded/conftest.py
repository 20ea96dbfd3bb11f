"""Fixtures of the embedded-server tests: official clients and a raw HTTPS client for one server.

The server itself is the session-scoped ``kube_api`` fixture of the package's pytest plugin, and
``kube_namespace`` gives each test a fresh namespace on it.
"""

from __future__ import annotations

from collections.abc import Iterator

import kubernetes.client
import pytest
from kubernetes.dynamic import DynamicClient

from reconciler.embedded import EmbeddedApiServer
from tests.embedded.helpers import RawClient


@pytest.fixture
def raw(kube_api: EmbeddedApiServer) -> RawClient:
    """A raw HTTPS client of the session server."""
    return RawClient(kube_api)


@pytest.fixture
def api_client(kube_api: EmbeddedApiServer) -> Iterator[kubernetes.client.ApiClient]:
    """An official ``ApiClient`` of the session server."""
    with kube_api.api_client() as client:
        yield client


@pytest.fixture
def core(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    """The typed core/v1 API."""
    return kubernetes.client.CoreV1Api(api_client)


@pytest.fixture
def apps(api_client: kubernetes.client.ApiClient) -> kubernetes.client.AppsV1Api:
    """The typed apps/v1 API."""
    return kubernetes.client.AppsV1Api(api_client)


@pytest.fixture
def dynamic(api_client: kubernetes.client.ApiClient) -> DynamicClient:
    """The official ``DynamicClient`` (discovery-driven)."""
    return DynamicClient(api_client)
