"""A change that cannot be applied (issue 11): a StatefulSet's volume claim template size with
recreation not allowed. It is reported once on the parent (``ImmutableFieldChanged`` on the
conditions, naming the field and the server's reason; one Warning Event, counted on each retry),
and it clears as soon as the spec is reverted or recreation is allowed. On both servers."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from builders import DesiredState, ResourceBuilder
from reconciler import KubernetesClient, ParentReconciler, ResourceReconciler, ResourceSettings
from tests.reconciler.conftest import install_crd

GROUP = "immutable.optk.dev"
API = f"{GROUP}/v1"
MERGE = "application/merge-patch+json"


def _statefulset(size: str) -> dict[str, Any]:
    labels = {"app": "db"}
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {
            "serviceName": "db", "replicas": 0, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                {"name": "db", "image": "registry.example/db:1"}]}},
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": size}}},
            }],
        },
    }


def _build(parent: Any) -> list[ResourceBuilder]:
    sts = _statefulset(parent["spec"]["size"])
    return [lambda: (sts, DesiredState.PRESENT)]


def _conditions(client: KubernetesClient, ns: str) -> dict[str, dict[str, Any]]:
    parent = client.get(API, "Database", "main", namespace=ns)
    return {c["type"]: c for c in parent["status"]["conditions"]}


def _warnings(client: KubernetesClient, ns: str) -> list[dict[str, Any]]:
    return [e for e in client.list("v1", "Event", namespace=ns)["items"]
            if e["type"] == "Warning"]


@pytest.mark.needs_controller_manager
@pytest.mark.both_servers
def test_an_immutable_change_is_reported_once_and_clears_on_revert_or_recreate(
    kube_api: Any, kube_namespace: str
) -> None:
    client = KubernetesClient(kube_api.api_client())
    if not client.is_served(API, "Database"):
        install_crd(client, group=GROUP, kind="Database", plural="databases", status=True)
    ns = kube_namespace
    parent = client.create({"apiVersion": API, "kind": "Database",
                            "metadata": {"name": "main", "namespace": ns},
                            "spec": {"size": "1Gi"}})
    name = f"immutable-{uuid.uuid4().hex[:6]}"
    reconciler = ParentReconciler(client, _build, operator_name=name)
    assert reconciler.reconcile(parent).ok

    parent = client.patch(API, "Database", "main", {"spec": {"size": "2Gi"}},
                          patch_type=MERGE, namespace=ns)
    for attempt in range(1, 4):  # the driver's backoff retries; each is reported on one Event
        result = reconciler.reconcile(parent)
        assert not result.ok
        parent = client.get(API, "Database", "main", namespace=ns)
        conditions = _conditions(client, ns)
        assert conditions["Reconciled"]["status"] == "False"
        assert conditions["Reconciled"]["reason"] == "ImmutableFieldChanged"
        message = conditions["Reconciled"]["message"]
        assert "StatefulSet.apps/v1" in message
        assert "the change of spec cannot be applied to the existing StatefulSet" in message
        assert "forbidden" in message
        # worded for the parent's owner: what they can do, not the operator's own switch
        assert "delete StatefulSet db" in message
        assert "revert the change" in message
        assert "recreate" not in message.replace("created again", "")
        (warning,) = _warnings(client, ns)
        assert warning["reason"] == "ImmutableFieldChanged"
        assert warning["count"] == attempt
    assert result.status_written is False  # written once, on the first refusal

    # reverting the spec clears it
    parent = client.patch(API, "Database", "main", {"spec": {"size": "1Gi"}},
                          patch_type=MERGE, namespace=ns)
    assert reconciler.reconcile(parent).ok
    assert _conditions(client, ns)["Reconciled"]["status"] == "True"

    # so does allowing recreation
    parent = client.patch(API, "Database", "main", {"spec": {"size": "3Gi"}},
                          patch_type=MERGE, namespace=ns)
    assert not reconciler.reconcile(parent).ok
    parent = client.get(API, "Database", "main", namespace=ns)
    recreating = ParentReconciler(
        client, _build, operator_name=name,
        resources=ResourceReconciler(
            client, settings=ResourceSettings(recreate=True, recreate_timeout=30),
        ),
    )
    assert recreating.reconcile(parent).ok
    assert _conditions(client, ns)["Reconciled"]["status"] == "True"
    sts = client.get("apps/v1", "StatefulSet", "db", namespace=ns)
    template = sts["spec"]["volumeClaimTemplates"][0]
    assert template["spec"]["resources"]["requests"]["storage"] == "3Gi"
