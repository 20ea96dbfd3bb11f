"""calculate_patch: no false diffs on real server objects, every real diff found and converged."""

from __future__ import annotations

import base64
import copy
import zlib
from typing import Any

import pytest

from objectmatcher import (
    LAST_APPLIED_ANNOTATION,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    InvalidObjectError,
    InvalidOptionError,
    calculate_patch,
    ignore_field,
    ignore_pvc_template_type_meta_and_status,
    ignore_status_fields,
)
from tests.conftest import object_fixture_names
from tests.objectmatcher.helpers import apply_result, converge, live_from_fixture, with_annotation

OBJECT_FIXTURES = object_fixture_names()


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return obj["spec"]["template"]["spec"]["containers"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", OBJECT_FIXTURES)
def test_server_defaults_of_real_objects_are_not_diffs(name: str) -> None:
    desired, live = live_from_fixture(name)
    result = calculate_patch(live, desired)
    assert result.is_empty, result.patch
    assert result.patch == {}
    assert result.diff == ()
    assert result.fallback_reason is None


@pytest.mark.parametrize("name", OBJECT_FIXTURES)
def test_without_annotation_only_the_annotation_is_written(name: str) -> None:
    desired, live = live_from_fixture(name)
    del live["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
    result = calculate_patch(live, desired)
    assert result.fallback_reason == "no last-applied annotation"
    assert result.patch == {"metadata": {"annotations": {
        LAST_APPLIED_ANNOTATION: result.patch["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]}}}
    after = apply_result(live, result)
    assert calculate_patch(after, desired).is_empty


def test_patch_types_follow_the_kind() -> None:
    desired, live = live_from_fixture("deployment.json")
    desired = copy.deepcopy(desired)
    desired["spec"]["replicas"] = 3
    assert calculate_patch(live, desired).patch_type == STRATEGIC_MERGE_PATCH
    desired, live = live_from_fixture("customresource.json")
    desired = copy.deepcopy(desired)
    desired["spec"]["color"] = "red"
    result = calculate_patch(live, desired)
    assert result.patch_type == MERGE_PATCH
    assert result.patch["spec"] == {"color": "red"}


def test_quantities_compare_by_value() -> None:
    desired, live = live_from_fixture("deployment.json")
    desired = copy.deepcopy(desired)
    _containers(desired)[0]["resources"] = {
        "limits": {"cpu": "1000m", "memory": "1024Mi"},
        "requests": {"cpu": 0.5, "memory": "1073741824"},
    }
    live = with_annotation(live, desired)
    _containers(live)[0]["resources"] = {
        "limits": {"cpu": "1", "memory": "1Gi"},
        "requests": {"cpu": "500m", "memory": "1Gi"},
    }
    assert calculate_patch(live, desired).is_empty
    _containers(live)[0]["resources"]["limits"]["cpu"] = "2"
    result = calculate_patch(live, desired)
    assert [(item.op, item.path[-1], item.old, item.new) for item in result.diff] == [
        ("change", "cpu", "2", "1000m")
    ]


def test_quantity_like_strings_outside_quantity_fields_still_differ() -> None:
    desired, live = live_from_fixture("configmap.json")
    desired = {**desired, "data": {"size": "1000m"}}
    live = with_annotation({**live, "data": {"size": "1"}}, desired)
    assert not calculate_patch(live, desired).is_empty


def test_null_absent_empty_maps_label_order_and_integral_floats_are_not_diffs() -> None:
    desired, live = live_from_fixture("deployment.json")
    desired = copy.deepcopy(desired)
    desired["metadata"]["labels"] = {"b": "2", "app": "web", "a": "1"}
    desired["metadata"]["annotations"] = {}
    desired["spec"]["paused"] = None
    desired["spec"]["template"]["spec"]["nodeSelector"] = {}
    desired["spec"]["template"]["spec"]["tolerations"] = []
    desired["spec"]["progressDeadlineSeconds"] = 600.0
    live = with_annotation(live, desired)
    live["metadata"]["labels"] = {"a": "1", "app": "web", "b": "2"}
    assert calculate_patch(live, desired).is_empty


def test_atomic_lists_filled_in_by_the_server_are_not_diffs() -> None:
    desired, live = live_from_fixture("statefulset.json")
    assert live["spec"]["volumeClaimTemplates"][0]["status"] == {"phase": "Pending"}
    assert calculate_patch(live, desired).is_empty
    changed = copy.deepcopy(desired)
    changed["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] = "2Gi"
    result = calculate_patch(live, changed)
    assert result.patch["spec"]["volumeClaimTemplates"] == changed["spec"]["volumeClaimTemplates"]


def test_pdb_selector_with_server_filled_items_is_not_a_diff() -> None:
    desired: dict[str, Any] = {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb"},
        "spec": {"minAvailable": 1, "selector": {"matchExpressions": [
            {"key": "app", "operator": "In", "values": ["web"]}]}},
    }
    live = with_annotation(desired, desired)
    live["spec"]["selector"]["matchExpressions"][0]["extra"] = "filled"
    live["spec"]["unhealthyPodEvictionPolicy"] = "IfHealthyBudget"
    assert calculate_patch(live, desired).is_empty
    changed = copy.deepcopy(desired)
    changed["spec"]["selector"]["matchExpressions"][0]["values"] = ["api"]
    converge(live, changed)


def test_atomic_list_item_field_dropped_by_desired_is_a_diff() -> None:
    original: dict[str, Any] = {
        "apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"},
        "spec": {"items": [{"name": "a", "weight": 3}]},
    }
    desired = copy.deepcopy(original)
    del desired["spec"]["items"][0]["weight"]
    live = with_annotation(original, original)
    result = calculate_patch(live, desired)
    assert result.patch["spec"] == {"items": [{"name": "a"}]}
    after = apply_result(live, result)
    assert after["spec"]["items"] == [{"name": "a"}]


def test_custom_resource_list_map_keys_from_the_crd_schema() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "targets": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {
                        "name": {"type": "string"}, "port": {"type": "integer"}}}}}}}}
    desired: dict[str, Any] = {
        "apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"},
        "spec": {"targets": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]},
    }
    live = with_annotation(desired, desired)
    live["spec"]["targets"] = [{"name": "b", "port": 2, "weight": 1}, {"name": "a", "port": 1}]
    assert calculate_patch(live, desired, crd_schema=schema).is_empty
    assert not calculate_patch(live, desired).is_empty  # without keys: positional, reordered
    changed = copy.deepcopy(desired)
    changed["spec"]["targets"][1]["port"] = 3
    converge(live, changed, crd_schema=schema)


