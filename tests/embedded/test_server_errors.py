"""Status bodies and 4xx hardening: the server answers bad requests as a real one and survives.

Bodies are compared with ``errors.json``, ``conflict.json`` and ``patch-types.json``.
"""

from __future__ import annotations

import json
from typing import Any

import kubernetes.client
import pytest

from tests.conftest import load_fixture
from tests.embedded.helpers import RawClient, configmap, deployment


def _step(fixture: str, note: str) -> dict[str, Any]:
    steps = load_fixture(fixture)["steps"]
    return next(s for s in steps if isinstance(s, dict) and s.get("note") == note)


def test_not_found_matches_the_recording(raw: RawClient, kube_namespace: str) -> None:
    expected = _step("errors.json", "404 NotFound Status")["response"]
    code, body = raw.json("GET", f"/api/v1/namespaces/{kube_namespace}/configmaps/"
                                 "does-not-exist")
    assert code == 404
    assert body == expected


def test_invalid_deployment_lists_causes(raw: RawClient, kube_namespace: str) -> None:
    step = _step("errors.json", "422 Invalid: details.causes list each field error")
    code, body = raw.json("POST", f"/apis/apps/v1/namespaces/{kube_namespace}/deployments",
                          body=step["request"]["body"])
    assert code == 422
    assert body == step["response"]


@pytest.mark.parametrize("note", [
    "400 BadRequest: body namespace differs from URL namespace",
    "no name and no generateName",
    "invalid DNS-1123 name",
])
def test_create_refusals_match_the_recording(
    raw: RawClient, kube_namespace: str, note: str
) -> None:
    step = _step("errors.json", note)
    body = json.loads(json.dumps(step["request"]["body"]).replace('"other"', '"elsewhere"'))
    code, answer = raw.json("POST", f"/api/v1/namespaces/{kube_namespace}/configmaps",
                            body=body)
    assert code == step["status"]
    assert answer == step["response"]


