"""Schema versions, patch metadata read from the schemas, quantities and diff formatting."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest

from objectmatcher import (
    DEFAULT_KUBERNETES_VERSION,
    DiffItem,
    UnsupportedVersionError,
    available_versions,
    calculate_patch,
    format_diff,
    has_builtin_schema,
    parse_quantity,
    quantities_equal,
)
from tests.objectmatcher.helpers import apply_result, converge, live_from_fixture, with_annotation


def test_versions_from_kubernetes_validate() -> None:
    versions = available_versions()
    assert DEFAULT_KUBERNETES_VERSION == "1.25"
    assert {"1.25", "1.30", "1.37"} <= set(versions)
    assert has_builtin_schema("apps/v1", "Deployment")
    assert has_builtin_schema("networking.k8s.io/v1", "Ingress", "v1.37.2")
    assert not has_builtin_schema("example.com/v1alpha1", "Widget")
    assert not has_builtin_schema("apps/v1", "Widget")
    with pytest.raises(UnsupportedVersionError) as raised:
        has_builtin_schema("apps/v1", "Deployment", "1.2")
    assert isinstance(raised.value, ValueError)
    assert "1.25" in str(raised.value)


@pytest.mark.parametrize("version", ["1.25", "1.30", "v1.37.0"])
def test_another_kubernetes_version_gives_the_same_list_semantics(version: str) -> None:
    desired, live = live_from_fixture("deployment.json")
    assert calculate_patch(live, desired, kubernetes_version=version).is_empty
    changed = copy.deepcopy(desired)
    changed["spec"]["template"]["spec"]["containers"].append({"name": "extra", "image": "x"})
    result = calculate_patch(live, changed, kubernetes_version=version)
    assert result.patch["spec"]["template"]["spec"]["containers"] == [
        {"name": "extra", "image": "x"}]


def test_merge_keys_come_from_the_schemas() -> None:
    """Volume mounts merge by mountPath, Service ports by port: no hand-written table."""
    desired, live = live_from_fixture("statefulset.json")
    changed = copy.deepcopy(desired)
    container = changed["spec"]["template"]["spec"]["containers"][0]
    container["volumeMounts"].append({"name": "data", "mountPath": "/other"})
    result = calculate_patch(live, changed)
    mounts = result.patch["spec"]["template"]["spec"]["containers"][0]
    assert mounts["volumeMounts"] == [{"name": "data", "mountPath": "/other"}]
    assert mounts["$setElementOrder/volumeMounts"] == [{"mountPath": "/data"},
                                                       {"mountPath": "/other"}]
    desired, live = live_from_fixture("service-clusterip.json")
    changed = copy.deepcopy(desired)
    changed["spec"]["ports"].append({"name": "https", "port": 443})
    result = calculate_patch(live, changed)
    assert result.patch["spec"]["ports"] == [{"name": "https", "port": 443}]
    after = apply_result(live, result)
    assert after["spec"]["ports"][0]["protocol"] == "TCP"  # the server's default is kept


def test_volumes_items_carry_retain_keys() -> None:
    volume = {"name": "data", "emptyDir": {}}
    desired: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x"}], "volumes": [volume]},
    }
    live = with_annotation(desired, desired)
    changed = copy.deepcopy(desired)
    changed["spec"]["volumes"] = [{"name": "data", "configMap": {"name": "cm"}}]
    result = calculate_patch(live, changed)
    assert result.patch["spec"]["volumes"] == [
        {"name": "data", "configMap": {"name": "cm"}, "emptyDir": None,
         "$retainKeys": ["configMap", "name"]}]
    assert apply_result(live, result)["spec"]["volumes"] == [
        {"name": "data", "configMap": {"name": "cm"}}]


def test_switching_a_volume_source_to_an_empty_struct_converges() -> None:
    desired: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x"}],
                 "volumes": [{"name": "data", "configMap": {"name": "cm"}}]},
    }
    live = with_annotation(desired, desired)
    live["spec"]["volumes"][0]["configMap"]["defaultMode"] = 420  # a server default
    changed = copy.deepcopy(desired)
    changed["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]  # {} is a value here
    after = converge(live, changed)
    assert after["spec"]["volumes"] == [{"name": "data", "emptyDir": {}}]


def test_custom_resource_metadata_maps_keep_others_keys() -> None:
    desired: dict[str, Any] = {
        "apiVersion": "example.com/v1", "kind": "Gadget",
        "metadata": {"name": "g", "labels": {"ours": "1"}}, "spec": {"a": {"b": 1}},
    }
    live = with_annotation(desired, desired)
    live["metadata"]["labels"]["theirs"] = "2"
    changed = {**desired, "metadata": {"name": "g"}, "spec": {}}
    result = calculate_patch(live, changed)
    assert result.patch["metadata"]["labels"] == {"ours": None}
    assert result.patch["spec"] == {"a": None}  # a struct we dropped goes whole
    after = converge(live, changed)
    assert after["metadata"]["labels"] == {"theirs": "2"}
    assert after["spec"] == {}


def test_custom_resource_resource_maps_compare_as_quantities() -> None:
    desired: dict[str, Any] = {
        "apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"},
        "spec": {"size": "1000m", "resources": {"limits": {"cpu": "1000m", "memory": "1Gi"}}},
    }
    live = with_annotation(desired, desired)
    live["spec"]["resources"]["limits"] = {"cpu": "1", "memory": "1024Mi"}
    assert calculate_patch(live, desired).is_empty
    live["spec"]["size"] = "1"
    result = calculate_patch(live, desired)
    assert result.patch["spec"] == {"size": "1000m"}
    converge(live, desired)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", Decimal(1)), ("1000m", Decimal(1)), ("250m", Decimal("0.25")),
        ("1Gi", Decimal(2**30)), ("1024Mi", Decimal(2**30)), ("1e3", Decimal(1000)),
        ("1.5k", Decimal(1500)), (".5", Decimal("0.5")), (2, Decimal(2)), (0.5, Decimal("0.5")),
        ("100n", Decimal("1E-7")), ("-1", Decimal(-1)),
    ],
)
def test_quantities_parse_to_exact_values(text: Any, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "Gi", "1GB", "one", "1 Gi", "1.2.3", True, None, [1]])
def test_non_quantities_do_not_parse(text: Any) -> None:
    assert parse_quantity(text) is None


def test_quantities_equal() -> None:
    assert quantities_equal("1000m", "1")
    assert quantities_equal("1Gi", "1073741824")
    assert quantities_equal("1", 1)
    assert not quantities_equal("1Gi", "1G")
    assert not quantities_equal(True, 1)
    assert quantities_equal("abc", "abc")
    assert not quantities_equal("abc", "abd")


def test_diff_items_read_well() -> None:
    items = (
        DiffItem(op="change", path=("spec", "replicas"), old=1, new=3),
        DiffItem(op="add", path=("spec", "containers", 1), new={"name": "b"}),
        DiffItem(op="remove", path=("metadata", "labels", "tier"), old="front"),
    )
    assert format_diff(items).splitlines() == [
        "~ spec.replicas: 1 -> 3",
        '+ spec.containers[1]: {"name": "b"}',
        '- metadata.labels.tier: "front"',
    ]
    assert format_diff(()) == "no changes"
    long = DiffItem(op="add", path=("data", "x"), new="y" * 500)
    assert len(str(long)) < 120