def _deployment() -> tuple[dict[str, Any], dict[str, Any]]:
    desired, live = live_from_fixture("deployment.json")
    desired = copy.deepcopy(desired)
    desired["metadata"]["labels"]["tier"] = "front"
    container = _containers(desired)[0]
    container["args"] = ["--a", "--b"]
    container["env"] = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    container["ports"] = [{"containerPort": 80}]
    _containers(desired).append({"name": "sidecar", "image": "busybox"})
    live = copy.deepcopy(live)
    live["metadata"]["labels"]["tier"] = "front"
    live_container = _containers(live)[0]
    live_container.update(copy.deepcopy({k: container[k] for k in ("args", "env")}))
    live_container["ports"] = [{"containerPort": 80, "protocol": "TCP"}]
    _containers(live).append({"name": "sidecar", "image": "busybox", "resources": {},
                              "imagePullPolicy": "Always"})
    live = with_annotation(live, desired)
    assert calculate_patch(live, desired).is_empty
    return desired, live


def _edit(desired: dict[str, Any], change: str) -> None:
    container = _containers(desired)[0]
    if change == "image":
        container["image"] = "nginx:1.27"
    elif change == "replicas-zero":
        desired["spec"]["replicas"] = 0
    elif change == "arg-removed":
        container["args"] = ["--a"]
    elif change == "label-removed":
        del desired["metadata"]["labels"]["tier"]
    elif change == "port-added":
        container["ports"].append({"containerPort": 443})
    elif change == "env-removed":
        container["env"] = [{"name": "A", "value": "1"}]
    elif change == "container-dropped":
        del _containers(desired)[1]
    else:  # pragma: no cover - the parametrization lists every change
        raise AssertionError(change)


