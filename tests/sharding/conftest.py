"""Fixtures of the sharding tests: a client on the session's embedded server with the Item CRD,
and helpers to read what the replicas did."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import pytest

from reconciler import AlreadyExistsError, KubernetesClient, NotFoundError
from reconciler._sharding.decisions import SHARD_LABEL
from tests.sharding.sample import API_VERSION, ITEM_CRD


@pytest.fixture(scope="session")
def shard_client(kube_api: Any) -> KubernetesClient:
    """A ``KubernetesClient`` with the Item CRD installed."""
    kube = KubernetesClient(kube_api.api_client())
    with contextlib.suppress(AlreadyExistsError):  # installed by an earlier test
        kube.create(ITEM_CRD)
    assert wait_until(lambda: kube.is_served(API_VERSION, "Item"))
    return kube


def wait_until(predicate: Callable[[], Any], timeout: float = 20.0,
               poll: float = 0.02) -> bool:
    """Poll ``predicate`` (real time) until it is truthy; whether it became so."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll)
    return bool(predicate())


def item(namespace: str, name: str, value: str = "1") -> dict[str, Any]:
    """An Item parent."""
    return {"apiVersion": API_VERSION, "kind": "Item",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"value": value}}


def items(client: KubernetesClient, namespace: str) -> list[dict[str, Any]]:
    """Every Item in ``namespace``."""
    return list(client.list(API_VERSION, "Item", namespace=namespace).get("items") or ())


def owners(client: KubernetesClient, namespace: str) -> dict[str, str | None]:
    """Each Item's shard label (None: unassigned)."""
    return {p["metadata"]["name"]: (p["metadata"].get("labels") or {}).get(SHARD_LABEL)
            for p in items(client, namespace)}


def converged(client: KubernetesClient, namespace: str, *, live: set[str],
              value: str = "1") -> bool:
    """Every Item is owned by a live shard, and its ConfigMap holds ``value`` and carries the
    same shard label."""
    configs = {c["metadata"]["name"]: c for c in client.list(
        "v1", "ConfigMap", namespace=namespace).get("items") or ()}
    for name, shard in owners(client, namespace).items():
        if shard not in live:
            return False
        child = configs.get(f"{name}-cfg")
        if child is None or (child.get("data") or {}).get("value") != value:
            return False
        if (child["metadata"].get("labels") or {}).get(SHARD_LABEL) != shard:
            return False
    return True


def child_value(client: KubernetesClient, namespace: str, name: str) -> str | None:
    """The value in an Item's ConfigMap, or None when it is missing."""
    try:
        return str((client.get("v1", "ConfigMap", f"{name}-cfg", namespace=namespace)
                    .get("data") or {}).get("value"))
    except NotFoundError:
        return None
