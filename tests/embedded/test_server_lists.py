"""Lists: selectors, pagination with continue tokens, and lists at an exact resourceVersion.

Shapes follow ``list.json`` and ``watch-410-gone.json`` of the real-apiserver recordings.
"""

from __future__ import annotations

import kubernetes.client
import pytest
from kubernetes.client import ApiException

from reconciler.embedded import EmbeddedApiServer
from tests.embedded.helpers import RawClient, configmap


def _labelled(name: str, **labels: str) -> dict[str, object]:
    body = configmap(name)
    body["metadata"]["labels"] = labels  # type: ignore[index]
    return body


@pytest.fixture
def five(core: kubernetes.client.CoreV1Api, kube_namespace: str) -> str:
    for i in range(5):
        labels = {"group": "list", "i": str(i)}
        if i % 2:
            labels["odd"] = "yes"
        core.create_namespaced_config_map(kube_namespace, _labelled(f"list-{i}", **labels))
    core.create_namespaced_config_map(kube_namespace, _labelled("other", group="else"))
    return kube_namespace


def _names(core: kubernetes.client.CoreV1Api, ns: str, **kwargs: object) -> list[str]:
    return [i.metadata.name for i in core.list_namespaced_config_map(ns, **kwargs).items]


@pytest.mark.parametrize(("selector", "expected"), [
    ("group=list", ["list-0", "list-1", "list-2", "list-3", "list-4"]),
    ("group==else", ["other"]),
    ("group!=list", ["other"]),
    ("i in (0,2),group", ["list-0", "list-2"]),
    ("i notin (0,1,2)", ["list-3", "list-4", "other"]),
    ("odd", ["list-1", "list-3"]),
    ("!odd,group=list", ["list-0", "list-2", "list-4"]),
])
def test_label_selectors(
    core: kubernetes.client.CoreV1Api, five: str, selector: str, expected: list[str]
) -> None:
    assert _names(core, five, label_selector=selector) == expected


def test_field_selectors_on_name_and_namespace(
    core: kubernetes.client.CoreV1Api, five: str
) -> None:
    assert _names(core, five, field_selector="metadata.name=list-1") == ["list-1"]
    assert "list-1" not in _names(core, five, field_selector="metadata.name!=list-1")
    everywhere = core.list_config_map_for_all_namespaces(
        field_selector=f"metadata.namespace={five},metadata.name=other"
    )
    assert [(i.metadata.namespace, i.metadata.name) for i in everywhere.items] == [
        (five, "other")
    ]


def test_unsupported_field_selector_is_bad_request(raw: RawClient, five: str) -> None:
    code, body = raw.json("GET", f"/api/v1/namespaces/{five}/configmaps?fieldSelector=data.x=1")
    assert code == 400
    assert body["reason"] == "BadRequest"
    assert body["message"] == "field label not supported: data.x"


def test_pagination_with_limit_and_continue(core: kubernetes.client.CoreV1Api, five: str) -> None:
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        page = core.list_namespaced_config_map(five, limit=2, _continue=token)
        seen += [i.metadata.name for i in page.items]
        pages += 1
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 6 - len(seen)
    assert pages == 3
    assert seen == ["list-0", "list-1", "list-2", "list-3", "list-4", "other"]


def test_pages_are_a_consistent_snapshot(core: kubernetes.client.CoreV1Api, five: str) -> None:
    first = core.list_namespaced_config_map(five, limit=2)
    core.delete_namespaced_config_map("list-3", five)
    core.create_namespaced_config_map(five, configmap("list-9"))
    rest = core.list_namespaced_config_map(five, limit=10, _continue=first.metadata._continue)
    assert [i.metadata.name for i in rest.items] == ["list-2", "list-3", "list-4", "other"]
    assert rest.metadata.resource_version == first.metadata.resource_version


def test_list_items_carry_no_kind(raw: RawClient, five: str) -> None:
    code, body = raw.json("GET", f"/api/v1/namespaces/{five}/configmaps?labelSelector=i%3D0")
    assert code == 200
    assert body["kind"] == "ConfigMapList"
    assert body["apiVersion"] == "v1"
    assert "kind" not in body["items"][0]
    assert "apiVersion" not in body["items"][0]


def test_exact_list_at_an_old_version_shows_the_old_state(
    core: kubernetes.client.CoreV1Api, five: str
) -> None:
    before = core.list_namespaced_config_map(five).metadata.resource_version
    core.delete_namespaced_config_map("list-0", five)
    core.patch_namespaced_config_map("list-1", five, {"data": {"new": "1"}})
    old = core.list_namespaced_config_map(
        five, resource_version=before, resource_version_match="Exact"
    )
    assert old.metadata.resource_version == before
    assert "list-0" in [i.metadata.name for i in old.items]
    assert not next(i for i in old.items if i.metadata.name == "list-1").data


def test_list_and_continue_older_than_the_window_are_expired() -> None:
    with EmbeddedApiServer() as server, server.api_client() as client:
        core = kubernetes.client.CoreV1Api(client)
        raw = RawClient(server)
        for name in ("a", "b", "c"):
            core.create_namespaced_config_map("default", configmap(name))
        page = core.list_namespaced_config_map("default", limit=1)
        old = page.metadata.resource_version
        core.create_namespaced_config_map("default", configmap("after"))
        server.compact()
        for query in (f"resourceVersion={old}&resourceVersionMatch=Exact",
                      f"resourceVersion={old}&limit=1"):
            code, body = raw.json("GET", f"/api/v1/namespaces/default/configmaps?{query}")
            assert code == 410
            assert body["reason"] == "Expired"
            assert body["message"] == "The resourceVersion for the provided list is too old."
        code, body = raw.json("GET", "/api/v1/namespaces/default/configmaps?limit=1&continue="
                              f"{page.metadata._continue}")
        assert code == 410
        assert body["message"].startswith("The provided continue parameter is too old")
        assert body["metadata"]["continue"]
        not_older = core.list_namespaced_config_map(
            "default", resource_version=old, resource_version_match="NotOlderThan"
        )
        assert int(not_older.metadata.resource_version) > int(old)
        with pytest.raises(ApiException):
            core.list_namespaced_config_map("default", resource_version=old,
                                            resource_version_match="Exact")


def test_delete_collection_by_label(core: kubernetes.client.CoreV1Api, five: str) -> None:
    core.delete_collection_namespaced_config_map(five, label_selector="odd=yes")
    assert _names(core, five) == ["list-0", "list-2", "list-4", "other"]