@pytest.mark.parametrize(
    ("change", "expected_path"),
    [
        ("image", ("spec", "template", "spec", "containers", 0, "image")),
        ("replicas-zero", ("spec", "replicas")),
        ("arg-removed", ("spec", "template", "spec", "containers", 0, "args", 1)),
        ("label-removed", ("metadata", "labels", "tier")),
        ("port-added", ("spec", "template", "spec", "containers", 0, "ports", 1)),
        ("env-removed", ("spec", "template", "spec", "containers", 0, "env", 1)),
        ("container-dropped", ("spec", "template", "spec", "containers", 1)),
    ],
)
def test_real_diffs_are_found_and_the_patch_converges(
    change: str, expected_path: tuple[Any, ...]
) -> None:
    desired, live = _deployment()
    _edit(desired, change)
    result = calculate_patch(live, desired)
    assert not result.is_empty
    assert expected_path in [item.path for item in result.diff], [str(i) for i in result.diff]
    after = converge(live, desired)
    assert _containers(after)[0]["terminationMessagePath"] == "/dev/termination-log"
    assert after["spec"]["strategy"]["type"] == "RollingUpdate"


def test_a_field_another_actor_changed_is_reverted() -> None:
    desired, live = _deployment()
    live["spec"]["template"]["spec"]["containers"][0]["image"] = "evil:latest"
    live["metadata"]["labels"]["tier"] = "back"
    result = calculate_patch(live, desired)
    assert result.patch["metadata"]["labels"] == {"tier": "front"}
    after = apply_result(live, result)
    assert _containers(after)[0]["image"] == "nginx:1.25"


def test_deleted_merge_keyed_item_uses_the_delete_directive() -> None:
    desired, live = _deployment()
    _edit(desired, "container-dropped")
    containers = calculate_patch(live, desired).patch["spec"]["template"]["spec"]["containers"]
    assert containers == [{"name": "sidecar", "$patch": "delete"}]


def test_fields_of_others_are_kept_and_only_ours_are_deleted() -> None:
    desired, live = _deployment()
    live["metadata"]["labels"]["owner"] = "someone-else"
    _containers(live)[0]["env"].append({"name": "INJECTED", "value": "x"})
    assert calculate_patch(live, desired).is_empty
    _edit(desired, "label-removed")
    after = converge(live, desired)
    assert after["metadata"]["labels"] == {"app": "web", "owner": "someone-else"}
    assert {e["name"] for e in _containers(after)[0]["env"]} == {"A", "B", "INJECTED"}


def test_strategy_change_clears_the_old_strategy_with_retain_keys() -> None:
    desired, live = _deployment()
    desired["spec"]["strategy"] = {"type": "Recreate"}
    result = calculate_patch(live, desired)
    assert result.patch["spec"]["strategy"] == {"type": "Recreate", "$retainKeys": ["type"]}
    after = apply_result(live, result)
    assert after["spec"]["strategy"] == {"type": "Recreate"}


def test_finalizers_merge_as_a_set() -> None:
    desired, live = live_from_fixture("persistentvolumeclaim.json")
    desired = {**desired, "metadata": {**desired["metadata"], "finalizers": ["example.com/a"]}}
    result = calculate_patch(live, desired)
    after = apply_result(live, result)
    assert after["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection", "example.com/a"]
    dropped = {**desired, "metadata": {"name": "data"}}
    result = calculate_patch(after, dropped)
    assert result.patch["metadata"]["$deleteFromPrimitiveList/finalizers"] == ["example.com/a"]
    assert apply_result(after, result)["metadata"]["finalizers"] == [
        "kubernetes.io/pvc-protection"]


