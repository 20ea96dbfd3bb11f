"""overrides: user-given partial objects strategic-merge onto built ones."""

from __future__ import annotations

import copy

import pytest

import builders as b
from builders import objects, schemas
from tests.builders.helpers import make_parent, site_deployment


def test_containers_merge_by_name_and_new_fields_are_added() -> None:
    built, _ = site_deployment(make_parent())()
    snapshot = copy.deepcopy(built)
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "nginx", "env": [{"name": "MODE", "value": "debug"}]},
                        {"name": "sidecar", "image": "busybox"},
                    ]
                }
            }
        }
    }
    merged = b.overrides(built, patch)
    containers = merged["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["nginx", "sidecar"]
    assert containers[0]["image"] == "nginx:1.25"  # kept
    assert containers[0]["env"] == [{"name": "MODE", "value": "debug"}]
    assert built == snapshot
    schemas.validate_object(merged)


def test_null_removes_and_empty_patch_changes_nothing() -> None:
    built, _ = site_deployment(make_parent())()
    assert b.overrides(built, None) == built
    assert "replicas" not in b.overrides(built, {"spec": {"replicas": None}})["spec"]


def test_custom_resources_use_json_merge_patch() -> None:
    obj = {
        "apiVersion": "x.dev/v1",
        "kind": "Thing",
        "metadata": {"name": "t"},
        "spec": {"l": [1, 2]},
    }
    assert b.overrides(obj, {"spec": {"l": [3]}})["spec"] == {"l": [3]}


def test_identity_changes_and_bad_patches_are_rejected() -> None:
    built, _ = site_deployment(make_parent())()
    with pytest.raises(b.InvalidSpecError, match="must not change"):
        b.overrides(built, {"metadata": {"name": "other"}})
    with pytest.raises(b.InvalidSpecError, match="overrides of Deployment team-a/web-server"):
        b.overrides(built, {"spec": {"template": {"spec": {"containers": {"$patch": "bogus"}}}}})


def test_with_overrides_wraps_a_builder() -> None:
    parent = make_parent()
    obj, state = b.with_overrides(site_deployment(parent), {"spec": {"replicas": 7}})()
    assert obj["spec"]["replicas"] == 7
    assert state.is_present


def test_secret_values_never_appear_in_errors() -> None:
    obj = objects.secret(metadata={"name": "creds", "namespace": "n"}, data={"password": "hunter2"})
    with pytest.raises(b.InvalidSpecError) as caught:
        b.overrides(obj, {"metadata": {"name": "other"}, "stringData": {"password": "hunter2"}})
    assert "hunter2" not in str(caught.value)
    assert "hunter2" not in repr(caught.value.value)
    obj["data"]["password"] = 12345
    with pytest.raises(schemas.SchemaValidationError) as invalid:
        schemas.validate_object(obj)
    assert invalid.value.field == "data.password"
    assert "12345" not in str(invalid.value)
