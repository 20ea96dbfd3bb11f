"""``Operator(reporting=Reporting(readiness=..., status=...))`` on the embedded server: Ready
follows the children's health (re-checked while not ready), Reconciled the spec; the status
builder's fields are written."""

from __future__ import annotations

from typing import Any

from builders import ResourceBuilder, child_name, resource_builder
from reconciler import KubernetesClient, Readiness, Reporting
from tests.driver.conftest import make_operator, running, thing, wait_until
from tests.driver.sample_operator import API_VERSION


@resource_builder
def _web(parent: Any) -> dict[str, Any]:
    name = child_name(parent["metadata"]["name"], "web")
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}


def _build(parent: Any) -> list[ResourceBuilder]:
    return [_web(parent)]


def _conditions(client: KubernetesClient, ns: str) -> dict[str, Any]:
    parent = client.get(API_VERSION, "Thing", "r", namespace=ns)
    return {c["type"]: c for c in (parent.get("status") or {}).get("conditions") or ()}


def test_ready_follows_the_deployments_available_replicas(
    client: KubernetesClient, ns: str
) -> None:
    operator = make_operator(
        ns, build=_build,
        reporting=Reporting(events=False, readiness=Readiness(recheck=0.2),
                            status=lambda parent, children: {"children": len(children)}),
    )
    with running(operator, client):
        client.create(thing(ns, "r"))
        assert wait_until(lambda: _conditions(client, ns).get("Ready", {}).get("reason")
                          == "ChildrenNotReady")
        conditions = _conditions(client, ns)
        assert conditions["Reconciled"]["status"] == "True"
        assert "Deployment r-web: replicas: 0/2" in conditions["Ready"]["message"]
        assert client.get(API_VERSION, "Thing", "r", namespace=ns)["status"]["children"] == 1
        web = client.get("apps/v1", "Deployment", "r-web", namespace=ns)
        client.patch("apps/v1", "Deployment", "r-web", {"status": {
            "observedGeneration": web["metadata"].get("generation", 1),
            "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2, "readyReplicas": 2,
            "conditions": [{"type": "Available", "status": "True"},
                           {"type": "Progressing", "status": "True",
                            "reason": "NewReplicaSetAvailable"}]}},
            patch_type="application/merge-patch+json", namespace=ns, subresource="status")
        assert wait_until(lambda: _conditions(client, ns).get("Ready", {}).get("status")
                          == "True", timeout=10)
