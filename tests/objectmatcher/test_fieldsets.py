"""Server-side apply field sets (``objectmatcher._fieldsets``): pure, against the schemas."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from objectmatcher import (
    FIELD_MISSING,
    applied_fields,
    changed_fields,
    extract_fields,
    field_value,
    fields_from_v1,
    fields_to_v1,
    merge_applied,
    remove_fields,
)

WEB = 'k:{"name":"web"}'
CONTAINERS = ("f:spec", "f:template", "f:spec", "f:containers")


def _deployment(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"a": "1"}},
                     "template": {"spec": {"containers": list(containers)}}}}


def test_list_maps_are_keyed_sets_by_value_and_atomic_objects_whole() -> None:
    obj = _deployment({"name": "web", "image": "x", "args": ["a"],
                       "ports": [{"containerPort": 80}]})
    obj["metadata"]["finalizers"] = ["f"]
    fields = applied_fields(obj)
    assert (*CONTAINERS, WEB) in fields  # the item is a member itself
    assert (*CONTAINERS, WEB, "f:args") in fields  # an atomic list is one field
    port = 'k:{"containerPort":80,"protocol":"TCP"}'  # the defaulted key counts as TCP
    assert (*CONTAINERS, WEB, "f:ports", port, "f:containerPort") in fields
    assert ("f:spec", "f:selector") in fields  # LabelSelector: x-kubernetes-map-type atomic
    assert ("f:metadata", "f:finalizers", 'v:"f"') in fields  # a set, by value
    assert ("f:metadata", "f:name") not in fields  # identity is no field
    tree = fields_to_v1(fields)
    assert "." in tree["f:spec"]["f:template"]["f:spec"]["f:containers"][WEB]
    assert fields_from_v1(tree) == fields


def test_merge_remove_and_extract_follow_the_keys() -> None:
    live = _deployment({"name": "web", "image": "x"}, {"name": "side", "image": "y"})
    config = _deployment({"name": "web", "image": "z"}, {"name": "new", "image": "n"})
    merged = merge_applied(live, config)
    names = [c["name"] for c in merged["spec"]["template"]["spec"]["containers"]]
    assert names == ["web", "side", "new"]
    assert field_value(merged, (*CONTAINERS, WEB, "f:image")) == "z"
    smaller = remove_fields(merged, [(*CONTAINERS, 'k:{"name":"side"}')])
    assert [c["name"] for c in smaller["spec"]["template"]["spec"]["containers"]] == [
        "web", "new"]
    assert field_value(smaller, (*CONTAINERS, 'k:{"name":"side"}')) is FIELD_MISSING
    part = extract_fields(merged, [(*CONTAINERS, WEB, "f:image")])
    assert part["spec"]["template"]["spec"]["containers"] == [{"name": "web", "image": "z"}]


def test_an_update_owns_what_it_changed_and_the_maps_it_created() -> None:
    old = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
           "data": {"a": "1", "b": "1"}}
    new = {**old, "data": {"a": "2", "b": "1"}, "metadata": {"name": "c", "labels": {"x": "y"}}}
    assert changed_fields(old, new) == {("f:data", "f:a"), ("f:metadata", "f:labels"),
                                        ("f:metadata", "f:labels", "f:x")}


_keys = st.text(alphabet="abcxyz", min_size=1, max_size=4)


@given(st.dictionaries(_keys, st.text(max_size=3), max_size=6),
       st.dictionaries(_keys, st.text(max_size=3), min_size=1, max_size=6))
def test_applying_then_removing_what_was_applied_is_the_identity(
    live_data: dict[str, str], config_data: dict[str, str]
) -> None:
    live = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": live_data}
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
              "data": config_data}
    merged = merge_applied(live, config)
    fields = applied_fields(config)
    for path in fields:
        assert field_value(merged, path) == field_value(config, path)
    untouched = {("f:data", f"f:{k}") for k in live_data} - fields
    kept = remove_fields(merged, fields)
    for path in untouched:
        assert field_value(kept, path) == field_value(live, path)
    assert fields_from_v1(fields_to_v1(fields)) == fields
