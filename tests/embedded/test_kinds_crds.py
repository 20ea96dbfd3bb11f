"""CustomResourceDefinitions and custom resources: served types, schema pruning, defaults,
validation, status subresource, generation and list-map keys."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.embedded._crds import (
    default_from_schema,
    list_map_keys,
    prune,
    validate_against_schema,
)
from reconciler.embedded._kinds import Invalid, KindStrategy, ServerContext
from reconciler.embedded._registry import Registry, make_registry
from tests.conftest import load_fixture

CRD = load_fixture("customresourcedefinition.json")
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["mode"],
            "properties": {
                "mode": {"type": "string", "enum": ["fast", "safe"]},
                "size": {"type": "integer", "default": 1},
                "port": {"x-kubernetes-int-or-string": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name", "protocol"],
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "protocol": {"type": "string", "default": "TCP"},
                        },
                    },
                },
                "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                             "properties": {"spec": {"type": "object"}}},
            },
        },
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    },
}


def gadget_crd(*, status: bool, schema: dict[str, Any] = SCHEMA) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema},
    }
    if status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": "Gadget", "plural": "gadgets", "shortNames": ["gd"]},
                 "versions": [version]},
    }


def served(crd: dict[str, Any]) -> tuple[Registry, KindStrategy]:
    registry = make_registry()
    crd_type = registry.by_kind(crd["apiVersion"], crd["kind"])
    assert crd_type is not None
    stored = copy.deepcopy(crd)
    strategy = registry.strategy(crd_type)
    strategy.prepare_create(stored, ServerContext())
    strategy.validate_create(stored)
    registry.crd_applied(stored)
    rt = registry.by_kind(
        f"{crd['spec']['group']}/{crd['spec']['versions'][0]['name']}", crd["spec"]["names"]["kind"]
    )
    assert rt is not None
    return registry, registry.strategy(rt)


def gadget(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Gadget",
            "metadata": {"name": "g1", "namespace": "ns"}, "spec": {"mode": "fast", **spec}}


def stored(strategy: KindStrategy, obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    strategy.prepare_create(obj, ServerContext())
    strategy.validate_create(obj)
    return obj


# --- the CRD ---------------------------------------------------------------------------------


def test_crd_is_established_with_accepted_names() -> None:
    registry, _ = served(gadget_crd(status=True))
    crd_type = registry.by_kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    assert crd_type is not None
    crd = copy.deepcopy(gadget_crd(status=True))
    registry.strategy(crd_type).prepare_create(crd, ServerContext())
    assert crd["spec"]["names"]["singular"] == "gadget"
    assert crd["spec"]["names"]["listKind"] == "GadgetList"
    assert crd["spec"]["conversion"] == {"strategy": "None"}
    assert crd["status"]["acceptedNames"] == crd["spec"]["names"]
    assert [(c["type"], c["status"]) for c in crd["status"]["conditions"]] == [
        ("NamesAccepted", "True"), ("Established", "True")]
    assert crd["status"]["storedVersions"] == ["v1"]


def test_crd_update_records_a_new_storage_version_and_keeps_group() -> None:
    registry = make_registry()
    crd_type = registry.by_kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    assert crd_type is not None
    strategy = registry.strategy(crd_type)
    old = copy.deepcopy(CRD["sent"])
    strategy.prepare_create(old, ServerContext())
    new = copy.deepcopy(old)
    v1 = {**new["spec"]["versions"][0], "name": "v1"}
    new["spec"]["versions"] = [{**new["spec"]["versions"][0], "storage": False}, v1]
    strategy.prepare_update(old, new, ServerContext())
    strategy.validate_update(old, new)
    assert new["status"]["storedVersions"] == ["v1alpha1", "v1"]
    assert strategy.spec_changed(old, new)
    regrouped = copy.deepcopy(old)
    regrouped["spec"]["group"] = "example.org"
    with pytest.raises(Invalid) as raised:
        strategy.validate_update(old, regrouped)
    assert [c["field"] for c in raised.value.causes] == ["metadata.name", "spec.group"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda c: c["metadata"].update(name="widgets.example.org"), "metadata.name"),
        (lambda c: c["spec"]["versions"][0].pop("schema"),
         "spec.versions[0].schema.openAPIV3Schema"),
        (lambda c: c["spec"]["versions"][0].update(storage=False), "spec.versions"),
        (lambda c: c["spec"].update(scope="Global"), "spec.scope"),
        (lambda c: c["spec"]["names"].pop("kind"), "spec.names.kind"),
    ],
)
def test_invalid_crds_are_rejected(change: Any, field: str) -> None:
    crd = copy.deepcopy(CRD["sent"])
    change(crd)
    registry = make_registry()
    crd_type = registry.by_kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    assert crd_type is not None
    strategy = registry.strategy(crd_type)
    strategy.prepare_create(crd, ServerContext())
    with pytest.raises(Invalid) as raised:
        strategy.validate_create(crd)
    assert field in [c["field"] for c in raised.value.causes]


def test_served_type_has_discovery_data() -> None:
    registry, strategy = served(gadget_crd(status=False))
    rt = strategy.resource_type
    assert (rt.plural, rt.singular, rt.short_names) == ("gadgets", "gadget", ("gd",))
    assert rt.subresources == frozenset()
    assert registry.lookup("example.com", "v1", "gadgets") is rt


# --- custom resources ------------------------------------------------------------------------


def test_widget_recording_defaults_size() -> None:
    recording = load_fixture("customresource.json")
    _, strategy = served(CRD["sent"])
    obj = stored(strategy, recording["sent"])
    assert obj["spec"] == recording["returned"]["spec"]
    assert "status" not in obj


def test_unknown_fields_are_pruned_except_where_preserved() -> None:
    _, strategy = served(gadget_crd(status=True))
    obj = stored(strategy, {
        **gadget(
            colour="red",
            extra={"anything": {"goes": [1]}},
            labels={"a": "b"},
            template={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                      "spec": {}, "junk": 1},
        ),
        "topLevel": True,
    })
    assert "topLevel" not in obj
    assert "colour" not in obj["spec"]
    assert obj["spec"]["extra"] == {"anything": {"goes": [1]}}
    assert obj["spec"]["labels"] == {"a": "b"}
    assert obj["spec"]["template"] == {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}
    assert obj["metadata"] == {"name": "g1", "namespace": "ns"}


def test_defaults_reach_list_items_and_replace_null() -> None:
    _, strategy = served(gadget_crd(status=True))
    obj = stored(strategy, gadget(size=None, ports=[{"name": "http"}, {"name": "dns",
                                                                    "protocol": "UDP"}]))
    assert obj["spec"]["size"] == 1
    assert obj["spec"]["ports"] == [{"name": "http", "protocol": "TCP"},
                                    {"name": "dns", "protocol": "UDP"}]


def test_schema_violations_give_real_causes() -> None:
    _, strategy = served(gadget_crd(status=True))
    obj = gadget(size="big", port=1.5, labels={"a": 1})
    obj["spec"]["mode"] = "slow"
    with pytest.raises(Invalid) as raised:
        stored(strategy, obj)
    assert raised.value.causes == [
        {"reason": "FieldValueNotSupported",
         "message": 'Unsupported value: "slow": supported values: "fast", "safe"',
         "field": "spec.mode"},
        {"reason": "FieldValueTypeInvalid",
         "message": 'Invalid value: "string": spec.size in body must be of type integer: '
                    '"string"',
         "field": "spec.size"},
        {"reason": "FieldValueTypeInvalid",
         "message": 'Invalid value: "number": spec.port in body must be of type '
                    'integer,string: "number"',
         "field": "spec.port"},
        {"reason": "FieldValueTypeInvalid",
         "message": 'Invalid value: "integer": spec.labels.a in body must be of type string: '
                    '"integer"',
         "field": "spec.labels.a"},
    ]
    missing = gadget()
    del missing["spec"]["mode"]
    with pytest.raises(Invalid) as raised:
        stored(strategy, missing)
    assert raised.value.causes == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.mode"}]


def test_status_subresource_governs_status_and_generation() -> None:
    # generation.json "customResources": Widget (status subresource) and Gadget (none).
    _, with_status = served(gadget_crd(status=True))
    obj = stored(with_status, {**gadget(), "status": {"ready": True}})
    assert "status" not in obj
    update = {**copy.deepcopy(obj), "status": {"ready": True}}
    with_status.prepare_update(obj, update, ServerContext())
    assert "status" not in update
    assert not with_status.spec_changed(obj, update)
    relabelled = copy.deepcopy(obj)
    relabelled["metadata"]["labels"] = {"a": "b"}
    assert not with_status.spec_changed(obj, relabelled)
    status_update = {**copy.deepcopy(obj), "spec": {"mode": "safe"}, "status": {"ready": True}}
    with_status.prepare_status_update(obj, status_update)
    assert status_update == {**obj, "status": {"ready": True}}

    _, without = served(gadget_crd(status=False))
    obj = stored(without, {**gadget(), "status": {"ready": False}})
    assert obj["status"] == {"ready": False}
    update = {**copy.deepcopy(obj), "status": {"ready": True}}
    without.prepare_update(obj, update, ServerContext())
    assert update["status"] == {"ready": True}
    assert without.spec_changed(obj, update)


def test_list_map_keys_are_exposed_for_the_matcher() -> None:
    _, strategy = served(gadget_crd(status=True))
    assert strategy.list_map_keys() == {("spec", "ports"): ("name", "protocol")}
    nested = {"type": "object", "properties": {"groups": {"type": "array", "items": {
        "type": "object", "properties": {"rules": {
            "type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["alert"], "items": {"type": "object"}}}}}}}
    assert list_map_keys(nested) == {("groups", "*", "rules"): ("alert",)}


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.sampled_from(["spec", "size", "mode", "x", "ports", "name"]),
                      children, max_size=4),
    max_leaves=12,
)


@given(value=st.dictionaries(st.sampled_from(["spec", "status", "junk"]), _json, max_size=3))
def test_pruning_and_defaulting_are_idempotent(value: dict[str, Any]) -> None:
    once = default_from_schema(prune(value, SCHEMA, root=True), SCHEMA)
    assert default_from_schema(prune(once, SCHEMA, root=True), SCHEMA) == once
    assert set(once) <= {"spec", "status"}
    assert validate_against_schema({"spec": {"mode": "safe"}}, SCHEMA) == []


def test_strategies_keep_the_metadata_dict_the_core_holds() -> None:
    # The core keeps a reference to obj["metadata"] across the strategy calls.
    _, strategy = served(gadget_crd(status=True))
    old = stored(strategy, gadget())
    for prepare in (
        lambda new: strategy.prepare_update(old, new, ServerContext()),
        lambda new: strategy.prepare_status_update(old, new),
        lambda new: strategy.prepare_create(new, ServerContext()),
    ):
        new = copy.deepcopy(old)
        held = new["metadata"]
        prepare(new)
        assert new["metadata"] is held


def test_bounds_lengths_patterns_and_item_counts() -> None:
    schema = {"type": "object", "properties": {
        "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
        "name": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[a-z]+$"},
        "tags": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
    }}
    ok = {"replicas": 10, "ratio": 0.5, "name": "abc", "tags": ["x"]}
    assert validate_against_schema(ok, schema) == []
    bad = {"replicas": 0, "ratio": 0, "name": "ABCDEF", "tags": ["x", "y"]}
    assert [(c["field"], c["message"]) for c in validate_against_schema(bad, schema)] == [
        ("replicas", "Invalid value: 0: replicas in body should be greater than or equal to 1"),
        ("ratio", "Invalid value: 0: ratio in body should be greater than 0"),
        ("name", 'Invalid value: "ABCDEF": name in body should be at most 5 chars long'),
        ("name", "Invalid value: \"ABCDEF\": name in body should match '^[a-z]+$'"),
        ("tags", "Invalid value: 2: tags in body should have at most 1 items"),
    ]


def test_custom_resource_unknown_fields_are_reported() -> None:
    _, strategy = served(gadget_crd(status=True))
    sent = {**gadget(colour="red", extra={"kept": 1}, ports=[{"name": "a", "junk": 1}]),
            "top": 1}
    assert strategy.unknown_fields(sent) == ["spec.colour", "spec.ports[0].junk", "top"]
    assert strategy.unknown_fields(stored(strategy, sent)) == []


def test_protected_groups_need_approval_and_never_shadow_builtins() -> None:
    crd = gadget_crd(status=False)
    crd["metadata"]["name"] = "deployments.apps.k8s.io"
    crd["spec"]["group"] = "apps.k8s.io"
    crd["spec"]["names"] = {"kind": "Deployment", "plural": "deployments"}
    registry = make_registry()
    crd_type = registry.by_kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    assert crd_type is not None
    with pytest.raises(Invalid) as raised:
        stored(registry.strategy(crd_type), crd)
    assert [c["field"] for c in raised.value.causes] == [
        "metadata.annotations[api-approved.kubernetes.io]"]
    crd["metadata"]["annotations"] = {"api-approved.kubernetes.io": "unapproved, testing"}
    stored(registry.strategy(crd_type), crd)

    clash = gadget_crd(status=False)
    clash["spec"]["group"], clash["spec"]["versions"][0]["name"] = "", "v1"
    clash["spec"]["names"] = {"kind": "ConfigMap", "plural": "configmaps"}
    builtin = registry.lookup("", "v1", "configmaps")
    registry.crd_applied(clash)  # even if one got through, the built-in type stays
    assert registry.lookup("", "v1", "configmaps") is builtin
    assert registry.by_kind("v1", "ConfigMap") is builtin
