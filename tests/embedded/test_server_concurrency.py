"""Concurrent clients: optimistic concurrency loses no update, and watches see every write once,
in resourceVersion order."""

from __future__ import annotations

import json
import threading

import kubernetes.client
from kubernetes.client import ApiException

from reconciler.embedded import EmbeddedApiServer
from tests.embedded.helpers import RawClient, configmap

WORKERS = 6
INCREMENTS = 15


def test_read_modify_write_with_conflicts_loses_nothing(
    kube_api: EmbeddedApiServer, kube_namespace: str
) -> None:
    with kube_api.api_client() as client:
        kubernetes.client.CoreV1Api(client).create_namespaced_config_map(
            kube_namespace, configmap("counter", n="0"))
    def worker() -> None:
        with kube_api.api_client() as client:
            core = kubernetes.client.CoreV1Api(client)
            done = 0
            while done < INCREMENTS:
                current = core.read_namespaced_config_map("counter", kube_namespace)
                current.data["n"] = str(int(current.data["n"]) + 1)
                try:
                    core.replace_namespaced_config_map("counter", kube_namespace, current)
                except ApiException as exc:
                    if exc.status != 409:  # only a stale read may fail: read again and retry
                        raise
                    continue
                done += 1

    threads = [threading.Thread(target=worker) for _ in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with kube_api.api_client() as client:
        final = kubernetes.client.CoreV1Api(client).read_namespaced_config_map(
            "counter", kube_namespace)
    assert final.data["n"] == str(WORKERS * INCREMENTS)


def test_a_watch_sees_concurrent_writes_once_and_in_order(
    kube_api: EmbeddedApiServer, raw: RawClient, kube_namespace: str
) -> None:
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps"
    start = kube_api.resource_version
    stream = raw.request("GET", f"{path}?watch=1&resourceVersion={start}&timeoutSeconds=2",
                         preload=False)

    def writer(index: int) -> None:
        own = RawClient(kube_api)
        for i in range(10):
            own.json("POST", path, body=configmap(f"w{index}-{i}"))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    events = [json.loads(line) for line in stream.data.decode().splitlines()]
    names = [e["object"]["metadata"]["name"] for e in events]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert sorted(names) == sorted(f"w{i}-{j}" for i in range(4) for j in range(10))
    assert versions == sorted(versions)
    assert len(set(versions)) == len(versions)
