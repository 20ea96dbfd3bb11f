"""``ParentReconciler`` doing a CreateOrUpdate's job, reading children from informer caches.

This is how the driver runs it in production (``InformerReader`` over an ``InformerManager``,
writes fed back through ``RecordingClient``) with the bookkeeping switched off
(``events=False, write_status=False``), and what the reconcile benchmark's "ours" measures.
Promises checked against the embedded server: once the informers have synced, the first reconcile
makes one create per child and no read, a no-change reconcile makes no request at all, a changed
child costs one PATCH and no read, and the parent is never written (no Event, no status).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from builders import DesiredState, ResourceBuilder
from builders.names import MANAGED_BY_LABEL
from reconciler import (
    Action,
    KubernetesClient,
    ParentReconciler,
    ParentSettings,
    ResourceReconciler,
)
from reconciler.informers import InformerManager, InformerReader, RecordingClient
from tests.reconciler.conftest import Requests, install_crd

GROUP = "informed.optk.dev"
CHILD_TYPES = (("v1", "ConfigMap"), ("apps/v1", "Deployment"))


@pytest.fixture(scope="module")
def parent_api(client: KubernetesClient) -> str:
    """The ``Crew`` CRD (with a status subresource) the parents are made of."""
    if client.is_served(f"{GROUP}/v1", "Crew"):
        return f"{GROUP}/v1"
    return install_crd(client, group=GROUP, kind="Crew", plural="crews", status=True)


def _children(version: str) -> list[dict[str, Any]]:
    labels = {"app": "crew-web"}
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "crew-config"},
         "data": {"version": version}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "crew-web", "labels": labels},
         "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                      {"name": "web", "image": "registry.example/web:1"}]}}}},
    ]


def _present(obj: dict[str, Any]) -> ResourceBuilder:
    return lambda: (obj, DesiredState.PRESENT)


def _builders(objs: list[dict[str, Any]]) -> list[ResourceBuilder]:
    return [_present(o) for o in objs]


@pytest.mark.both_servers
def test_from_synced_informers_only_child_writes_are_requests(
    client: KubernetesClient, parent_api: str, ns: str, requests: Callable[[], Requests],
) -> None:
    parent = client.create({"apiVersion": parent_api, "kind": "Crew",
                            "metadata": {"name": "crew", "namespace": ns}, "spec": {}})
    operator = f"crew-{uuid.uuid4().hex[:6]}"
    manager = InformerManager(client, handler=lambda *_: None, namespace=ns,
                              label_selector=f"{MANAGED_BY_LABEL}={operator}")
    try:
        writer = RecordingClient(client, informers=manager.informer)
        reader = InformerReader(client, manager)
        version = {"config": "1"}
        reconciler = ParentReconciler(
            writer, lambda p: _builders(_children(version["config"])), operator_name=operator,
            reader=reader, resources=ResourceReconciler(writer, reader=reader),
            settings=ParentSettings(events=False, write_status=False),
        )
        for api_version, kind in CHILD_TYPES:
            assert manager.ensure(api_version, kind).wait_synced(10)

        with requests() as r:
            first = reconciler.reconcile(parent)
        assert first.ok
        assert [c.action for c in first.children] == [Action.CREATED, Action.CREATED]
        assert (r.count("create"), r.writes, r.count("get"), r.count("list")) == (2, 2, 0, 0)

        with requests() as r:
            again = reconciler.reconcile(parent)
        assert [c.action for c in again.children] == [Action.UNCHANGED, Action.UNCHANGED]
        assert (r.writes, r.count("get"), r.count("list")) == (0, 0, 0)
        assert again.api_calls == ()

        version["config"] = "2"
        with requests() as r:
            changed = reconciler.reconcile(parent)
        assert [c.action for c in changed.children] == [Action.UPDATED, Action.UNCHANGED]
        assert (r.count("patch"), r.writes, r.count("get"), r.count("list")) == (1, 1, 0, 0)
        live = client.get("v1", "ConfigMap", "crew-config", namespace=ns)
        assert live["data"] == {"version": "2"}
    finally:
        manager.stop()

    crew = client.get(parent_api, "Crew", "crew", namespace=ns)
    assert "status" not in crew
    assert crew["metadata"]["resourceVersion"] == parent["metadata"]["resourceVersion"]
    assert client.list("v1", "Event", namespace=ns)["items"] == []