def test_dropped_list_with_none_of_ours_left_is_no_diff() -> None:
    desired, live = live_from_fixture("persistentvolumeclaim.json")
    original = {**desired, "metadata": {"name": "data", "finalizers": ["example.com/gone"]}}
    live = with_annotation(live, original)  # ours was already removed by someone else
    assert live["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    result = calculate_patch(live, desired)
    # issue 11: deleting what is already gone is a no-op, and a stale record alone is no write
    assert result.is_empty
    assert result.original_status == "recorded"


def test_ignore_field_hands_a_field_to_someone_else() -> None:
    desired, live = _deployment()
    desired["spec"]["replicas"] = 2
    live["spec"]["replicas"] = 7  # an autoscaler's choice
    assert calculate_patch(live, desired).patch["spec"] == {"replicas": 2}
    assert calculate_patch(live, desired, ignore_field("spec.replicas")).is_empty
    images = ignore_field("spec.template.spec.containers[*].image")
    tier = ignore_field(("metadata", "labels", "tier"), kinds=["Deployment"])
    options = (ignore_field("spec.replicas"), images, tier)
    assert calculate_patch(live, desired, *options).is_empty
    _edit(desired, "image")
    _edit(desired, "label-removed")
    assert calculate_patch(live, desired, *options).is_empty
    assert live["metadata"]["labels"]["tier"] == "front"
    without = calculate_patch(live, desired, ignore_field("spec.replicas"))
    assert not without.is_empty
    # Without the option the label is ours again (the record says we set it), and dropped.
    assert without.patch["metadata"]["labels"] == {"tier": None}


def test_a_record_with_status_and_server_metadata_is_fresh() -> None:
    desired, live = live_from_fixture("deployment.json")
    desired = copy.deepcopy(desired)
    desired["status"] = {}
    desired["metadata"].update({"resourceVersion": "7", "creationTimestamp": None})
    desired["spec"]["replicas"] = 2
    live = with_annotation(live, desired)  # as created with set_last_applied(desired)
    live["spec"]["replicas"] = 5
    assert calculate_patch(live, desired, ignore_field("spec.replicas")).is_empty


def test_status_is_ignored_by_default_and_explicitly() -> None:
    desired, live = live_from_fixture("statefulset.json")
    desired = {**desired, "status": {"replicas": 5}}
    assert calculate_patch(live, desired).is_empty
    assert calculate_patch(live, desired, ignore_status_fields()).is_empty


def test_ignore_pvc_template_type_meta_and_status() -> None:
    desired, live = live_from_fixture("statefulset.json")
    desired = copy.deepcopy(desired)
    desired["spec"]["volumeClaimTemplates"][0].update(
        {"apiVersion": "v1", "kind": "PVC", "status": {"phase": "Bound"}})
    assert not calculate_patch(live, desired).is_empty
    assert calculate_patch(live, desired, ignore_pvc_template_type_meta_and_status()).is_empty


@pytest.mark.parametrize("path", ["", "spec..replicas", 3])
def test_bad_option_paths_are_value_errors(path: Any) -> None:
    with pytest.raises(InvalidOptionError):
        ignore_field(path)
    with pytest.raises(ValueError, match="options are MatchOption"):
        calculate_patch({"apiVersion": "v1", "kind": "K", "metadata": {"name": "n"}},
                        {"apiVersion": "v1", "kind": "K", "metadata": {"name": "n"}},
                        "spec.replicas")  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionError):
        calculate_patch({"apiVersion": "v1", "kind": "K", "metadata": {"name": "n"}},
                        {"apiVersion": "v1", "kind": "K", "metadata": {"name": "n"}},
                        {"path": "spec"})  # type: ignore[arg-type]


