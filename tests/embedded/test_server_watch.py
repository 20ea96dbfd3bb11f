"""Watch streams: replay from a version, selector transitions, bookmarks, timeouts and 410.

Expectations come from ``watch.json`` and ``watch-410-after-restart.json``.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import kubernetes.client
import pytest
import urllib3
from kubernetes import watch

from reconciler.embedded import EmbeddedApiServer
from reconciler.embedded._server import EmbeddedApiServer as ServerClass
from tests.embedded.helpers import RawClient, configmap


def _events(raw: RawClient, path: str) -> list[dict[str, Any]]:
    response = raw.request("GET", path, preload=False)
    assert response.status == 200
    lines = [json.loads(line) for line in response.data.decode().splitlines() if line]
    response.release_conn()
    return lines


def test_watch_replays_history_after_a_version(
    raw: RawClient, core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    start = core.list_namespaced_config_map(kube_namespace).metadata.resource_version
    core.create_namespaced_config_map(kube_namespace, configmap("a", k="1"))
    core.patch_namespaced_config_map("a", kube_namespace, {"data": {"k": "2"}})
    core.delete_namespaced_config_map("a", kube_namespace)
    events = _events(raw, f"/api/v1/namespaces/{kube_namespace}/configmaps?watch=1"
                          f"&resourceVersion={start}&timeoutSeconds=1")
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions)
    assert events[0]["object"]["kind"] == "ConfigMap"


def test_watch_without_version_starts_with_synthetic_added(
    raw: RawClient, core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    core.create_namespaced_config_map(kube_namespace, configmap("existing"))
    for query in ("", "&resourceVersion=0"):
        events = _events(raw, f"/api/v1/namespaces/{kube_namespace}/configmaps?watch=1"
                              f"&timeoutSeconds=1{query}")
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
            ("ADDED", "existing")
        ]


def test_label_selector_watch_sees_objects_enter_and_leave(
    raw: RawClient, core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    start = core.list_namespaced_config_map(kube_namespace).metadata.resource_version
    core.create_namespaced_config_map(kube_namespace, configmap("w"))
    core.patch_namespaced_config_map("w", kube_namespace, {"metadata": {"labels": {"p": "two"}}})
    core.patch_namespaced_config_map("w", kube_namespace, {"data": {"x": "1"}})
    core.patch_namespaced_config_map("w", kube_namespace, {"metadata": {"labels": {"p": None}}})
    events = _events(raw, f"/api/v1/namespaces/{kube_namespace}/configmaps?watch=1"
                          f"&resourceVersion={start}&labelSelector=p%3Dtwo&timeoutSeconds=1")
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    # as recorded (watch.json, watchWithLabelSelector): the last matching state, at the new version
    assert events[-1]["object"]["metadata"]["labels"] == {"p": "two"}
    assert int(events[-1]["object"]["metadata"]["resourceVersion"]) > int(
        events[-2]["object"]["metadata"]["resourceVersion"])


def test_field_selector_watch(
    raw: RawClient, core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    start = core.list_namespaced_config_map(kube_namespace).metadata.resource_version
    core.create_namespaced_config_map(kube_namespace, configmap("one"))
    core.create_namespaced_config_map(kube_namespace, configmap("two"))
    events = _events(raw, f"/api/v1/namespaces/{kube_namespace}/configmaps?watch=1"
                          f"&resourceVersion={start}&fieldSelector=metadata.name%3Dtwo"
                          "&timeoutSeconds=1")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "two")]


def test_watch_ends_at_timeout_seconds(
    kube_api: EmbeddedApiServer, raw: RawClient, kube_namespace: str
) -> None:
    began = time.monotonic()
    events = _events(raw, f"/api/v1/namespaces/{kube_namespace}/configmaps?watch=1"
                          f"&resourceVersion={kube_api.resource_version}&timeoutSeconds=1")
    elapsed = time.monotonic() - began
    assert 0.9 <= elapsed < 3
    assert all(e["type"] != "ERROR" for e in events)


def test_watch_from_a_compacted_version_gets_one_410_error_event() -> None:
    with ServerClass() as server:
        raw = RawClient(server)
        old = server.resource_version
        raw.json("POST", "/api/v1/namespaces/default/configmaps", body=configmap("x"))
        floor = server.compact()
        events = _events(raw, f"/api/v1/namespaces/default/configmaps?watch=1"
                              f"&resourceVersion={old}&timeoutSeconds=5")
        assert events == [{"type": "ERROR", "object": {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"too old resource version: {old} ({floor})", "reason": "Expired",
            "code": 410,
        }}]
        fresh = _events(raw, f"/api/v1/namespaces/default/configmaps?watch=1"
                             f"&resourceVersion={floor}&timeoutSeconds=1")
        assert fresh == []


def test_bookmarks_carry_only_the_resource_version() -> None:
    with ServerClass(bookmark_interval=0.3) as server:
        raw = RawClient(server)
        events = _events(raw, "/api/v1/namespaces/default/configmaps?watch=1"
                              f"&resourceVersion={server.resource_version}"
                              "&allowWatchBookmarks=true&timeoutSeconds=1")
        bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
        assert bookmarks
        assert bookmarks[0]["object"] == {
            "kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"resourceVersion": str(server.resource_version),
                         "creationTimestamp": None},
        }


def test_watch_list_ends_initial_events_with_an_annotated_bookmark(
    raw: RawClient, core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    core.create_namespaced_config_map(kube_namespace, configmap("initial"))
    events = _events(raw, f"/api/v1/namespaces/{kube_namespace}/configmaps?watch=1"
                          "&sendInitialEvents=true&allowWatchBookmarks=true"
                          "&resourceVersionMatch=NotOlderThan&timeoutSeconds=1")
    assert events[0]["type"] == "ADDED"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {
        "k8s.io/initial-events-end": "true"
    }


def test_official_watch_over_all_namespaces(
    kube_api: EmbeddedApiServer, core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    start = core.list_config_map_for_all_namespaces().metadata.resource_version
    core.create_namespaced_config_map(kube_namespace, configmap("everywhere"))
    stream = watch.Watch()
    names = []
    for event in stream.stream(core.list_config_map_for_all_namespaces,
                               resource_version=start, timeout_seconds=5):
        meta = event["object"].metadata
        # earlier tests' namespaces are still being emptied (over time, as a real server does)
        if meta.namespace == kube_namespace:
            names.append((event["type"], meta.namespace, meta.name))
            stream.stop()
    assert names == [("ADDED", kube_namespace, "everywhere")]


@pytest.mark.parametrize("watchers", [1, 5])
def test_every_watcher_gets_every_event(
    raw: RawClient, core: kubernetes.client.CoreV1Api, kube_namespace: str, watchers: int
) -> None:
    start = core.list_namespaced_config_map(kube_namespace).metadata.resource_version
    responses = [
        raw.request("GET", f"/api/v1/namespaces/{kube_namespace}/configmaps?watch=1"
                           f"&resourceVersion={start}&timeoutSeconds=1", preload=False)
        for _ in range(watchers)
    ]
    for i in range(3):
        core.create_namespaced_config_map(kube_namespace, configmap(f"m{i}"))
    for response in responses:
        lines = [json.loads(x) for x in response.data.decode().splitlines() if x]
        assert [e["object"]["metadata"]["name"] for e in lines] == ["m0", "m1", "m2"]


def test_active_watches_are_counted_and_released() -> None:
    with ServerClass() as server:
        raw = RawClient(server)
        assert server.active_watches() == 0
        stream = raw.request("GET", "/api/v1/namespaces/default/configmaps?watch=1"
                                    f"&resourceVersion={server.resource_version}"
                                    "&timeoutSeconds=1", preload=False)
        deadline = time.monotonic() + 5
        while server.active_watches() != 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        code, body = raw.json("GET", "/debug/optk/requests")
        assert code == 200
        assert body["activeWatches"] == 1
        stream.read()
        stream.release_conn()
        while server.active_watches() != 0 or server.request_counts()["watch"] != 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)


def test_an_open_watch_is_counted_when_it_starts_and_only_once() -> None:
    with ServerClass() as server:
        raw = RawClient(server)
        stream = raw.request("GET", "/api/v1/namespaces/default/configmaps?watch=1"
                                    f"&resourceVersion={server.resource_version}"
                                    "&timeoutSeconds=1", preload=False)
        deadline = time.monotonic() + 5
        while server.request_counts()["watch"] != 1:  # while the stream is still open
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert server.active_watches() == 1
        stream.read()
        stream.release_conn()
        while server.active_watches() != 0:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert server.request_counts()["watch"] == 1
        [key] = [k for k in server.request_breakdown() if k.verb == "watch"]
        assert (key.resource, key.code) == ("configmaps", 200)
        # A watch refused before its stream starts is counted with its code, once.
        code, _ = raw.json("GET", "/api/v1/namespaces/default/configmaps?watch=1"
                                  "&resourceVersion=abc")
        assert code == 400
        assert server.request_counts()["watch"] == 2


def test_stopping_the_server_ends_open_watches() -> None:
    server = ServerClass().start()
    raw = RawClient(server)
    stream = raw.request("GET", "/api/v1/namespaces/default/configmaps?watch=1", preload=False)
    ended = threading.Event()

    def reader() -> None:
        try:
            for _ in stream:
                pass
        except urllib3.exceptions.ProtocolError:
            pass  # the server aborted the stream: the expected ending
        ended.set()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while server.active_watches() != 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    server.stop()
    assert ended.wait(5)


def test_watchers_joining_during_a_burst_of_writes_get_each_event_once_in_order(
    raw: RawClient, core: kubernetes.client.CoreV1Api, kube_namespace: str
) -> None:
    # A watcher that starts at an old version while writes keep coming receives the replay,
    # then the live ones as they are committed: none lost, none twice, in resourceVersion order.
    core.create_namespaced_config_map(kube_namespace, configmap("burst", n="start"))
    start = core.list_namespaced_config_map(kube_namespace).metadata.resource_version
    writes = 120

    def write() -> None:
        for n in range(writes):
            core.patch_namespaced_config_map("burst", kube_namespace, {"data": {"n": str(n)}})

    writer = threading.Thread(target=write)
    writer.start()
    responses = []
    for _ in range(4):
        time.sleep(0.05)
        responses.append(raw.request(
            "GET", f"/api/v1/namespaces/{kube_namespace}/configmaps?watch=1"
                   f"&resourceVersion={start}&timeoutSeconds=3", preload=False))
    writer.join()
    for response in responses:
        events = [json.loads(x) for x in response.data.decode().splitlines() if x]
        assert [e["object"]["data"]["n"] for e in events] == [str(n) for n in range(writes)]
        versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
        assert versions == sorted(set(versions))
