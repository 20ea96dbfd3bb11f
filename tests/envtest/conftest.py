"""The envtest tests need kube assets; without them they skip in the plugin's one line."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest


@pytest.fixture(autouse=True)
def _needs_assets(request: pytest.FixtureRequest) -> None:
    if request.node.path.name == "test_control_plane.py":
        request.getfixturevalue("real_kube_api")


@pytest.fixture
def kube_namespace_real(real_kube_api: Any) -> Iterator[str]:
    """A fresh namespace on the session's real control plane."""
    name = f"envtest-{uuid.uuid4().hex[:8]}"
    with real_kube_api.api_client() as client:
        core = kubernetes.client.CoreV1Api(client)
        core.create_namespace({"metadata": {"name": name}})
        yield name
        core.delete_namespace(name)