_GOOD = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}


@pytest.mark.parametrize(
    ("current", "desired", "field"),
    [
        (["not", "a", "map"], _GOOD, ""),
        (_GOOD, "text", ""),
        ({"kind": "ConfigMap", "metadata": {"name": "c"}}, _GOOD, "apiVersion"),
        (_GOOD, {"apiVersion": "v1", "metadata": {"name": "c"}}, "kind"),
        (_GOOD, {"apiVersion": "v1", "kind": "ConfigMap"}, "metadata"),
        (_GOOD, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}, "metadata.name"),
        (_GOOD, {**_GOOD, "kind": "Secret"}, "kind"),
        (_GOOD, {**_GOOD, "metadata": {"name": "other"}}, "metadata.name"),
        ({**_GOOD, "metadata": {"name": "c", "namespace": "a"}},
         {**_GOOD, "metadata": {"name": "c", "namespace": "b"}}, "metadata.namespace"),
        (_GOOD, {**_GOOD, "apiVersion": "apps/v1"}, "apiVersion"),
    ],
)
def test_bad_input_raises_invalid_object_error_naming_the_field(
    current: Any, desired: Any, field: str
) -> None:
    with pytest.raises(InvalidObjectError) as raised:
        calculate_patch(current, desired)
    assert raised.value.field == field
    assert isinstance(raised.value, ValueError)
    if field:
        assert field.split(".")[-1] in str(raised.value)


@pytest.mark.parametrize(
    ("annotation", "reason"),
    [
        ("{not json", "unknown format"),
        ("optk1:%%%not-base64", "not valid base64"),
        ("optk1:bm90IHpsaWI=", "not valid compressed data"),
        ("optk1:" + base64.b64encode(zlib.compress(b"{not json")).decode(), "not valid JSON"),
    ],
)
def test_corrupt_annotation_falls_back_to_two_way_and_never_deletes(
    annotation: str, reason: str
) -> None:
    desired, live = _deployment()
    live["metadata"]["annotations"][LAST_APPLIED_ANNOTATION] = annotation
    _edit(desired, "label-removed")
    _edit(desired, "image")
    result = calculate_patch(live, desired)
    assert result.fallback_reason is not None
    assert reason in result.fallback_reason
    assert reason in result.explain()
    assert "tier" not in result.patch["metadata"].get("labels", {})
    after = apply_result(live, result)
    assert after["metadata"]["labels"]["tier"] == "front"
    assert _containers(after)[0]["image"] == "nginx:1.27"
    assert calculate_patch(after, desired).fallback_reason is None


def test_foreign_annotation_falls_back() -> None:
    desired, live = _deployment()
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"},
             "data": {"x": "y"}}
    live = with_annotation(live, other)
    result = calculate_patch(live, desired)
    assert result.fallback_reason is not None
    assert "ConfigMap web" in result.fallback_reason


def test_inputs_are_not_mutated() -> None:
    import json

    desired, live = _deployment()
    _edit(desired, "env-removed")
    _edit(desired, "label-removed")
    before = json.dumps([live, desired], sort_keys=True)
    result = calculate_patch(live, desired)
    result.patch["metadata"]["labels"]["x"] = "mutated"
    assert json.dumps([live, desired], sort_keys=True) == before


def test_result_is_readable_in_a_log_line() -> None:
    desired, live = _deployment()
    _edit(desired, "image")
    result = calculate_patch(live, desired)
    text = str(result)
    assert text.startswith("Deployment web: 2 field change(s) ")
    assert "\n" not in text
    change = '~ spec.template.spec.containers[0].image: "nginx:1.25" -> "nginx:1.27"'
    assert change in text
    assert change in result.explain().splitlines()
    assert "is_empty=False" in repr(result)
    assert str(calculate_patch(live, _deployment()[0])) == "Deployment web: unchanged"
