"""The webhooks' answers (pure), the certificates, the configurations, and the HTTPS server.

The answers are functions of a review body: checked here without any API server. The server is
checked over real TLS with the standard library's client (the API server's side is in
``test_webhooks_real.py``).
"""

from __future__ import annotations

import base64
import datetime
import json
import ssl
import urllib.request
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from builders.specs import ApiVersion, Versions
from examples.thanos.crds import (
    API_VERSION,
    API_VERSION_2,
    DEFAULT_INGRESS_CLASS,
    KIND,
    THANOS_VERSIONED_CRD,
    THANOS_VERSIONS,
    ThanosSpec,
    ThanosSpecV1Alpha2,
)
from reconciler import ReconcilerUsageError
from reconciler._base.errors import WebhookCertificateError
from reconciler.webhooks import (
    CONVERT_PATH,
    VersionsIndex,
    WebhookCertificates,
    WebhookEndpoint,
    WebhookServer,
    admission_response,
    conversion_response,
    webhook_configurations,
    with_conversion_webhook,
)

INDEX = VersionsIndex([THANOS_VERSIONS])


def _thanos(api_version: str, spec: dict[str, Any], name: str = "t") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": KIND,
            "metadata": {"name": name, "namespace": "ns"}, "spec": spec}


def _admission(obj: dict[str, Any], *, operation: str = "CREATE",
               old: dict[str, Any] | None = None) -> dict[str, Any]:
    request: dict[str, Any] = {"uid": "u-1", "operation": operation, "object": obj,
                               "kind": {"group": "monitoring.optk.dev", "version": "v1alpha2",
                                        "kind": KIND}}
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def test_conversion_converts_every_object_and_answers_the_uid() -> None:
    review = {"request": {"uid": "c-1", "desiredAPIVersion": API_VERSION_2, "objects": [
        _thanos(API_VERSION, {"rule": {"replicas": 2}}, "a"),
        _thanos(API_VERSION, {"objectStorageSecret": "s"}, "b")]}}
    response = conversion_response(review, INDEX)["response"]
    assert response["uid"] == "c-1"
    assert response["result"] == {"status": "Success"}
    assert [o["spec"] for o in response["convertedObjects"]] == [
        {"ruler": {"replicas": 2}}, {"objectStorage": {"secretName": "s"}}]


def test_a_conversion_that_cannot_be_done_fails_naming_the_object_and_field() -> None:
    review = {"request": {"uid": "c-2", "desiredAPIVersion": API_VERSION_2, "objects": [
        _thanos(API_VERSION, {"query": {"replicas": "two"}}, "bad")]}}
    response = conversion_response(review, INDEX)["response"]
    assert response["result"]["status"] == "Failure"
    assert response["result"]["message"] == (
        "Thanos ns/bad: invalid spec.query.replicas: 'two': expected an integer")
    assert response["convertedObjects"] == []


def test_a_version_the_kind_does_not_have_fails_the_review_not_the_server() -> None:
    review = {"request": {"uid": "c-3", "desiredAPIVersion": "monitoring.optk.dev/v9",
                          "objects": [_thanos(API_VERSION, {}, "x")]}}
    result = conversion_response(review, INDEX)["response"]["result"]
    assert result["status"] == "Failure"
    assert result["message"].startswith("Thanos ns/x: ")
    assert "no version 'v9'" in result["message"]


def test_validation_refuses_naming_the_field_and_warns() -> None:
    refused = admission_response(_admission(_thanos(API_VERSION, {"queryFrontend": {}})), INDEX,
                                 mutate=False)["response"]
    assert refused["allowed"] is False
    assert refused["uid"] == "u-1"
    assert refused["status"]["message"].startswith(
        "Thanos ns/t: invalid spec.queryFrontend: ")
    warned = admission_response(_admission(_thanos(API_VERSION_2, {"storeGateway": {}})), INDEX,
                                mutate=False)["response"]
    assert warned == {"uid": "u-1", "allowed": True, "warnings": [
        "spec.storeGateway without spec.objectStorage keeps blocks on its volume only"]}
    # Ratcheting: an update keeping an old object's problem is allowed, and so is a deletion.
    orphan = _thanos(API_VERSION, {"queryFrontend": {}})
    assert admission_response(_admission(orphan, operation="UPDATE", old=orphan), INDEX,
                              mutate=False)["response"]["allowed"] is True
    assert admission_response(_admission(orphan, operation="DELETE"), INDEX,
                              mutate=False)["response"]["allowed"] is True


def test_defaulting_patches_only_what_it_changed_at_the_objects_version() -> None:
    obj = _thanos(API_VERSION, {"query": {"ingress": {"host": "q.example"}},
                                "rule": {"replicas": 1}})
    response = admission_response(_admission(obj), INDEX, mutate=True)["response"]
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert patch == [{"op": "add", "path": "/spec/query/ingress/ingressClassName",
                      "value": DEFAULT_INGRESS_CLASS}]
    patched = jsonpatch.apply_patch(obj, patch)
    assert patched["spec"]["rule"] == {"replicas": 1}  # no class default written
    again = admission_response(_admission(patched), INDEX, mutate=True)["response"]
    assert again == {"uid": "u-1", "allowed": True}


