"""Custom resources over HTTP: served when their CRD is created, gone when it is deleted.

Uses the ``widgets.example.com`` CRD of ``customresourcedefinition.json`` under a unique group
per test, so tests sharing the session server never see each other's types.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import kubernetes.client
import pytest
from kubernetes.dynamic import DynamicClient

from tests.conftest import load_fixture
from tests.embedded.helpers import RawClient, wait_until


@pytest.fixture
def group(api_client: kubernetes.client.ApiClient) -> str:
    """A unique API group with a ``Widget`` CRD (status subresource), deleted afterwards."""
    name = f"t{uuid.uuid4().hex[:8]}.example.com"
    crd = copy.deepcopy(load_fixture("customresourcedefinition.json")["sent"])
    crd["metadata"]["name"] = f"widgets.{name}"
    crd["spec"]["group"] = name
    ext = kubernetes.client.ApiextensionsV1Api(api_client)
    ext.create_custom_resource_definition(crd)
    return name


def _widget(group: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{group}/v1alpha1", "kind": "Widget", "metadata": {"name": name},
            "spec": spec}


def test_crd_types_are_discovered_and_served(
    raw: RawClient, group: str, kube_namespace: str
) -> None:
    code, groups = raw.json("GET", "/apis")
    assert code == 200
    assert group in [g["name"] for g in groups["groups"]]
    code, resources = raw.json("GET", f"/apis/{group}/v1alpha1")
    assert code == 200
    names = [r["name"] for r in resources["resources"]]
    assert names == ["widgets", "widgets/status"]
    path = f"/apis/{group}/v1alpha1/namespaces/{kube_namespace}/widgets"
    code, created = raw.json("POST", path, body=_widget(group, "w1", color="blue", junk=1))
    assert code == 201
    assert created["spec"] == {"color": "blue", "size": 1}
    assert created["metadata"]["generation"] == 1
    code, listed = raw.json("GET", path)
    assert listed["items"][0]["kind"] == "Widget"


def test_status_subresource_and_strategic_merge_refused(
    raw: RawClient, group: str, kube_namespace: str
) -> None:
    path = f"/apis/{group}/v1alpha1/namespaces/{kube_namespace}/widgets"
    raw.json("POST", path, body=_widget(group, "w2", color="red"))
    code, body = raw.json("PATCH", f"{path}/w2/status",
                          content_type="application/merge-patch+json",
                          body={"status": {"ready": True}, "spec": {"color": "green"}})
    assert code == 200
    assert body["status"] == {"ready": True}
    assert body["spec"]["color"] == "red"
    code, body = raw.json("PATCH", f"{path}/w2",
                          content_type="application/strategic-merge-patch+json",
                          body={"spec": {"color": "red"}})
    assert code == 415
    assert body["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, "
        "application/apply-patch+yaml"
    )


def test_deleting_the_crd_removes_its_type_and_objects(
    raw: RawClient, api_client: kubernetes.client.ApiClient, group: str, kube_namespace: str
) -> None:
    path = f"/apis/{group}/v1alpha1/namespaces/{kube_namespace}/widgets"
    raw.json("POST", path, body=_widget(group, "w3"))
    kubernetes.client.ApiextensionsV1Api(api_client).delete_custom_resource_definition(
        f"widgets.{group}"
    )
    wait_until(lambda: raw.request("GET", path).status == 404)
    assert raw.request("GET", f"/apis/{group}/v1alpha1").status == 404


def test_dynamic_client_works_with_custom_and_builtin_kinds(
    dynamic: DynamicClient, group: str, kube_namespace: str
) -> None:
    widgets = dynamic.resources.get(api_version=f"{group}/v1alpha1", kind="Widget")
    widgets.create(body=_widget(group, "dyn", color="pink"), namespace=kube_namespace)
    got = widgets.get(name="dyn", namespace=kube_namespace)
    assert got.spec.color == "pink"
    configmaps = dynamic.resources.get(api_version="v1", kind="ConfigMap")
    configmaps.create(body={"metadata": {"name": "dyn"}, "data": {"a": "b"}},
                      namespace=kube_namespace)
    items = configmaps.get(namespace=kube_namespace).items
    assert [i.metadata.name for i in items] == ["dyn"]


def test_dependents_of_custom_resources_go_with_their_crd(
    raw: RawClient, api_client: kubernetes.client.ApiClient, group: str, kube_namespace: str
) -> None:
    """A custom resource removed with its CRD is a deleted owner: the garbage collector deletes
    its dependents, so a parent re-created under the same name finds its children's names free.

    Embedded only: a real kube-controller-manager does the same (0.1 s after the CRD's DELETE,
    measured with envtest) only once its discovery resync, every 30 s, has started watching the
    new kind; a CRD younger than that leaves the dependents in place, and waiting that long in
    every run is not worth it.
    """
    core = kubernetes.client.CoreV1Api(api_client)
    ext = kubernetes.client.ApiextensionsV1Api(api_client)
    path = f"/apis/{group}/v1alpha1/namespaces/{kube_namespace}/widgets"
    crd = ext.read_custom_resource_definition(f"widgets.{group}")

    def child_of(owner: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": {"name": "w-child", "ownerReferences": [{
            "apiVersion": f"{group}/v1alpha1", "kind": "Widget", "name": "w",
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]}}

    code, owner = raw.json("POST", path, body=_widget(group, "w"))
    assert code == 201, owner
    core.create_namespaced_config_map(kube_namespace, child_of(owner))
    ext.delete_custom_resource_definition(f"widgets.{group}")
    wait_until(lambda: raw.request("GET", path).status == 404, timeout=20)

    def child_gone() -> bool:
        names = [c.metadata.name for c in core.list_namespaced_config_map(kube_namespace).items]
        return "w-child" not in names

    wait_until(child_gone, timeout=10)
    crd.metadata = kubernetes.client.V1ObjectMeta(name=f"widgets.{group}")
    crd.status = None
    ext.create_custom_resource_definition(crd)
    wait_until(lambda: raw.request("GET", path).status == 200, timeout=20)
    code, owner = raw.json("POST", path, body=_widget(group, "w"))
    assert code == 201, owner
    core.create_namespaced_config_map(kube_namespace, child_of(owner))
