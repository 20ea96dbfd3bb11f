"""The patch appliers agree with a real kube-apiserver and honour the strategic-merge directives."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from objectmatcher import (
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    PatchError,
    UnsupportedPatchError,
    UnsupportedVersionError,
    apply_patch,
)
from tests.conftest import load_fixture

_CONTAINER_DEFAULTS = {
    "resources": {},
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
    "imagePullPolicy": "IfNotPresent",
}


def _demo_deployment() -> dict[str, Any]:
    """The ``patch-demo`` Deployment as the recording's first patch found it."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "patch-demo", "namespace": "fixtures"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "patch-demo"}},
            "template": {
                "metadata": {"labels": {"app": "patch-demo"}},
                "spec": {
                    "containers": [
                        {"name": "a", "image": "busybox:1.36", "args": ["one"],
                         **_CONTAINER_DEFAULTS},
                        {"name": "b", "image": "busybox:1.36", **_CONTAINER_DEFAULTS},
                    ]
                },
            },
        },
    }


def _containers(obj: dict[str, Any]) -> Any:
    return obj["spec"]["template"]["spec"]["containers"]


def _server_defaults(obj: dict[str, Any]) -> dict[str, Any]:
    """What the server adds to containers a patch brought in (defaulting after the patch)."""
    for container in _containers(obj):
        for key, value in _CONTAINER_DEFAULTS.items():
            container.setdefault(key, value)
    return obj


def test_recorded_patch_sequence_gives_the_recorded_outcomes() -> None:
    steps = load_fixture("patch-types.json")["steps"]
    obj = _demo_deployment()
    checked = 0
    for step in steps:
        request = step["request"]
        if "/deployments/patch-demo" not in request["path"] or not isinstance(
            request["body"], dict | list
        ):
            continue
        before = copy.deepcopy(obj)
        if step["status"] == 200:
            obj = _server_defaults(
                apply_patch(obj, request["body"], patch_type=request["contentType"])
            )
            assert _containers(obj) == step["response"]["spec.template.spec.containers"], step[
                "note"
            ]
            checked += 1
        elif request["contentType"] == JSON_PATCH:
            with pytest.raises(PatchError) as raised:
                apply_patch(obj, request["body"], patch_type=JSON_PATCH)
            assert raised.value.patch_type == JSON_PATCH
            assert raised.value.reason
            checked += 1
        assert before == obj or step["status"] == 200, "a failed patch changed the object"
    assert checked == 7
    assert obj["spec"]["replicas"] == 2


def test_strategic_merge_on_a_custom_resource_is_unsupported_like_a_415() -> None:
    step = load_fixture("patch-types.json")["steps"][-1]
    assert step["status"] == 415
    widget = load_fixture("customresource.json")["returned"]
    with pytest.raises(UnsupportedPatchError) as raised:
        apply_patch(widget, step["request"]["body"], patch_type=STRATEGIC_MERGE_PATCH)
    assert "Widget" in str(raised.value)
    assert isinstance(raised.value, ValueError)
    patched = apply_patch(widget, step["request"]["body"], patch_type=MERGE_PATCH)
    assert patched["spec"]["color"] == "red"
    assert patched["spec"]["size"] == widget["spec"]["size"]


def test_unknown_patch_type_and_version_are_misuse_errors() -> None:
    obj = _demo_deployment()
    with pytest.raises(UnsupportedPatchError, match="unknown patch type"):
        apply_patch(obj, {}, patch_type="application/yaml")
    with pytest.raises(UnsupportedVersionError):
        apply_patch(obj, {}, patch_type=STRATEGIC_MERGE_PATCH, kubernetes_version="1.2")


def test_inputs_are_never_mutated_and_the_result_shares_nothing() -> None:
    obj = _demo_deployment()
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}}
    frozen_obj, frozen_patch = json.dumps(obj), json.dumps(patch)
    for patch_type in (STRATEGIC_MERGE_PATCH, MERGE_PATCH):
        result = apply_patch(obj, patch, patch_type=patch_type)
        result["spec"]["selector"]["matchLabels"]["app"] = "changed"
        _containers(result)[0]["image"] = "changed"
    operations = [{"op": "add", "path": "/spec/template/metadata/labels", "value": {"x": "y"}}]
    frozen_operations = json.dumps(operations)
    result = apply_patch(obj, operations, patch_type=JSON_PATCH)
    result["spec"]["selector"]["matchLabels"]["app"] = "changed"
    result["spec"]["template"]["metadata"]["labels"]["x"] = "changed"
    assert json.dumps(operations) == frozen_operations
    assert json.dumps(obj) == frozen_obj
    assert json.dumps(patch) == frozen_patch


def test_strategic_merge_null_deletes_and_lists_without_merge_key_are_replaced() -> None:
    obj = _demo_deployment()
    patch = {
        "metadata": {"labels": {"gone": None, "new": "yes"}},
        "spec": {"replicas": None,
                 "template": {"spec": {"containers": [{"name": "a", "args": ["two"]}]}}},
    }
    result = apply_patch(obj, patch, patch_type=STRATEGIC_MERGE_PATCH)
    assert "replicas" not in result["spec"]
    assert result["metadata"]["labels"] == {"new": "yes"}
    assert _containers(result)[0]["args"] == ["two"]
    assert _containers(result)[1]["name"] == "b"


