"""Fault injection and request accounting, switched at run time from Python."""

from __future__ import annotations

import json
import time

import kubernetes.client
import pytest
import urllib3
from kubernetes.client import ApiException

from reconciler.embedded import EmbeddedApiServer, Faults, RequestKey
from tests.embedded.helpers import RawClient, configmap


@pytest.fixture(scope="module")
def server() -> EmbeddedApiServer:
    """A private server: faults must not leak into other tests' requests."""
    with EmbeddedApiServer() as running:
        yield running  # type: ignore[misc]


def test_faults_validate_their_rates() -> None:
    with pytest.raises(ValueError, match="error_rate"):
        Faults(error_rate=1.5)
    with pytest.raises(ValueError, match="latency"):
        Faults(latency=-1)


def test_latency_is_added(server: EmbeddedApiServer) -> None:
    raw = RawClient(server)
    with server.faults(Faults(latency=0.2)):
        began = time.monotonic()
        assert raw.request("GET", "/api/v1/namespaces/default").status == 200
        assert time.monotonic() - began >= 0.2
    began = time.monotonic()
    raw.request("GET", "/api/v1/namespaces/default")
    assert time.monotonic() - began < 0.2


@pytest.mark.parametrize("code", [500, 503])
def test_server_errors_at_full_rate(server: EmbeddedApiServer, code: int) -> None:
    raw = RawClient(server)
    with server.faults(Faults(error_rate=1.0, error_code=code)):
        status, body = raw.json("GET", "/api/v1/namespaces/default")
    assert status == code
    assert body["code"] == code
    assert raw.request("GET", "/api/v1/namespaces/default").status == 200


def test_throttling_sends_retry_after(server: EmbeddedApiServer) -> None:
    raw = RawClient(server)
    with server.faults(Faults(throttle_rate=1.0, retry_after=3)):
        response = raw.request("GET", "/api/v1/namespaces/default")
    assert response.status == 429
    assert response.headers["Retry-After"] == "3"
    body = json.loads(response.data)
    assert body["reason"] == "TooManyRequests"
    assert body["details"]["retryAfterSeconds"] == 3


def test_partial_error_rate_is_reproducible(server: EmbeddedApiServer) -> None:
    raw = RawClient(server)

    def run() -> list[int]:
        with server.faults(Faults(error_rate=0.5, seed=7)):
            return [raw.request("GET", "/api/v1/namespaces/default").status for _ in range(20)]

    first = run()
    assert 500 in first
    assert 200 in first
    assert run() == first


def test_faults_limited_to_verbs_and_resources(server: EmbeddedApiServer) -> None:
    raw = RawClient(server)
    with server.faults(Faults(error_rate=1.0, verbs={"create"}, resources={"configmaps"})):
        assert raw.request("GET", "/api/v1/namespaces/default").status == 200
        status, _ = raw.json("POST", "/api/v1/namespaces/default/configmaps",
                             body=configmap("faulted"))
        assert status == 500
        status, _ = raw.json("POST", "/api/v1/namespaces/default/secrets",
                             body={"metadata": {"name": "fine"}})
        assert status == 201


def test_discovery_is_never_faulted(server: EmbeddedApiServer) -> None:
    raw = RawClient(server)
    with server.faults(Faults(error_rate=1.0)):
        assert raw.request("GET", "/api").status == 200
        assert raw.request("GET", "/apis/apps/v1").status == 200


def test_watch_cut_after_events(server: EmbeddedApiServer) -> None:
    raw = RawClient(server)
    start = server.resource_version
    for i in range(3):
        raw.json("POST", "/api/v1/namespaces/default/configmaps", body=configmap(f"cut-{i}"))
    with server.faults(Faults(watch_max_events=2)):
        response = raw.request("GET", "/api/v1/namespaces/default/configmaps?watch=1"
                                      f"&resourceVersion={start}&timeoutSeconds=10")
    assert len(response.data.decode().splitlines()) == 2


def test_watch_cut_after_seconds(server: EmbeddedApiServer) -> None:
    raw = RawClient(server)
    with server.faults(Faults(watch_max_seconds=0.3)):
        began = time.monotonic()
        raw.request("GET", "/api/v1/namespaces/default/configmaps?watch=1"
                           f"&resourceVersion={server.resource_version}&timeoutSeconds=10")
    assert time.monotonic() - began < 2


def test_forced_gone_on_watch(server: EmbeddedApiServer) -> None:
    raw = RawClient(server)
    with server.faults(Faults(watch_gone=True)):
        response = raw.request("GET", "/api/v1/namespaces/default/configmaps?watch=1"
                                      f"&resourceVersion={server.resource_version}")
    events = [json.loads(x) for x in response.data.decode().splitlines()]
    assert len(events) == 1
    assert events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410
    assert events[0]["object"]["reason"] == "Expired"


def test_official_client_sees_injected_errors(server: EmbeddedApiServer) -> None:
    with (
        server.api_client() as client,
        server.faults(Faults(error_rate=1.0, error_code=503)),
        pytest.raises(ApiException) as caught,
    ):
        kubernetes.client.CoreV1Api(client).read_namespace("default")
    assert caught.value.status == 503


def test_accounting_by_verb_resource_and_code(server: EmbeddedApiServer) -> None:
    raw = RawClient(server)
    server.reset_request_counts()
    raw.json("POST", "/api/v1/namespaces/default/configmaps", body=configmap("acct"))
    raw.json("POST", "/api/v1/namespaces/default/configmaps", body=configmap("acct"))
    raw.json("GET", "/api/v1/namespaces/default/configmaps/acct")
    raw.json("PATCH", "/apis/apps/v1/namespaces/default/deployments/none",
             content_type="application/merge-patch+json", body={})
    raw.json("GET", "/apis/apps/v1/deployments")
    raw.json("DELETE", "/api/v1/namespaces/default/configmaps/acct")
    counts = server.request_counts()
    assert counts == {"get": 1, "list": 1, "watch": 0, "create": 2, "update": 0, "patch": 1,
                      "delete": 1, "deletecollection": 0}
    breakdown = server.request_breakdown()
    assert breakdown[RequestKey(verb="create", resource="configmaps", code=201)] == 1
    assert breakdown[RequestKey(verb="create", resource="configmaps", code=409)] == 1
    assert breakdown[RequestKey(verb="patch", resource="deployments.apps", code=404)] == 1
    status, body = raw.json("GET", "/debug/optk/requests")
    assert status == 200
    assert body["byVerb"]["create"] == 2
    assert {"verb": "create", "resource": "configmaps", "code": 409, "count": 1} in (
        body["breakdown"]
    )


def test_a_lost_answer_is_a_write_carried_out_and_not_answered(server: EmbeddedApiServer) -> None:
    raw = RawClient(server)
    with server.faults(Faults(lose_rate=1.0)):
        assert raw.request("GET", "/api/v1/namespaces/default").status == 200  # reads answered
        with pytest.raises(urllib3.exceptions.ProtocolError):  # closed with no answer
            raw.pool.request("POST", server.url + "/api/v1/namespaces/default/configmaps",
                             body=json.dumps(configmap("lost", a="1")).encode(),
                             headers={"Authorization": f"Bearer {server.token}",
                                      "Content-Type": "application/json"}, retries=False)
    status, live = raw.json("GET", "/api/v1/namespaces/default/configmaps/lost")
    assert status == 200  # the create happened
    assert live["data"] == {"a": "1"}
    raw.request("DELETE", "/api/v1/namespaces/default/configmaps/lost")
