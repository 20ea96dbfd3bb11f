"""Typed list/watch options: one ``ListOptions`` value through the client, the recorder and
the informers' paging, against the embedded server."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler import KubernetesClient
from reconciler._cache.informers import Informer, WatchOptions
from reconciler._cache.recording import RecordingClient
from reconciler._client.protocol import ListOptions


def _cm(ns: str, name: str, parity: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": {"parity": parity}}}


def _names(body: dict[str, Any]) -> list[str]:
    return sorted(item["metadata"]["name"] for item in body["items"])


def test_keywords_are_applied_over_the_options_value() -> None:
    base = ListOptions(label_selector="a=b", limit=5)
    assert ListOptions.of(base, {}) is base
    assert ListOptions.of(None, {}) == ListOptions()
    merged = ListOptions.of(base, {"limit": 2, "continue_token": "t"})
    assert merged == ListOptions(label_selector="a=b", limit=2, continue_token="t")
    with pytest.raises(TypeError):
        ListOptions.of(base, {"labels": "x"})  # type: ignore[typeddict-unknown-key]


@pytest.mark.both_servers
def test_a_list_pages_and_filters_by_one_options_value(client: KubernetesClient, ns: str) -> None:
    for index in range(5):
        client.create(_cm(ns, f"cm-{index}", "even" if index % 2 == 0 else "odd"))
    recorder = RecordingClient(client)
    even = recorder.list("v1", "ConfigMap", ListOptions(label_selector="parity=even"),
                         namespace=ns)
    assert _names(even) == ["cm-0", "cm-2", "cm-4"]
    first = client.list("v1", "ConfigMap", ListOptions(limit=2), namespace=ns)
    assert len(first["items"]) == 2
    token = first["metadata"]["continue"]
    rest = client.list("v1", "ConfigMap", ListOptions(limit=10, continue_token=token),
                       namespace=ns)
    assert _names(first) + _names(rest) == [f"cm-{i}" for i in range(5)]


@pytest.mark.both_servers
def test_a_watch_resumes_after_the_options_resource_version(
    client: KubernetesClient, ns: str
) -> None:
    start = client.list("v1", "ConfigMap", namespace=ns)["metadata"]["resourceVersion"]
    client.create(_cm(ns, "after", "odd"))
    options = ListOptions(resource_version=start, timeout_seconds=1, allow_bookmarks=False,
                          inactivity_timeout=5.0)
    events = [(e["type"], e["object"]["metadata"]["name"])
              for e in RecordingClient(client).watch("v1", "ConfigMap", options, namespace=ns)]
    assert events == [("ADDED", "after")]


@pytest.mark.both_servers
def test_an_informer_lists_page_by_page(
    kube_api: Any, client: KubernetesClient, ns: str
) -> None:
    for index in range(7):
        client.create(_cm(ns, f"cm-{index}", "odd"))
    lists_before = kube_api.request_counts()["list"]
    informer = Informer(client, "v1", "ConfigMap", namespace=ns,
                        options=WatchOptions(page_size=3)).start()
    try:
        assert informer.wait_synced(10)
        keys = informer.cache.keys()
        assert sorted(name for _, name in keys) == [f"cm-{i}" for i in range(7)]
        assert informer.stats.lists == 1
        assert kube_api.request_counts()["list"] - lists_before == 3  # pages of 3, 3 and 1
    finally:
        informer.stop()