def test_the_configurations_and_the_conversion_stanza_carry_the_ca() -> None:
    endpoint = WebhookEndpoint(ca_pem=b"CA", service_name="op", service_namespace="sys")
    crd = with_conversion_webhook(THANOS_VERSIONED_CRD, endpoint)
    assert crd["spec"]["conversion"] == {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"], "clientConfig": {
            "caBundle": base64.b64encode(b"CA").decode(),
            "service": {"name": "op", "namespace": "sys", "port": 443, "path": CONVERT_PATH}}}}
    assert THANOS_VERSIONED_CRD["spec"]["conversion"] == {"strategy": "None"}  # not mutated
    validating, mutating = webhook_configurations(
        [THANOS_VERSIONS], name="thanos", endpoint=endpoint,
        plurals={("monitoring.optk.dev", KIND): "thanoses"})
    assert validating["kind"] == "ValidatingWebhookConfiguration"
    hook = validating["webhooks"][0]
    assert hook["failurePolicy"] == "Fail"
    assert hook["timeoutSeconds"] == 5
    assert hook["matchPolicy"] == "Equivalent"
    assert hook["rules"][0]["apiVersions"] == ["v1alpha2"]
    assert hook["rules"][0]["resources"] == ["thanoses"]
    assert mutating["webhooks"][0]["failurePolicy"] == "Ignore"
    assert mutating["webhooks"][0]["clientConfig"]["service"]["path"] == "/mutate"


def test_certificates_round_trip_through_a_secret_and_files(tmp_path: Path) -> None:
    made = WebhookCertificates.generate(["127.0.0.1", "op.sys.svc"])
    assert "PRIVATE" not in repr(made)
    assert WebhookCertificates.from_secret(made.to_secret(name="w", namespace="sys")) == made
    assert WebhookCertificates.from_directory(made.write(tmp_path / "certs")) == made
    assert (tmp_path / "certs" / "tls.key").stat().st_mode & 0o777 == 0o600
    now = datetime.datetime.now(datetime.UTC)
    assert not made.due_for_rotation(now)
    assert made.due_for_rotation(made.not_after() - datetime.timedelta(days=1))
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "tls.crt").write_bytes(made.cert_pem)
    with pytest.raises(WebhookCertificateError, match=r"missing tls\.key, ca\.crt") as caught:
        WebhookCertificates.from_directory(tmp_path / "half")
    assert isinstance(caught.value, ReconcilerUsageError)
    with pytest.raises(WebhookCertificateError, match=r"Secret sys/w: missing ca\.crt"):
        WebhookCertificates.from_secret({"metadata": {"name": "w", "namespace": "sys"},
                                         "data": {"tls.crt": "eA==", "tls.key": "eA=="}})


def _post(server: WebhookServer, path: str, body: dict[str, Any], ca: bytes) -> dict[str, Any]:
    context = ssl.create_default_context(cadata=ca.decode())
    request = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:
        return json.loads(answer.read())  # type: ignore[no-any-return]


def test_the_server_answers_over_tls_and_rotates_without_a_restart() -> None:
    first = WebhookCertificates.generate(["127.0.0.1"])
    review = {"request": {"uid": "c", "desiredAPIVersion": API_VERSION_2,
                          "objects": [_thanos(API_VERSION, {})]}}
    with WebhookServer([THANOS_VERSIONS], certificates=first) as server:
        assert _post(server, "/convert", review, first.ca_pem)["response"]["result"] == {
            "status": "Success"}
        second = WebhookCertificates.generate(["127.0.0.1"])
        server.use(second)
        assert _post(server, "/convert", review, second.ca_pem)["response"]["uid"] == "c"
        with pytest.raises(urllib.error.URLError):
            _post(server, "/convert", review, first.ca_pem)  # the old CA no longer verifies
        with pytest.raises(urllib.error.HTTPError) as missing:
            _post(server, "/nowhere", review, second.ca_pem)
        assert missing.value.code == 404
        assert server.counts() == {"convert": 2}


def _broken(spec: Any) -> Any:
    raise RuntimeError("a bug in a conversion")


def test_a_function_that_raises_is_answered_500_and_the_server_keeps_serving() -> None:
    broken = Versions(group="monitoring.optk.dev", kind=KIND, hub="v1alpha2", versions=[
        ApiVersion(name="v1alpha1", spec=ThanosSpec, to_hub=_broken, from_hub=_broken),
        ApiVersion(name="v1alpha2", spec=ThanosSpecV1Alpha2)])
    certificates = WebhookCertificates.generate(["127.0.0.1"])
    review = {"request": {"uid": "c", "desiredAPIVersion": API_VERSION_2,
                          "objects": [_thanos(API_VERSION, {})]}}
    with WebhookServer([broken], certificates=certificates) as server:
        with pytest.raises(urllib.error.HTTPError) as failed:
            _post(server, "/convert", review, certificates.ca_pem)
        assert failed.value.code == 500
        same = {"request": {"uid": "d", "desiredAPIVersion": API_VERSION,
                            "objects": [_thanos(API_VERSION, {})]}}
        assert _post(server, "/convert", same, certificates.ca_pem)["response"]["uid"] == "d"
