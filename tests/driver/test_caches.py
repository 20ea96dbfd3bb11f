"""The informer cache and its helpers: indexes, label selectors, owner lookup, own-write records."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import ObjectRef
from builders.names import owner_uids
from reconciler._cache.selectors import LabelSelector
from reconciler._cache.stores import IndexedCache


def _key(obj: dict) -> tuple[str, str]:
    return ObjectRef.of(obj).namespaced_name


def _obj(name: str, *, ns: str = "ns", rv: int = 1, labels: dict[str, str] | None = None,
         uid: str | None = None, owner: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "resourceVersion": str(rv),
                            "uid": uid or f"uid-{ns}-{name}", "labels": dict(labels or {})}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "example.dev/v1", "kind": "Thing",
                                    "name": "p", "uid": owner, "controller": True}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def test_objects_are_found_by_name_uid_owner_and_label() -> None:
    cache = IndexedCache()
    cache.upsert(_obj("a", owner="p1", labels={"app": "x"}))
    cache.upsert(_obj("b", labels={"optk.dev/owner-uid": "p1", "app": "y"}))
    cache.upsert(_obj("c", ns="other", labels={"app": "x"}))
    assert cache.get("ns", "a") is not None
    assert cache.get("ns", "zzz") is None
    assert cache.get_by_uid("uid-other-c") == cache.get("other", "c")
    assert [_key(o) for o in cache.by_owner_uid("p1")] == [("ns", "a"), ("ns", "b")]
    assert [_key(o) for o in cache.by_label("app", "x")] == [("ns", "a"), ("other", "c")]
    assert [_key(o) for o in cache.list(namespace="ns", label_selector="app=x")] == [
        ("ns", "a")
    ]
    assert len(cache.list()) == 3


def test_an_older_version_never_replaces_a_newer_one_and_indexes_follow_updates() -> None:
    cache = IndexedCache()
    cache.upsert(_obj("a", rv=5, labels={"app": "x"}))
    _, stored = cache.upsert(_obj("a", rv=3, labels={"app": "old"}))
    assert not stored
    cache.upsert(_obj("a", rv=7, labels={"app": "y"}))
    assert cache.by_label("app", "x") == []
    assert [_key(o) for o in cache.by_label("app", "y")] == [("ns", "a")]
    removed = cache.remove(_obj("a"))
    assert removed is not None
    assert cache.by_label("app", "y") == []
    assert len(cache) == 0


def test_owner_uids_prefer_the_controller_reference_and_include_the_label() -> None:
    obj = _obj("a", owner="p1", labels={"optk.dev/owner-uid": "p2"})
    assert owner_uids(obj) == ("p1", "p2")
    assert owner_uids(_obj("b")) == ()


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("a=b", {"a": "b"}, True),
        ("a==b", {"a": "c"}, False),
        ("a!=b", {}, True),
        ("a!=b", {"a": "b"}, False),
        ("a", {"a": ""}, True),
        ("!a", {"a": "x"}, False),
        ("a in (x, y),b notin (z)", {"a": "y", "b": "w"}, True),
        ("a in (x,y)", {"a": "z"}, False),
        ("app.kubernetes.io/managed-by=optk,env", {"app.kubernetes.io/managed-by": "optk"}, False),
        ("", {"anything": "x"}, True),
    ],
)
def test_label_selectors_match_as_the_api_server_does(
    selector: str, labels: dict[str, str], expected: bool
) -> None:
    assert LabelSelector.parse(selector).matches(labels) is expected


@pytest.mark.parametrize("selector", ["a in x", "a=(b", "!a=b", "a b"])
def test_malformed_selectors_are_refused_naming_the_selector(selector: str) -> None:
    with pytest.raises(ValueError, match="label selector"):
        LabelSelector.parse(selector)


label = st.sampled_from(["a", "b", "c"])


@given(objects=st.dictionaries(st.text("xyz", min_size=1, max_size=3),
                               st.dictionaries(label, st.sampled_from(["1", "2"]), max_size=3)),
       key=label, value=st.sampled_from(["1", "2"]))
def test_indexed_listing_equals_a_full_scan(
    objects: dict[str, dict[str, str]], key: str, value: str
) -> None:
    cache = IndexedCache()
    for name, labels in objects.items():
        cache.upsert(_obj(name, labels=labels))
    selected = {_key(o)[1] for o in cache.list(label_selector=f"{key}={value}")}
    assert selected == {n for n, labels in objects.items() if labels.get(key) == value}


def _with_managed_fields(name: str, *, rv: int = 1) -> dict[str, Any]:
    obj = _obj(name, rv=rv, labels={"app.kubernetes.io/name": "thanos"})
    obj["metadata"]["managedFields"] = [{"manager": "optk", "operation": "Update",
                                         "fieldsV1": {"f:data": {"f:k": {}}}}]
    obj["metadata"]["annotations"] = {"note": "x" * 100}
    obj["data"] = {"k": "v", "long": "y" * 100}
    obj["items"] = [{"port": 8080}, ["nested", {"deep": True}], None, 1.5]
    return obj


def test_the_cache_drops_managed_fields_and_keeps_everything_else_as_given() -> None:
    given_obj = _with_managed_fields("a")
    before = copy.deepcopy(given_obj)
    cache = IndexedCache()
    cache.upsert(given_obj)
    cached = cache.get("ns", "a")
    assert cached is not None
    assert "managedFields" not in cached["metadata"]
    expected = copy.deepcopy(before)
    del expected["metadata"]["managedFields"]
    assert cached == expected
    assert given_obj == before  # the caller's object (a write's response) is not changed
    assert cached is not given_obj
    assert cached["metadata"] is not given_obj["metadata"]


def test_the_cache_keeps_the_apply_entries_of_managed_fields() -> None:
    """Server-side apply's planner reads who applied what from the cache (issue 27)."""
    obj = _with_managed_fields("a")
    applied = {"manager": "op", "operation": "Apply", "fieldsV1": {"f:data": {"f:k": {}}}}
    obj["metadata"]["managedFields"].append(applied)
    cache = IndexedCache()
    cache.upsert(obj)
    cached = cache.get("ns", "a")
    assert cached is not None
    assert cached["metadata"]["managedFields"] == [applied]
    assert type(cached["items"]) is list
    assert type(cached["items"][1][1]) is dict


