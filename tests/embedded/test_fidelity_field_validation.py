"""``fieldValidation`` answered as kube-apiserver 1.25 answers it, over HTTP with the official
client's transport (its typed APIs refuse unknown fields before sending them): ``Strict``
refuses unknown fields with 400, ``Warn`` (the default) stores the object and sends a
``Warning`` header per field, ``Ignore`` drops them silently; for create, update and patch.
Server-side apply cannot type an unknown field whatever the directive (500, as 1.25)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest

from reconciler.embedded import EmbeddedApiServer


class Deployments:
    """Deployment writes through the official ``ApiClient`` transport: raw bodies (its typed
    APIs refuse unknown fields before sending them), the answer's code, headers and body."""

    def __init__(self, client: kubernetes.client.ApiClient, namespace: str) -> None:
        self.client = client
        self.path = f"/apis/apps/v1/namespaces/{namespace}/deployments"

    def write(self, method: str, body: Any, *, name: str = "", validation: str | None = None,
              content_type: str = "application/json", **query: str) -> Answer:
        params = [("fieldValidation", validation)] if validation else []
        params += list(query.items())
        request = self.client.param_serialize(
            method.upper(), f"{self.path}/{name}" if name else self.path,
            query_params=params, body=body, auth_settings=["BearerToken"],
            header_params={"Content-Type": content_type, "Accept": "application/json"})
        response = self.client.call_api(*request)
        response.read()
        return Answer(response.status, dict(response.getheaders()), json.loads(response.data))

    def read(self, name: str) -> dict[str, Any]:
        answer = self.write("GET", None, name=name)
        assert answer.status == 200, answer.body
        return answer.body


class Answer:
    """An HTTP answer: status, headers, decoded JSON body."""

    def __init__(self, status: int, headers: dict[str, str], body: Any) -> None:
        self.status, self.headers, self.body = status, headers, body


@pytest.fixture
def apps(kube_api: EmbeddedApiServer, kube_namespace: str) -> Iterator[Deployments]:
    with kube_api.api_client() as api_client:
        yield Deployments(api_client, kube_namespace)


MERGE = "application/merge-patch+json"


def _deployment(name: str, **spec_extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}},
                 **spec_extra},
    }


def test_strict_refuses_unknown_fields_on_create_update_and_patch(apps: Deployments) -> None:
    caught = apps.write("post", _deployment("web", replica=3), validation="Strict")
    assert caught.status == 400
    status = caught.body
    assert status["reason"] == "BadRequest"
    assert status["message"] == ('Deployment in version "v1" cannot be handled as a Deployment: '
                                 'strict decoding error: unknown field "spec.replica"')
    assert apps.write("GET", None, name="web").status == 404

    apps.write("post", _deployment("web"), validation="Strict")
    created = apps.read("web")
    body = _deployment("web", replica=3)
    body["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    body["spec"]["template"]["spec"]["containers"][0]["imagePolicy"] = "x"
    caught = apps.write("put", body, name="web", validation="Strict")
    assert caught.status == 400
    assert caught.body["message"] == (
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
        'unknown field "spec.replica", '
        'unknown field "spec.template.spec.containers[0].imagePolicy"')

    caught = apps.write("patch", {"spec": {"replica": 2}}, name="web", validation="Strict",
                        content_type=MERGE)
    assert caught.status == 400
    assert caught.body["message"] == (
        'strict decoding error: unknown field "spec.replica"')
    assert apps.read("web") == created


def test_warn_stores_and_answers_a_warning_header_per_unknown_field(apps: Deployments) -> None:
    body = _deployment("web", replica=3)
    body["metadata"]["colour"] = "blue"
    response = apps.write("post", body, validation="Warn")
    assert response.status == 201
    assert response.headers["Warning"] == (
        '299 - "unknown field \\"metadata.colour\\"", 299 - "unknown field \\"spec.replica\\""')
    stored = apps.read("web")
    assert stored["spec"]["replicas"] == 1  # the typo was dropped, the default applies
    assert "colour" not in stored["metadata"]

    # No fieldValidation at all is Warn in 1.25.
    response = apps.write("patch", {"spec": {"replica": 2}}, name="web", content_type=MERGE)
    assert response.status == 200
    assert response.headers["Warning"] == '299 - "unknown field \\"spec.replica\\""'
    # A clean write carries no warning.
    response = apps.write("patch", {"spec": {"replicas": 2}}, name="web", content_type=MERGE)
    assert "Warning" not in response.headers


def test_ignore_drops_unknown_fields_silently(apps: Deployments) -> None:
    response = apps.write("post", _deployment("web", replica=3), validation="Ignore")
    assert response.status == 201
    assert "Warning" not in response.headers
    assert "replica" not in apps.read("web")["spec"]


def test_an_unknown_directive_is_invalid(apps: Deployments) -> None:
    caught = apps.write("post", _deployment("web"), validation="Loud")
    assert caught.status == 422
    assert caught.body["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loud": '
        'supported values: "", "Ignore", "Strict", "Warn"')


def test_server_side_apply_cannot_type_an_unknown_field(apps: Deployments) -> None:
    caught = apps.write("patch", _deployment("web", replica=3), name="web",
                        validation="Ignore", content_type="application/apply-patch+yaml",
                        fieldManager="optk")
    assert caught.status == 500
    assert caught.body["message"] == (
        "failed to create typed patch object: .spec.replica: field not declared in schema")
