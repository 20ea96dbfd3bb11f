"""The store: one global resourceVersion, the bounded event window, snapshots and indexes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reconciler.embedded._storage import Storage, StoredEvent, TooOld, estimate_size

BUCKET = ("", "configmaps")


def _write(storage: Storage, name: str, event: str = "ADDED", **extra: Any) -> dict[str, Any]:
    old = storage.get(BUCKET, namespace="ns", name=name)
    obj = {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                        "resourceVersion": str(storage.next_resource_version()), **extra}}
    storage.commit(BUCKET, obj, event_type=event, old=old)
    return obj


def test_versions_are_global_and_consecutive() -> None:
    storage = Storage()
    _write(storage, "a")
    _write(storage, "b")
    _write(storage, "a", "MODIFIED")
    assert storage.resource_version == 3
    with pytest.raises(RuntimeError, match="out-of-order"):
        storage.commit(BUCKET, {"metadata": {"name": "x", "resourceVersion": "9"}},
                       event_type="ADDED", old=None)


def test_window_eviction_makes_old_versions_too_old() -> None:
    storage = Storage(history_size=3)
    for i in range(5):
        _write(storage, f"o{i}")
    assert storage.oldest_resource_version == 2
    with pytest.raises(TooOld) as caught:
        storage.subscribe_since(1, lambda event: None)
    assert str(caught.value) == "too old resource version: 1 (2)"
    replay = storage.subscribe_since(2, lambda event: None)
    assert [e.resource_version for e in replay] == [3, 4, 5]


def test_snapshot_undoes_later_events() -> None:
    storage = Storage()
    _write(storage, "a", data="1")
    _write(storage, "b")
    at = storage.resource_version
    _write(storage, "a", "MODIFIED", data="2")
    storage.commit(BUCKET, {"metadata": {"name": "b", "namespace": "ns", "uid": "uid-b",
                                         "resourceVersion": str(storage.next_resource_version())}},
                   event_type="DELETED", old=storage.get(BUCKET, namespace="ns", name="b"))
    _write(storage, "c")
    snapshot = storage.snapshot(BUCKET, at)
    assert [(o["metadata"]["name"], o["metadata"].get("data")) for o in snapshot] == [
        ("a", "1"), ("b", None)
    ]
    storage.compact()
    with pytest.raises(TooOld):
        storage.snapshot(BUCKET, at)


def test_subscribers_and_owner_index() -> None:
    storage = Storage()
    seen: list[StoredEvent] = []
    storage.subscribe_since(None, seen.append)
    owner = _write(storage, "owner")
    _write(storage, "dep", ownerReferences=[{"uid": owner["metadata"]["uid"]}])
    assert storage.dependents("uid-owner") == [("", "configmaps", "ns", "dep")]
    assert storage.get_by_uid("uid-dep") is not None
    assert [e.type for e in seen] == ["ADDED", "ADDED"]
    storage.unsubscribe(seen.append)
    _write(storage, "later")
    assert len(seen) == 2


def test_namespace_index_follows_writes_and_deletes() -> None:
    storage = Storage()
    _write(storage, "a")
    _write(storage, "b")
    assert [obj["metadata"]["name"] for _, obj in storage.in_namespace("ns")] == ["a", "b"]
    storage.commit(BUCKET, {"metadata": {"name": "a", "namespace": "ns", "uid": "uid-a",
                                         "resourceVersion": str(storage.next_resource_version())}},
                   event_type="DELETED", old=storage.get(BUCKET, namespace="ns", name="a"))
    assert [obj["metadata"]["name"] for _, obj in storage.in_namespace("ns")] == ["b"]
    assert storage.in_namespace("other") == []


def test_the_window_is_bounded_in_bytes_too() -> None:
    """20,000 events of large objects must not be held: the oldest go once the estimated bytes
    pass ``history_bytes``, and a watch from a version they covered gets 410."""
    storage = Storage(history_size=20_000, history_bytes=1_000_000)
    blob = "x" * 100_000
    for i in range(30):
        rv = storage.next_resource_version()
        storage.commit(BUCKET, {"metadata": {"name": f"big{i}", "resourceVersion": str(rv)},
                                "data": {"blob": blob}}, event_type="ADDED", old=None)
    assert 900_000 < storage.history_bytes <= 1_000_000
    kept = storage.subscribe_since(storage.oldest_resource_version, lambda event: None)
    assert len(kept) == 9  # about 100 KB each
    assert storage.oldest_resource_version == 21
    with pytest.raises(TooOld):
        storage.subscribe_since(20, lambda event: None)
    storage.compact()
    assert storage.history_bytes == 0


def test_estimated_sizes_are_near_the_json_size() -> None:
    obj = {"metadata": {"name": "n", "labels": {"a": "b" * 50}}, "spec": {"items": [1, "two"] * 40},
           "data": {"k": "v" * 5000}}
    actual = len(json.dumps(obj, separators=(",", ":")))
    assert actual * 0.8 < estimate_size(obj) < actual * 1.5
