"""Discovery and OpenAPI documents, compared with ``discovery.json`` where it records them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import load_fixture
from tests.embedded.helpers import RawClient

RECORDED = load_fixture("discovery.json")
_COMPARED = ("name", "singularName", "namespaced", "kind", "verbs", "shortNames", "categories",
             "group", "version")


def _resources(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: {k: r[k] for k in _COMPARED if k in r} for r in body["resources"]}


@pytest.mark.parametrize("path", [
    "/api/v1", "/apis/apps/v1", "/apis/rbac.authorization.k8s.io/v1",
    "/apis/apiextensions.k8s.io/v1",
])
def test_resource_lists_match_the_recording(raw: RawClient, path: str) -> None:
    code, body = raw.json("GET", path)
    assert code == 200
    assert body["kind"] == "APIResourceList"
    assert body["groupVersion"] == RECORDED[path]["body"]["groupVersion"]
    ours = _resources(body)
    recorded = _resources(RECORDED[path]["body"])
    assert ours
    for name, entry in ours.items():
        if name in recorded:
            assert entry == recorded[name], name


def test_version_api_and_groups(raw: RawClient) -> None:
    code, version = raw.json("GET", "/version")
    assert code == 200
    assert (version["major"], version["minor"]) == ("1", "25")
    code, api = raw.json("GET", "/api")
    assert api["kind"] == "APIVersions"
    assert api["versions"] == ["v1"]
    code, apis = raw.json("GET", "/apis")
    groups = {g["name"]: g for g in apis["groups"]}
    for name in ("apps", "batch", "rbac.authorization.k8s.io", "networking.k8s.io",
                 "coordination.k8s.io", "apiextensions.k8s.io"):
        assert groups[name]["preferredVersion"]["groupVersion"].startswith(name + "/")
    code, apps = raw.json("GET", "/apis/apps")
    assert apps == {"kind": "APIGroup", "apiVersion": "v1", "name": "apps",
                    "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
                    "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}}


def test_aggregated_discovery_when_asked(raw: RawClient) -> None:
    accept = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
              "application/json")
    response = raw.request("GET", "/apis", headers={"Accept": accept})
    assert response.status == 200
    assert response.headers["Content-Type"] == (
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    )
    body = response.json()
    assert body["kind"] == "APIGroupDiscoveryList"
    assert body["apiVersion"] == "apidiscovery.k8s.io/v2"
    apps = next(i for i in body["items"] if i["metadata"]["name"] == "apps")
    deployments = next(r for r in apps["versions"][0]["resources"]
                       if r["resource"] == "deployments")
    assert deployments["responseKind"] == {"group": "apps", "version": "v1",
                                           "kind": "Deployment"}
    assert deployments["scope"] == "Namespaced"
    assert [s["subresource"] for s in deployments["subresources"]] == ["scale", "status"]
    core = raw.request("GET", "/api", headers={"Accept": accept}).json()
    assert [i["metadata"]["name"] for i in core["items"]] == [""]
    assert "configmaps" in [r["resource"] for r in core["items"][0]["versions"][0]["resources"]]


def test_plain_clients_get_the_legacy_documents(raw: RawClient) -> None:
    response = raw.request("GET", "/apis", headers={"Accept": "application/json"})
    assert response.headers["Content-Type"].startswith("application/json")
    assert response.json()["kind"] == "APIGroupList"


def test_openapi_v2_has_kinds_and_patch_metadata(raw: RawClient) -> None:
    code, doc = raw.json("GET", "/openapi/v2")
    assert code == 200
    assert doc["swagger"] == "2.0"
    deployment = doc["definitions"]["io.k8s.api.apps.v1.Deployment"]
    assert deployment["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "version": "v1", "kind": "Deployment"}
    ]
    containers = doc["definitions"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["items"]["$ref"] == "#/definitions/io.k8s.api.core.v1.Container"


def test_openapi_v3_declares_server_side_field_validation(raw: RawClient) -> None:
    code, index = raw.json("GET", "/openapi/v3")
    assert code == 200
    url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
    code, doc = raw.json("GET", url)
    assert code == 200
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "apps", "version": "v1", "kind": "Deployment"
    }
    assert {p["name"] for p in patch["parameters"]} >= {"fieldValidation", "dryRun"}
    schema = doc["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"]
    assert schema["properties"]["spec"]["$ref"] == (
        "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"
    )
    assert raw.request("GET", "/openapi/v3/apis/nothing/v1").status == 404


def test_health_endpoints(raw: RawClient) -> None:
    for path in ("/healthz", "/readyz", "/livez"):
        response = raw.request("GET", path)
        assert response.status == 200
        assert response.data == b"ok"
