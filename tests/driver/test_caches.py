"""The informer cache and its helpers: indexes, label selectors, owner lookup, own-write records."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import ObjectRef
from builders.names import owner_uids
from reconciler._selectors import LabelSelector
from reconciler._stores import IndexedCache


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