def test_strategic_merge_directives() -> None:
    obj = _demo_deployment()
    obj["metadata"]["finalizers"] = ["a.io/x", "b.io/y"]
    obj["spec"]["strategy"] = {"type": "RollingUpdate",
                               "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
    patch = {
        "metadata": {"finalizers": ["c.io/z"], "$deleteFromPrimitiveList/finalizers": ["a.io/x"]},
        "spec": {
            "strategy": {"$retainKeys": ["type"], "type": "Recreate"},
            "template": {"spec": {
                "$setElementOrder/containers": [{"name": "c"}, {"name": "b"}],
                "containers": [{"name": "c", "image": "nginx"}, {"name": "a", "$patch": "delete"}],
            }},
        },
    }
    result = apply_patch(obj, patch, patch_type=STRATEGIC_MERGE_PATCH)
    assert result["metadata"]["finalizers"] == ["b.io/y", "c.io/z"]
    assert result["spec"]["strategy"] == {"type": "Recreate"}
    assert [c["name"] for c in _containers(result)] == ["c", "b"]


def test_set_element_order_keeps_server_only_items_in_place() -> None:
    obj = _demo_deployment()
    _containers(obj).insert(0, {"name": "injected", "image": "mesh"})
    patch = {"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}, {"name": "c"}],
        "containers": [{"name": "c", "image": "c"}],
    }}}}
    result = apply_patch(obj, patch, patch_type=STRATEGIC_MERGE_PATCH)
    assert [c["name"] for c in _containers(result)] == ["injected", "b", "a", "c"]


def test_strategic_merge_replace_directives() -> None:
    obj = _demo_deployment()
    replaced_list = {"spec": {"template": {"spec": {"containers": [
        {"$patch": "replace"}, {"name": "z", "image": "z"}]}}}}
    result = apply_patch(obj, replaced_list, patch_type=STRATEGIC_MERGE_PATCH)
    assert _containers(result) == [{"name": "z", "image": "z"}]
    replaced_map = {"spec": {"selector": {"$patch": "replace", "matchLabels": {"x": "y"}}}}
    result = apply_patch(obj, replaced_map, patch_type=STRATEGIC_MERGE_PATCH)
    assert result["spec"]["selector"] == {"matchLabels": {"x": "y"}}
    replaced_item = {"spec": {"template": {"spec": {"containers": [
        {"name": "a", "$patch": "replace", "image": "new"}]}}}}
    result = apply_patch(obj, replaced_item, patch_type=STRATEGIC_MERGE_PATCH)
    assert _containers(result)[0] == {"name": "a", "image": "new"}
    assert _containers(result)[1]["name"] == "b"
    deleted_map = {"spec": {"template": {"metadata": {"$patch": "delete"}}}}
    result = apply_patch(obj, deleted_map, patch_type=STRATEGIC_MERGE_PATCH)
    assert "metadata" not in result["spec"]["template"]


@pytest.mark.parametrize(
    "patch",
    [
        {"spec": {"$patch": "explode"}},
        {"spec": {"$unknownDirective": 1}},
        {"spec": {"template": {"spec": {"containers": [{"image": "no-name"}]}}}},
        ["not", "a", "map"],
    ],
)
def test_malformed_strategic_merge_patches_raise_patch_error(patch: Any) -> None:
    with pytest.raises(PatchError) as raised:
        apply_patch(_demo_deployment(), patch, patch_type=STRATEGIC_MERGE_PATCH)
    assert raised.value.patch_type == STRATEGIC_MERGE_PATCH
    assert "Deployment patch-demo" in str(raised.value)


def test_merge_patch_follows_rfc_7386() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}
    patch = {"a": "z", "c": {"f": None}, "l": [3], "n": {"x": None}}
    assert apply_patch(
        {"kind": "K", **target}, patch, patch_type=MERGE_PATCH
    ) == {"kind": "K", "a": "z", "c": {"d": "e"}, "l": [3], "n": {}}
    with pytest.raises(PatchError):
        apply_patch(target, ["x"], patch_type=MERGE_PATCH)


def test_json_patch_errors_carry_the_reason() -> None:
    obj = _demo_deployment()
    with pytest.raises(PatchError, match="test operation failed"):
        apply_patch(obj, [{"op": "test", "path": "/spec/replicas", "value": 5}],
                    patch_type=JSON_PATCH)
    with pytest.raises(PatchError) as raised:
        apply_patch(obj, [{"op": "replace", "path": "/spec/nope/x", "value": 2}],
                    patch_type=JSON_PATCH)
    assert "nope" in raised.value.reason
    with pytest.raises(PatchError):
        apply_patch(obj, {"op": "add"}, patch_type=JSON_PATCH)
    with pytest.raises(PatchError):
        apply_patch(obj, [{"op": "frobnicate", "path": "/a"}], patch_type=JSON_PATCH)
