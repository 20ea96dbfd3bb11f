"""The kit's strategies generate what Kubernetes accepts: identifiers that pass the validation
rules, and whole objects that validate against the schemas (many examples per kind)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import builders as b
from builders import names, objects, schemas
from builders import testing as bt
from tests.builders.helpers import SITE_CRD
from tests.conftest import load_fixture

BUILTIN_KINDS = [
    ("Deployment", None),
    ("StatefulSet", None),
    ("DaemonSet", None),
    ("Service", None),
    ("ServiceAccount", None),
    ("ConfigMap", None),
    ("Secret", None),
    ("Role", None),
    ("ClusterRoleBinding", None),
    ("Ingress", None),
    ("PodDisruptionBudget", None),
    ("Pod", None),
    ("CronJob", "batch/v1"),
    ("HorizontalPodAutoscaler", "autoscaling/v2"),
]


@pytest.mark.parametrize(("kind", "api_version"), BUILTIN_KINDS)
def test_from_schema_objects_validate(kind: str, api_version: str | None) -> None:
    @settings(max_examples=25)
    @given(bt.from_schema(kind, api_version))
    def check(obj: dict[str, Any]) -> None:
        assert obj["kind"] == kind
        if api_version:
            assert obj["apiVersion"] == api_version
        assert "status" not in obj
        schemas.validate_object(obj)
        names.validate_name(obj["metadata"]["name"])

    check()


@pytest.mark.parametrize(
    "crd", [SITE_CRD, load_fixture("customresourcedefinition.json")["sent"]], ids=["site", "widget"]
)
def test_from_schema_follows_a_crd_structural_schema(crd: dict[str, Any]) -> None:
    group = crd["spec"]["group"]

    @settings(max_examples=40)
    @given(bt.from_schema(crd))
    def check(obj: dict[str, Any]) -> None:
        assert obj["apiVersion"].startswith(f"{group}/")
        schemas.validate_object(obj, crd_schema=crd)

    check()


def test_crd_constraints_are_honoured() -> None:
    crd_schema = {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size", "mode", "port", "tags"],
                "properties": {
                    "size": {"type": "integer", "minimum": 3, "maximum": 5},
                    "mode": {"type": "string", "enum": ["fast", "safe"]},
                    "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
                    "port": {"x-kubernetes-int-or-string": True},
                    "tags": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "note": {"type": "string", "nullable": True, "maxLength": 4},
                },
            }
        },
    }
    crd = {
        "kind": "CustomResourceDefinition",
        "spec": {
            "group": "x.dev",
            "names": {"kind": "Thing"},
            "versions": [
                {"name": "v1", "storage": True, "schema": {"openAPIV3Schema": crd_schema}}
            ],
        },
    }

    @settings(max_examples=40)
    @given(bt.from_schema(crd, "v1"))
    def check(obj: dict[str, Any]) -> None:
        spec = obj["spec"]
        assert 3 <= spec["size"] <= 5
        assert spec["mode"] in ("fast", "safe")
        assert len(spec["tags"]) >= 1
        schemas.validate_object(obj, crd_schema=crd)

    check()
    with pytest.raises(schemas.SchemaValidationError, match=r"spec\.size"):
        schemas.validate_object(
            {
                "apiVersion": "x.dev/v1",
                "kind": "Thing",
                "metadata": {"name": "t"},
                "spec": {"size": 9, "mode": "fast", "port": 1, "tags": ["a"]},
            },
            crd_schema=crd,
        )


def test_unknown_kinds_are_rejected() -> None:
    with pytest.raises(b.InvalidSpecError, match="Gizmo"):
        bt.from_schema("Gizmo")


@given(
    label=bt.dns_labels(),
    service_name=bt.dns_labels(rfc1035=True),
    subdomain=bt.dns_subdomains(),
    key=bt.label_keys(),
    value=bt.label_values(),
    labels=bt.label_maps(),
)
def test_identifiers_are_valid(
    label: str, service_name: str, subdomain: str, key: str, value: str, labels: dict[str, str]
) -> None:
    assert names.is_dns1123_label(label)
    assert names.is_dns1035_label(service_name)
    assert names.is_dns1123_subdomain(subdomain)
    assert names.is_label_key(key)
    assert names.is_label_value(value)
    names.validate_labels(labels)
    objects.object_meta(name=subdomain, namespace=label, labels=labels)


@given(quantity=bt.quantities())
def test_quantities_are_accepted_by_the_helpers(quantity: str | int) -> None:
    assert objects.resources(requests={"cpu": quantity})["requests"]["cpu"] == quantity


@given(meta=bt.object_metas(), ref=bt.owner_references(controller=True))
def test_metadata_and_owner_references_validate_in_an_object(
    meta: dict[str, Any], ref: dict[str, Any]
) -> None:
    assert ref["controller"] is True
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {**meta, "ownerReferences": [ref]}}
    schemas.validate_object(obj)
    names.identity_of(obj)


@given(st.data())
def test_size_bounds_are_respected(data: st.DataObject) -> None:
    size = data.draw(st.integers(min_value=1, max_value=63))
    assert len(data.draw(bt.dns_labels(max_size=size))) <= size
    assert len(data.draw(bt.dns_subdomains(max_size=size + 10))) <= size + 10