def test_cached_strings_are_interned_across_objects_and_long_values_are_not() -> None:
    cache = IndexedCache()
    # distinct string objects with equal text, as separate JSON documents decode them
    cache.upsert(json.loads(json.dumps(_with_managed_fields("a"))))
    cache.upsert(json.loads(json.dumps(_with_managed_fields("b"))))
    a, b = cache.get("ns", "a"), cache.get("ns", "b")
    assert a is not None
    assert b is not None
    assert a["apiVersion"] is b["apiVersion"]
    label = "app.kubernetes.io/name"
    assert a["metadata"]["labels"][label] is b["metadata"]["labels"][label]
    assert next(k for k in a["metadata"]["labels"]) is next(k for k in b["metadata"]["labels"])
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    assert a["data"]["long"] == b["data"]["long"]
    assert a["data"]["long"] is not b["data"]["long"]  # over 64 characters: left alone
    # equal leaf dicts (all values short scalars) are one dict; others are each object's own
    assert a["metadata"]["labels"] is b["metadata"]["labels"]
    assert a["items"][0] is b["items"][0]
    assert a["data"] is not b["data"]  # holds a long string
    assert a["metadata"] is not b["metadata"]
    assert a["items"] is not b["items"]
    assert a["items"][1] is not b["items"][1]  # holds a dict
    assert a["items"][1][1] is b["items"][1][1]


def test_leaf_dicts_are_shared_only_when_equal_in_value_type_and_order() -> None:
    cache = IndexedCache()
    leaves: list[Any] = [{"v": True}, {"v": 1}, {"v": 1.0}, {"v": "1"}, {"v": None},
                         {"a": 1, "b": 2}, {"b": 2, "a": 1}, {}, [], [True], [1], ["a", "b"],
                         ["b", "a"]]
    for i, leaf in enumerate(leaves):
        obj = _obj(f"o{i}")
        obj["spec"] = {"leaf": leaf}
        cache.upsert(obj)
    cached = [cache.get("ns", f"o{i}")["spec"]["leaf"] for i in range(len(leaves))]
    assert [type(c) for c in cached] == [type(leaf) for leaf in leaves]
    assert [list(c.items()) if isinstance(c, dict) else c for c in cached] == [
        list(leaf.items()) if isinstance(leaf, dict) else leaf for leaf in leaves]
    assert type(cached[-4][0]) is bool
    assert type(cached[-3][0]) is int
    assert [type(c["v"]) for c in cached[:5]] == [bool, int, float, str, type(None)]
    assert len({id(c) for c in cached}) == len(leaves)


