"""Deletion: finalizers, propagation policies, garbage collection and namespace deletion.

Expectations come from ``finalizers.json`` and ``garbage-collection.json`` (a real
kube-apiserver with kube-controller-manager's garbage collector and namespace controller).
"""

from __future__ import annotations

from typing import Any

import kubernetes.client
import pytest
from kubernetes.client import ApiException

from tests.embedded.helpers import RawClient, configmap, deployment, wait_until


def _exists(core: kubernetes.client.CoreV1Api, ns: str, name: str) -> bool:
    try:
        core.read_namespaced_config_map(name, ns)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _owned(name: str, owner: Any, **meta: Any) -> dict[str, Any]:
    body = configmap(name)
    body["metadata"]["ownerReferences"] = [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name,
        "uid": owner.metadata.uid, "controller": True, "blockOwnerDeletion": True,
    }]
    body["metadata"].update(meta)
    return body


def test_finalizers_keep_the_object_until_removed(
    raw: RawClient, core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    body = configmap("fin", a="1")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    core.create_namespaced_config_map(kube_namespace, body)
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps/fin"
    code, deleted = raw.json("DELETE", path)
    assert code == 200
    assert deleted["metadata"]["deletionTimestamp"]
    assert deleted["metadata"]["deletionGracePeriodSeconds"] == 0
    code, again = raw.json("DELETE", path)
    assert code == 200
    assert again["metadata"]["deletionTimestamp"] == deleted["metadata"]["deletionTimestamp"]
    updated = core.patch_namespaced_config_map("fin", kube_namespace, {"data": {"b": "2"}})
    assert updated.data == {"a": "1", "b": "2"}
    code, refused = raw.json(
        "PATCH", path, content_type="application/merge-patch+json",
        body={"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}},
    )
    assert code == 422
    assert refused["details"]["causes"][0]["field"] == "metadata.finalizers"
    assert refused["message"].startswith(
        'ConfigMap "fin" is invalid: metadata.finalizers: Forbidden: no new finalizers'
    )
    kept = core.patch_namespaced_config_map(
        "fin", kube_namespace, {"metadata": {"deletionTimestamp": None}}
    )
    assert kept.metadata.deletion_timestamp is not None
    code, last = raw.json("PATCH", path, content_type="application/json-patch+json",
                          body=[{"op": "replace", "path": "/metadata/finalizers", "value": []}])
    assert code == 200
    assert last["kind"] == "ConfigMap"
    assert not _exists(core, kube_namespace, "fin")


def test_background_delete_returns_status_and_collects_dependents(
    raw: RawClient, core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    owner = core.create_namespaced_config_map(kube_namespace, configmap("owner-bg"))
    core.create_namespaced_config_map(kube_namespace, _owned("dep-bg", owner))
    code, body = raw.json("DELETE", f"/api/v1/namespaces/{kube_namespace}/configmaps/owner-bg")
    assert code == 200
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": "owner-bg", "kind": "configmaps",
                                "uid": owner.metadata.uid}}
    wait_until(lambda: not _exists(core, kube_namespace, "dep-bg"))


def test_foreground_waits_for_dependents(
    core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    owner = core.create_namespaced_config_map(kube_namespace, configmap("owner-fg"))
    core.create_namespaced_config_map(
        kube_namespace, _owned("dep-fg", owner, finalizers=["example.com/slow"])
    )
    core.delete_namespaced_config_map("owner-fg", kube_namespace,
                                      propagation_policy="Foreground")
    wait_until(lambda: core.read_namespaced_config_map(
        "dep-fg", kube_namespace).metadata.deletion_timestamp is not None)
    held = core.read_namespaced_config_map("owner-fg", kube_namespace)
    assert held.metadata.finalizers == ["foregroundDeletion"]
    assert core.read_namespaced_config_map(
        "dep-fg", kube_namespace).metadata.finalizers == ["example.com/slow"]
    core.patch_namespaced_config_map("dep-fg", kube_namespace,
                                     {"metadata": {"finalizers": None}})
    wait_until(lambda: not _exists(core, kube_namespace, "owner-fg"))
    assert not _exists(core, kube_namespace, "dep-fg")


def test_orphan_keeps_dependents_without_the_reference(
    core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    owner = core.create_namespaced_config_map(kube_namespace, configmap("owner-or"))
    dep = core.create_namespaced_config_map(kube_namespace, _owned("dep-or", owner))
    core.delete_namespaced_config_map("owner-or", kube_namespace, propagation_policy="Orphan")
    wait_until(lambda: not _exists(core, kube_namespace, "owner-or"))
    kept = core.read_namespaced_config_map("dep-or", kube_namespace)
    assert kept.metadata.owner_references is None
    assert kept.metadata.resource_version != dep.metadata.resource_version


def test_dependent_of_a_missing_owner_is_collected(
    core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    ghost = kubernetes.client.V1ConfigMap(metadata=kubernetes.client.V1ObjectMeta(
        name="ghost", uid="00000000-0000-0000-0000-000000000001"))
    core.create_namespaced_config_map(kube_namespace, _owned("dangling", ghost))
    wait_until(lambda: not _exists(core, kube_namespace, "dangling"))


@pytest.mark.parametrize(("policy", "finalizer"), [
    ("Foreground", "foregroundDeletion"), ("Orphan", "orphan"),
])
def test_propagation_policy_finalizer_bumps_generation(
    raw: RawClient, apps: kubernetes.client.AppsV1Api, kube_namespace: str,
    policy: str, finalizer: str,
) -> None:
    created = apps.create_namespaced_deployment(kube_namespace, deployment("prop"))
    code, body = raw.json(
        "DELETE", f"/apis/apps/v1/namespaces/{kube_namespace}/deployments/prop",
        body={"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": policy},
    )
    assert code == 200
    assert body["metadata"]["finalizers"] == [finalizer]
    assert body["metadata"]["generation"] == created.metadata.generation + 1


def test_delete_preconditions(
    raw: RawClient, core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    created = core.create_namespaced_config_map(kube_namespace, configmap("pre"))
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps/pre"
    code, body = raw.json("DELETE", path, body={"preconditions": {"resourceVersion": "1"}})
    assert code == 409
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on ConfigMap "pre": the ResourceVersion in the '
        f"precondition (1) does not match the ResourceVersion in record "
        f"({created.metadata.resource_version}). The object might have been modified"
    )
    code, body = raw.json("DELETE", path, body={"preconditions": {"uid": "wrong"}})
    assert code == 409
    assert "the UID in the precondition (wrong)" in body["message"]
    code, _ = raw.json("DELETE", path, body={"preconditions": {"uid": created.metadata.uid}})
    assert code == 200


def test_namespace_deletion_removes_its_objects(
    raw: RawClient, core: kubernetes.client.CoreV1Api
) -> None:
    core.create_namespace(kubernetes.client.V1Namespace(
        metadata=kubernetes.client.V1ObjectMeta(name="doomed")))
    body = configmap("held")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    core.create_namespaced_config_map("doomed", body)
    core.create_namespaced_config_map("doomed", configmap("plain"))
    code, ns = raw.json("DELETE", "/api/v1/namespaces/doomed")
    assert code == 200
    assert ns["status"]["phase"] == "Terminating"
    assert ns["spec"]["finalizers"] == ["kubernetes"]
    code, late = raw.json("POST", "/api/v1/namespaces/doomed/configmaps",
                          body=configmap("late"))
    assert code == 403
    assert late["message"] == (
        'configmaps "late" is forbidden: unable to create new content in namespace doomed '
        "because it is being terminated"
    )
    wait_until(lambda: not _exists(core, "doomed", "plain"))
    assert core.read_namespace("doomed").status.phase == "Terminating"
    core.patch_namespaced_config_map("held", "doomed", {"metadata": {"finalizers": None}})

    def namespace_gone() -> bool:
        code, _ = raw.json("GET", "/api/v1/namespaces/doomed")
        return code == 404

    wait_until(namespace_gone)


def test_pods_services_and_service_accounts_answer_delete_with_the_object(
    raw: RawClient, kube_namespace: str
) -> None:
    base = f"/api/v1/namespaces/{kube_namespace}"
    raw.json("POST", f"{base}/serviceaccounts", body={"metadata": {"name": "robot"}})
    code, body = raw.json("DELETE", f"{base}/serviceaccounts/robot")
    assert code == 200
    assert body["kind"] == "ServiceAccount"
    assert body["metadata"]["name"] == "robot"
    raw.json("POST", f"{base}/configmaps", body=configmap("plain"))
    code, body = raw.json("DELETE", f"{base}/configmaps/plain")
    assert body["kind"] == "Status"


def test_dependent_of_an_unserved_owner_kind_is_kept(
    core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    body = configmap("node-owned")
    body["metadata"]["ownerReferences"] = [{
        "apiVersion": "v1", "kind": "Node", "name": "node-1",
        "uid": "00000000-0000-0000-0000-000000000002",
    }]
    core.create_namespaced_config_map(kube_namespace, body)
    ghost = kubernetes.client.V1ConfigMap(metadata=kubernetes.client.V1ObjectMeta(
        name="ghost", uid="00000000-0000-0000-0000-000000000003"))
    core.create_namespaced_config_map(kube_namespace, _owned("dangling-served", ghost))
    # the served kind's dangling dependent goes; the unresolvable owner's dependent stays
    wait_until(lambda: not _exists(core, kube_namespace, "dangling-served"))
    assert _exists(core, kube_namespace, "node-owned")
