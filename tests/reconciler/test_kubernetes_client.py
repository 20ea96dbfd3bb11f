"""``KubernetesClient`` against the embedded API server over HTTPS with the official client.

What users rely on: discovery resolves any served kind (and a CRD created at run time at once),
objects go in and out as plain dicts (official models accepted), lists carry kinds and page,
watches stream events and raise ``GoneError`` on 410, dry runs write nothing, and every failure
arrives as the reconciler's error tree with the ``Status`` data.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from reconciler import (
    AlreadyExistsError,
    ClientUsageError,
    ConflictError,
    GoneError,
    InvalidError,
    KubernetesClient,
    NotFoundError,
    TooManyRequestsError,
    UnauthorizedError,
)
from reconciler._base.errors import WatchSilentError
from reconciler.embedded import Faults
from tests.reconciler.conftest import Requests, install_crd

MakeCM = Callable[..., dict[str, Any]]


@pytest.mark.both_servers
def test_create_get_patch_replace_delete_round_trip(
    client: KubernetesClient, configmap: MakeCM, ns: str
) -> None:
    created = client.create(configmap("rt", a="1"))
    assert created["metadata"]["uid"]
    assert client.get("v1", "ConfigMap", "rt", namespace=ns)["data"] == {"a": "1"}

    patched = client.patch(
        "v1", "ConfigMap", "rt", {"data": {"b": "2"}},
        patch_type="application/merge-patch+json", namespace=ns,
    )
    assert patched["data"] == {"a": "1", "b": "2"}

    replaced = client.replace({**patched, "data": {"c": "3"}})
    assert replaced["data"] == {"c": "3"}

    client.delete("v1", "ConfigMap", "rt", namespace=ns)
    with pytest.raises(NotFoundError) as caught:
        client.get("v1", "ConfigMap", "rt", namespace=ns)
    assert caught.value.ref is not None
    assert caught.value.ref.name == "rt"
    assert caught.value.reason == "NotFound"


@pytest.mark.both_servers
def test_official_models_are_accepted_at_the_edge(client: KubernetesClient, ns: str) -> None:
    model = k8s.V1ConfigMap(
        api_version="v1", kind="ConfigMap",
        metadata=k8s.V1ObjectMeta(name="from-model", namespace=ns), data={"k": "v"},
    )
    created = client.create(model)
    assert isinstance(created, dict)
    assert created["data"] == {"k": "v"}


@pytest.mark.both_servers
def test_errors_carry_status_data(client: KubernetesClient, configmap: MakeCM, ns: str) -> None:
    client.create(configmap("dup"))
    with pytest.raises(AlreadyExistsError) as exists:
        client.create(configmap("dup"))
    assert exists.value.code == 409
    assert exists.value.reason == "AlreadyExists"

    with pytest.raises(InvalidError) as invalid:
        client.create(configmap("Not_A_Valid_Name"))
    assert invalid.value.code == 422
    assert any(c.field == "metadata.name" for c in invalid.value.causes)

    live = client.get("v1", "ConfigMap", "dup", namespace=ns)
    client.patch("v1", "ConfigMap", "dup", {"data": {"x": "1"}},
                 patch_type="application/merge-patch+json", namespace=ns)
    with pytest.raises(ConflictError) as stale:
        client.replace({**live, "data": {"x": "2"}})
    assert not isinstance(stale.value, AlreadyExistsError)


@pytest.mark.both_servers
def test_list_fills_kinds_selects_and_pages(
    client: KubernetesClient, configmap: MakeCM, ns: str
) -> None:
    for i in range(5):
        obj = configmap(f"item-{i}")
        obj["metadata"]["labels"] = {"parity": "even" if i % 2 == 0 else "odd"}
        client.create(obj)
    body = client.list("v1", "ConfigMap", namespace=ns, label_selector="parity=even")
    assert sorted(i["metadata"]["name"] for i in body["items"]) == ["item-0", "item-2", "item-4"]
    assert all(i["kind"] == "ConfigMap" and i["apiVersion"] == "v1" for i in body["items"])

    first = client.list("v1", "ConfigMap", namespace=ns, limit=2)
    assert len(first["items"]) == 2
    token = first["metadata"]["continue"]
    rest = client.list("v1", "ConfigMap", namespace=ns, limit=10, continue_token=token)
    names = {i["metadata"]["name"] for i in first["items"] + rest["items"]}
    assert {f"item-{i}" for i in range(5)} <= names


@pytest.mark.both_servers
def test_dry_run_writes_nothing(client: KubernetesClient, configmap: MakeCM, ns: str) -> None:
    returned = client.create(configmap("dry"), dry_run=True)
    assert returned["metadata"]["name"] == "dry"
    with pytest.raises(NotFoundError):
        client.get("v1", "ConfigMap", "dry", namespace=ns)


@pytest.mark.both_servers
def test_unknown_kind_is_not_served_and_a_crd_is_usable_at_once(client: KubernetesClient) -> None:
    group = f"g{uuid.uuid4().hex[:8]}.example.com"
    api_version = f"{group}/v1"
    assert not client.is_served(api_version, "Gadget")
    with pytest.raises(NotFoundError):
        client.get(api_version, "Gadget", "x", namespace="default")

    install_crd(client, group=group, kind="Gadget", plural="gadgets")
    assert client.is_namespaced(api_version, "Gadget")
    created = client.create({"apiVersion": api_version, "kind": "Gadget",
                             "metadata": {"name": "g1", "namespace": "default"}, "spec": {}})
    assert created["kind"] == "Gadget"


@pytest.mark.both_servers
def test_discovery_is_cached(client: KubernetesClient, requests: Callable[[], Requests],
                             configmap: MakeCM, ns: str) -> None:
    client.create(configmap("cached"))
    with requests() as r:
        for _ in range(3):
            client.get("v1", "ConfigMap", "cached", namespace=ns)
    assert r.count("get") == 3  # the object reads only: no discovery request per call


@pytest.mark.both_servers
def test_namespaced_kind_without_namespace_is_a_usage_error(client: KubernetesClient) -> None:
    with pytest.raises(ClientUsageError, match="namespaced"):
        client.get("v1", "ConfigMap", "x")
    with pytest.raises(ValueError, match="patch type"):
        client.patch("v1", "ConfigMap", "x", {}, patch_type="text/plain", namespace="default")


@pytest.mark.both_servers
def test_watch_streams_events(client: KubernetesClient, configmap: MakeCM, ns: str) -> None:
    start = client.list("v1", "ConfigMap", namespace=ns)["metadata"]["resourceVersion"]
    client.create(configmap("w1"))
    client.patch("v1", "ConfigMap", "w1", {"data": {"a": "b"}},
                 patch_type="application/merge-patch+json", namespace=ns)
    client.delete("v1", "ConfigMap", "w1", namespace=ns)
    seen = []
    for event in client.watch("v1", "ConfigMap", namespace=ns, resource_version=start,
                              timeout_seconds=2, allow_bookmarks=False):
        seen.append((event["type"], event["object"]["metadata"]["name"]))
        assert event["object"]["kind"] == "ConfigMap"
        if event["type"] == "DELETED":
            break
    assert seen == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]


def test_watch_expired_raises_gone(client: KubernetesClient, kube_api: Any, ns: str) -> None:
    with kube_api.faults(Faults(watch_gone=True, resources={"configmaps"})), \
            pytest.raises(GoneError) as gone:
        for _ in client.watch("v1", "ConfigMap", namespace=ns, resource_version="1",
                              timeout_seconds=2):
            pass
    assert gone.value.code == 410


def test_throttling_carries_retry_after(
    client: KubernetesClient, kube_api: Any, configmap: MakeCM, ns: str
) -> None:
    client.create(configmap("throttled"))
    # Writes are not retried by the official client's transport: the 429 reaches us at once.
    with kube_api.faults(Faults(throttle_rate=1.0, retry_after=7, verbs={"patch"})), \
            pytest.raises(TooManyRequestsError) as throttled:
        client.patch("v1", "ConfigMap", "throttled", {"data": {"a": "b"}},
                     patch_type="application/merge-patch+json", namespace=ns)
    assert throttled.value.retry_after == 7.0


@pytest.mark.both_servers
def test_a_silent_watch_ends_at_the_inactivity_timeout(client: KubernetesClient, ns: str) -> None:
    rv = client.list("v1", "ConfigMap", namespace=ns)["metadata"]["resourceVersion"]
    stream = client.watch("v1", "ConfigMap", namespace=ns, resource_version=rv,
                          allow_bookmarks=False, inactivity_timeout=0.3)
    with pytest.raises(WatchSilentError) as dead:  # an ApiError with code 0
        next(iter(stream))
    assert dead.value.code == 0
    assert dead.value.silence == 0.3
    assert "sent nothing for 0.3s" in str(dead.value)


@pytest.mark.both_servers
def test_the_token_is_read_once_a_second_and_a_new_token_is_used(kube_api: Any, ns: str) -> None:
    # The kubeconfig loader's refresh hook re-applies the whole configuration on every read of
    # the token; the client reads it at most once a second, yet a rotated token is still used.
    api_client = kube_api.api_client()
    config = api_client.configuration
    hook_runs: list[float] = []
    config.refresh_api_key_hook = lambda conf: hook_runs.append(time.monotonic())
    client = KubernetesClient(api_client)
    started = time.monotonic()
    for _ in range(20):
        client.list("v1", "ConfigMap", namespace=ns)
    assert 1 <= len(hook_runs) <= 1 + int(time.monotonic() - started) + 1

    [key] = config.api_key  # "authorization" here; "BearerToken" from a kubeconfig
    token = config.api_key[key]
    config.api_key[key] = "not-the-token"
    time.sleep(1.1)
    with pytest.raises(UnauthorizedError):
        client.list("v1", "ConfigMap", namespace=ns)
    config.api_key[key] = token
    time.sleep(1.1)
    assert client.list("v1", "ConfigMap", namespace=ns)["items"] == []