def test_name_mismatch_on_update(
    raw: RawClient, core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    core.create_namespaced_config_map(kube_namespace, configmap("dup"))
    step = _step("errors.json", "400 BadRequest: body name differs from URL name")
    code, body = raw.json("PUT", f"/api/v1/namespaces/{kube_namespace}/configmaps/dup",
                          body=step["request"]["body"])
    assert code == 400
    assert body == step["response"]


def test_generate_name_appends_five_characters(raw: RawClient, kube_namespace: str) -> None:
    code, body = raw.json("POST", f"/api/v1/namespaces/{kube_namespace}/configmaps",
                          body={"metadata": {"generateName": "gen-"}})
    assert code == 201
    assert body["metadata"]["name"].startswith("gen-")
    assert len(body["metadata"]["name"]) == len("gen-") + 5


def test_dry_run_create_persists_nothing(raw: RawClient, kube_namespace: str) -> None:
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps"
    code, body = raw.json("POST", path + "?dryRun=All", body=configmap("dry"))
    assert code == 201
    assert body["metadata"]["uid"]
    assert "resourceVersion" not in body["metadata"]
    code, _ = raw.json("GET", path + "/dry")
    assert code == 404


def test_dry_run_update_and_delete_change_nothing(
    raw: RawClient, core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    created = core.create_namespaced_config_map(kube_namespace, configmap("keep", a="1"))
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps/keep"
    code, body = raw.json("PATCH", path + "?dryRun=All",
                          content_type="application/merge-patch+json",
                          body={"data": {"a": "2"}})
    assert code == 200
    assert body["data"] == {"a": "2"}
    code, _ = raw.json("DELETE", path + "?dryRun=All")
    assert code == 200
    now = core.read_namespaced_config_map("keep", kube_namespace)
    assert now.data == {"a": "1"}
    assert now.metadata.resource_version == created.metadata.resource_version


def test_unknown_resource_is_a_plain_text_404(raw: RawClient, kube_namespace: str) -> None:
    response = raw.request("GET", f"/apis/example.com/v1alpha1/namespaces/{kube_namespace}/"
                                  "nothings")
    assert response.status == 404
    assert response.data == b"404 page not found\n"
    assert raw.request("GET", "/no/such/path").status == 404


def test_malformed_json_is_bad_request(raw: RawClient, kube_namespace: str) -> None:
    code, body = raw.json("POST", f"/api/v1/namespaces/{kube_namespace}/configmaps",
                          raw=b"{not json")
    assert code == 400
    assert body["reason"] == "BadRequest"


def test_wrong_content_type_is_unsupported_media_type(
    raw: RawClient, kube_namespace: str
) -> None:
    code, body = raw.json("POST", f"/api/v1/namespaces/{kube_namespace}/configmaps",
                          raw=b"<xml/>", content_type="application/xml")
    assert code == 415
    assert body["reason"] == "UnsupportedMediaType"


def test_body_over_three_mebibytes_is_refused(raw: RawClient, kube_namespace: str) -> None:
    big = configmap("big", blob="x" * (3 * 1024 * 1024 + 10))
    code, body = raw.json("POST", f"/api/v1/namespaces/{kube_namespace}/configmaps", body=big)
    assert code == 413
    assert body["reason"] == "RequestEntityTooLarge"
    code, _ = raw.json("GET", f"/api/v1/namespaces/{kube_namespace}/configmaps")
    assert code == 200


def test_verb_not_served_is_method_not_allowed(raw: RawClient) -> None:
    code, body = raw.json("DELETE", "/api/v1/namespaces")
    assert code == 405
    assert body["reason"] == "MethodNotAllowed"


def test_stale_merge_patch_is_conflict(
    raw: RawClient, core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    created = core.create_namespaced_config_map(kube_namespace, configmap("cd", a="1"))
    core.patch_namespaced_config_map("cd", kube_namespace, {"data": {"a": "2"}})
    code, body = raw.json(
        "PATCH", f"/api/v1/namespaces/{kube_namespace}/configmaps/cd",
        content_type="application/merge-patch+json",
        body={"metadata": {"resourceVersion": created.metadata.resource_version},
              "data": {"a": "3"}},
    )
    assert code == 409
    assert body["message"] == (
        'Operation cannot be fulfilled on configmaps "cd": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


class TestPatchTypes:
    """``patch-types.json``: the three patch types on one Deployment."""

    @pytest.fixture
    def path(self, apps: kubernetes.client.AppsV1Api, kube_namespace: str) -> str:
        body = deployment("patch-demo")
        body["spec"]["template"]["spec"]["containers"] = [
            {"name": "a", "image": "busybox:1.36"}, {"name": "b", "image": "busybox:1.36"},
        ]
        apps.create_namespaced_deployment(kube_namespace, body)
        return f"/apis/apps/v1/namespaces/{kube_namespace}/deployments/patch-demo"

    def _containers(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        return [(c["name"], c["image"])
                for c in body["spec"]["template"]["spec"]["containers"]]

    def test_strategic_merge_merges_lists_by_name(self, raw: RawClient, path: str) -> None:
        code, body = raw.json(
            "PATCH", path, content_type="application/strategic-merge-patch+json",
            body={"spec": {"template": {"spec": {"containers": [
                {"name": "b", "image": "busybox:1.37"}]}}}},
        )
        assert code == 200
        assert self._containers(body) == [("a", "busybox:1.36"), ("b", "busybox:1.37")]
        code, body = raw.json(
            "PATCH", path, content_type="application/strategic-merge-patch+json",
            body={"spec": {"template": {"spec": {"containers": [
                {"name": "a", "$patch": "delete"}]}}}},
        )
        assert code == 200
        assert self._containers(body) == [("b", "busybox:1.37")]

    def test_merge_patch_replaces_lists(self, raw: RawClient, path: str) -> None:
        code, body = raw.json(
            "PATCH", path, content_type="application/merge-patch+json",
            body={"spec": {"template": {"spec": {"containers": [
                {"name": "b", "image": "busybox:1.37"}]}}}},
        )
        assert code == 200
        assert [c[0] for c in self._containers(body)] == ["b"]

    def test_json_patch_and_its_failures(self, raw: RawClient, path: str) -> None:
        rejected = _step("patch-types.json", "JSON patch whose test op fails")["response"]
        code, body = raw.json("PATCH", path, content_type="application/json-patch+json",
                              body=[{"op": "test", "path": "/spec/replicas", "value": 5}])
        assert code == 422
        assert body == rejected
        code, body = raw.json("PATCH", path, content_type="application/json-patch+json",
                              body=[{"op": "replace", "path": "/spec/nope/x", "value": 2}])
        assert code == 422
        code, body = raw.json("PATCH", path, content_type="application/json-patch+json",
                              body=[{"op": "replace", "path": "/spec/replicas", "value": 2}])
        assert code == 200
        assert body["spec"]["replicas"] == 2

    def test_malformed_patch_body(self, raw: RawClient, path: str) -> None:
        expected = _step("patch-types.json", "malformed patch body")["response"]
        code, body = raw.json("PATCH", path, content_type="application/merge-patch+json",
                              raw=b"{not json")
        assert code == 400
        assert body == expected

    def test_patch_of_a_missing_object(self, raw: RawClient, kube_namespace: str) -> None:
        code, body = raw.json(
            "PATCH", f"/api/v1/namespaces/{kube_namespace}/configmaps/does-not-exist",
            content_type="application/merge-patch+json", body={"data": {"a": "b"}},
        )
        assert code == 404
        assert body["reason"] == "NotFound"


def test_server_survives_garbage(raw: RawClient, kube_namespace: str) -> None:
    for method, path, data, ctype in [
        ("POST", f"/api/v1/namespaces/{kube_namespace}/configmaps", b"[1,2]", None),
        ("POST", f"/api/v1/namespaces/{kube_namespace}/configmaps", b'"text"', None),
        ("PUT", f"/api/v1/namespaces/{kube_namespace}/configmaps/x", b"\xff\xfe", None),
        ("PATCH", f"/api/v1/namespaces/{kube_namespace}/configmaps/x", b"{}",
         "application/strategic-merge-patch+json"),
        ("GET", f"/api/v1/namespaces/{kube_namespace}/configmaps?limit=abc", None, None),
        ("POST", f"/api/v1/namespaces/{kube_namespace}/configmaps",
         b"[" * 100_000 + b"]" * 100_000, None),
        ("PATCH", f"/api/v1/namespaces/{kube_namespace}/configmaps/x", b"[" * 100_000,
         "application/merge-patch+json"),
        ("GET", f"/api/v1/namespaces/{kube_namespace}/configmaps?labelSelector=%3D%3D",
         None, None),
        ("GET", f"/api/v1/namespaces/{kube_namespace}/configmaps?continue=garbage", None, None),
        ("GET", f"/api/v1/namespaces/{kube_namespace}/configmaps?watch=1&resourceVersion=x",
         None, None),
    ]:
        response = raw.request(method, path, raw=data,
                               content_type=ctype or "application/json")
        assert 400 <= response.status < 500, (method, path, response.status)
    code, _ = raw.json("GET", "/api/v1/namespaces")
    assert code == 200


def test_refused_and_dry_run_creates_give_their_cluster_ip_back(
    raw: RawClient, kube_namespace: str
) -> None:
    path = f"/api/v1/namespaces/{kube_namespace}/services"
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
               "spec": {"ports": [{"port": 80}]}}
    code, first = raw.json("POST", path, body=service)
    assert code == 201
    code, _ = raw.json("POST", path, body=service)
    assert code == 409
    code, dry = raw.json("POST", path + "?dryRun=All",
                         body={**service, "metadata": {"name": "svc-dry"}})
    assert code == 201
    code, second = raw.json("POST", path, body={**service, "metadata": {"name": "svc-2"}})
    assert code == 201
    # neither the refused nor the dry-run create kept an address: the next one is reused
    assert second["spec"]["clusterIP"] == dry["spec"]["clusterIP"]
    assert second["spec"]["clusterIP"] != first["spec"]["clusterIP"]
    code, _ = raw.json("GET", f"{path}/svc")
    assert code == 200
