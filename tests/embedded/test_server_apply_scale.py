"""Server-side apply (the simplified form the server supports) and the scale subresource."""

from __future__ import annotations

import kubernetes.client

from tests.conftest import load_fixture
from tests.embedded.helpers import RawClient, deployment

APPLY = "application/apply-patch+yaml"


def _ssa_step(note: str) -> dict[str, object]:
    steps = load_fixture("server-side-apply.json")["steps"]
    return next(s for s in steps if s.get("note") == note)


def test_apply_creates_then_is_a_no_op(raw: RawClient, kube_namespace: str) -> None:
    body = _ssa_step("apply creates the object (201)")["request"]["body"]  # type: ignore[index]
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps/ssa-demo?fieldManager=op-a"
    code, created = raw.json("PATCH", path, raw=str(body).encode(), content_type=APPLY)
    assert code == 201
    assert created["data"] == {"key": "a", "other": "a"}
    assert created["metadata"]["labels"] == {"owner": "op-a"}
    code, again = raw.json("PATCH", path, raw=str(body).encode(), content_type=APPLY)
    assert code == 200
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    code, changed = raw.json("PATCH", path, content_type=APPLY, body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa-demo"},
        "data": {"key": "b"},
    })
    assert code == 200
    assert changed["data"]["key"] == "b"


def _comparable(obj: dict[str, object]) -> dict[str, object]:
    meta = dict(obj["metadata"])  # type: ignore[arg-type]
    for key in ("uid", "resourceVersion", "creationTimestamp", "namespace"):
        meta.pop(key, None)
    meta["managedFields"] = [
        {k: v for k, v in entry.items() if k != "time"}
        for entry in meta.get("managedFields", [])  # type: ignore[attr-defined]
        if entry["operation"] == "Apply"
    ]
    return {**obj, "metadata": meta}


def test_apply_replays_the_recorded_ownership(raw: RawClient, kube_namespace: str) -> None:
    """Create, no-op, conflict, force, and removal of fields op-a no longer applies."""
    steps = load_fixture("server-side-apply.json")["steps"][:5]
    base = f"/api/v1/namespaces/{kube_namespace}/configmaps/ssa-demo"
    for step in steps:
        request = step["request"]
        query = "&".join(f"{k}={v}" for k, v in request["query"].items())
        code, body = raw.json("PATCH", f"{base}?{query}", raw=request["body"].encode(),
                              content_type=APPLY)
        assert code == step["status"], step["note"]
        if code == 409:
            assert body == step["response"]
        else:
            assert _comparable(body) == _comparable(step["response"]), step["note"]


def test_apply_without_field_manager_is_invalid(raw: RawClient, kube_namespace: str) -> None:
    step = _ssa_step("apply without fieldManager: 422 Invalid (PatchOptions)")
    code, body = raw.json("PATCH", f"/api/v1/namespaces/{kube_namespace}/configmaps/x",
                          content_type=APPLY, body={"apiVersion": "v1", "kind": "ConfigMap",
                                                    "metadata": {"name": "x"}})
    assert code == 422
    assert body == step["response"]


def test_scale_subresource(
    raw: RawClient, apps: kubernetes.client.AppsV1Api, kube_namespace: str
) -> None:
    apps.create_namespaced_deployment(kube_namespace, deployment("scaled", replicas=2))
    path = f"/apis/apps/v1/namespaces/{kube_namespace}/deployments/scaled/scale"
    code, scale = raw.json("GET", path)
    assert code == 200
    assert scale["kind"] == "Scale"
    assert scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"]["selector"] == "app=scaled"
    code, patched = raw.json("PATCH", path, content_type="application/merge-patch+json",
                             body={"spec": {"replicas": 4}})
    assert code == 200
    assert patched["spec"]["replicas"] == 4
    scale = apps.replace_namespaced_deployment_scale(
        "scaled", kube_namespace, {"metadata": {"name": "scaled"}, "spec": {"replicas": 6}}
    )
    assert scale.spec.replicas == 6
    dep = apps.read_namespaced_deployment("scaled", kube_namespace)
    assert dep.spec.replicas == 6
    assert dep.metadata.generation == 3
    code, body = raw.json("PATCH", path, content_type="application/merge-patch+json",
                          body={"spec": {"replicas": -1}})
    assert code == 422
    assert body["details"]["causes"][0]["field"] == "spec.replicas"