def test_the_echo_of_a_cached_version_keeps_the_cached_copy() -> None:
    cache = IndexedCache()
    cache.upsert(_with_managed_fields("a", rv=3))
    first = cache.get("ns", "a")
    old, stored = cache.upsert(_with_managed_fields("a", rv=3))
    assert stored
    assert old is first
    assert cache.get("ns", "a") is first
    old, stored = cache.upsert(_with_managed_fields("a", rv=4))
    assert stored
    assert old is first
    assert cache.get("ns", "a") is not first
    assert cache.upsert(_with_managed_fields("a", rv=2)) == (cache.get("ns", "a"), False)


_NAMES = ("a", "b", "c")
_STEPS = st.lists(st.tuples(st.sampled_from(("own", "foreign", "own-delete", "create", "deliver",
                                             "deliver", "unscope", "relist")),
                            st.sampled_from(_NAMES)), max_size=40)


@given(_STEPS)
def test_the_streamed_version_is_what_the_stream_last_delivered(steps: list[tuple[str, str]]
                                                                 ) -> None:
    """The informer compares a relist with the version the list or watch last delivered, not with
    the cache (our own writes move the cache ahead of the stream). The cache answers it from the
    few objects where the two differ: once the stream has caught up, it keeps nothing extra."""
    cache = IndexedCache()
    server: dict[str, dict[str, Any]] = {}  # what the cluster holds
    pending: list[tuple[str, dict[str, Any]]] = []  # watch events not delivered yet
    streamed: dict[str, str | None] = dict.fromkeys(_NAMES)  # the model
    clock = iter(range(1, 10_000))

    def write(name: str, *, own: bool) -> None:
        uid = server[name]["metadata"]["uid"] if name in server else f"uid-{next(clock)}"
        server[name] = _obj(name, rv=next(clock), uid=uid)
        pending.append(("MODIFIED", server[name]))
        if own:
            cache.upsert(copy.deepcopy(server[name]), own_write=True)

    def deliver() -> None:
        kind, obj = pending.pop(0)
        if kind == "DELETED":
            cache.remove(obj)
            streamed[obj["metadata"]["name"]] = None
        else:
            cache.upsert(copy.deepcopy(obj))
            streamed[obj["metadata"]["name"]] = obj["metadata"]["resourceVersion"]

    for step, name in steps:
        if step in ("own", "foreign", "create"):
            if step == "create" and name in server:
                continue
            write(name, own=step == "own")
        elif step == "own-delete" and name in server:
            gone = server.pop(name)
            cache.forget(gone, uid=gone["metadata"]["uid"])
            pending.append(("DELETED", gone))
        elif step == "unscope" and name in server:  # an own label patch out of the selector
            gone = server.pop(name)  # (a released parent): the watch says DELETED
            cache.remove(gone, own_write=True)
            pending.append(("DELETED", gone))
        elif step == "deliver" and pending:
            deliver()
        elif step == "relist":  # a 410: the events in flight are lost, the list has the rest
            pending.clear()
            for obj in server.values():
                cache.upsert(copy.deepcopy(obj))
                streamed[obj["metadata"]["name"]] = obj["metadata"]["resourceVersion"]
            for key in set(cache.keys()) - {("ns", n) for n in server}:
                cache.remove(cache.get(*key) or {})
            for gone in set(_NAMES) - set(server):
                streamed[gone] = None
            cache.retain_streamed({("ns", n) for n in server})
        for each in _NAMES:
            assert cache.streamed_version("ns", each) == streamed[each], (step, name, each)
    while pending:
        deliver()
    assert cache._streamed == {}  # nothing kept once the stream caught up
