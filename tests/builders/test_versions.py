"""Several versions from typed specs: the CRD, conversions through the hub, and their properties.

Pure: no server. The Thanos example's versions are checked by property (``check_conversions``);
a deliberately lossy conversion (a fixture below) is caught with a shrunk example; a spoke that
holds less than the hub keeps the rest in the conversion annotation.
"""

from __future__ import annotations

import json
import re

import attrs
import pytest

from builders.specs import (
    CONVERSION_ANNOTATION,
    ApiVersion,
    CelRule,
    PrinterColumn,
    SpecFieldError,
    UnsupportedSpecTypeError,
    Versions,
    crd_for,
    spec_field,
)
from builders.testing import CONVERSION_PROPERTIES, check_conversions
from examples.thanos.crds import (
    API_VERSION,
    API_VERSION_2,
    DEFAULT_INGRESS_CLASS,
    STORAGE_IMMUTABLE,
    THANOS_CRD,
    THANOS_VERSIONED_CRD,
    THANOS_VERSIONS,
    Ingress,
    ObjectStorage,
    ServingComponent,
    StorageComponent,
    ThanosSpecV1Alpha2,
)


@attrs.frozen(kw_only=True)
class BoxV2:
    """The hub: a name, a size and a colour."""

    name: str = spec_field(max_length=20)
    size: int = spec_field(default=1, minimum=1, maximum=9)
    colour: str | None = spec_field(default=None, max_length=8)


@attrs.frozen(kw_only=True)
class BoxV1:
    """The old spoke: the name was called title, and there was no colour."""

    title: str = spec_field(max_length=20, rules=[CelRule(rule="self.size() > 0")])
    size: int = spec_field(default=1, minimum=1, maximum=9)


def _v1_to_hub(spec: BoxV1) -> BoxV2:
    return BoxV2(name=spec.title, size=spec.size)


def _v1_from_hub(spec: BoxV2) -> BoxV1:
    return BoxV1(title=spec.name, size=spec.size)


def _lossy_to_hub(spec: BoxV1) -> BoxV2:
    """A deliberately lossy conversion: it truncates the name to 10 characters."""
    return BoxV2(name=spec.title[:10], size=spec.size)


def _boxes(to_hub: object = _v1_to_hub) -> Versions:
    return Versions(
        group="example.com", kind="Box", hub="v2",
        versions=[
            ApiVersion(name="v1", spec=BoxV1, to_hub=to_hub, from_hub=_v1_from_hub,  # type: ignore[arg-type]
                       deprecated=True, deprecation_warning="example.com/v1 Box is deprecated",
                       printer_columns=[PrinterColumn(name="Title", json_path=".spec.title")]),
            ApiVersion(name="v2", spec=BoxV2),
        ],
    )


def test_crd_emits_every_version_with_schema_flags_columns_and_rules() -> None:
    crd = crd_for(_boxes(), plural="boxes")
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1", "v2"]
    assert versions["v2"]["storage"] is True
    assert versions["v1"]["storage"] is False
    assert versions["v1"]["served"]
    assert versions["v2"]["served"]
    assert versions["v1"]["deprecated"] is True
    assert versions["v1"]["deprecationWarning"] == "example.com/v1 Box is deprecated"
    assert "deprecated" not in versions["v2"]
    spec_v1 = versions["v1"]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec_v2 = versions["v2"]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert set(spec_v1["properties"]) == {"title", "size"}
    assert set(spec_v2["properties"]) == {"name", "size", "colour"}
    assert spec_v1["properties"]["title"]["x-kubernetes-validations"] == [
        {"rule": "self.size() > 0"}]
    assert [c["name"] for c in versions["v1"]["additionalPrinterColumns"]] == ["Title", "Age"]
    assert "additionalPrinterColumns" not in versions["v2"]
    assert crd["spec"]["conversion"] == {"strategy": "None"}
    assert crd["metadata"]["name"] == "boxes.example.com"


def test_thanos_crds_carry_the_storage_rule() -> None:
    for crd in (THANOS_CRD, THANOS_VERSIONED_CRD):
        for version in crd["spec"]["versions"]:
            spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            stateful = [name for name, schema in spec.items()
                        if schema.get("x-kubernetes-validations")]
            assert len(stateful) == 2, version["name"]
            assert all(spec[name]["x-kubernetes-validations"] == [STORAGE_IMMUTABLE.to_dict()]
                       for name in stateful)
    stored = [v["name"] for v in THANOS_VERSIONED_CRD["spec"]["versions"] if v["storage"]]
    assert stored == ["v1alpha2"]


def test_versions_refuse_a_missing_hub_or_a_spoke_without_conversions() -> None:
    with pytest.raises(UnsupportedSpecTypeError, match="hub 'v3'"):
        Versions(group="example.com", kind="Box", hub="v3",
                 versions=[ApiVersion(name="v2", spec=BoxV2)])
    with pytest.raises(UnsupportedSpecTypeError, match="needs to_hub and from_hub"):
        Versions(group="example.com", kind="Box", hub="v2",
                 versions=[ApiVersion(name="v2", spec=BoxV2), ApiVersion(name="v1", spec=BoxV1)])
    with pytest.raises(UnsupportedSpecTypeError, match="come from it"):
        crd_for(_boxes(), version="v1")


def test_convert_renames_through_the_hub_and_keeps_metadata_and_status() -> None:
    old = {"apiVersion": "example.com/v1", "kind": "Box",
           "metadata": {"name": "b", "namespace": "ns", "labels": {"a": "b"}},
           "spec": {"title": "hello", "size": 3}, "status": {"ok": True}}
    new = _boxes().convert(old, "example.com/v2")
    assert new == {**old, "apiVersion": "example.com/v2",
                   "spec": {"name": "hello", "size": 3}}
    assert _boxes().convert(new, "example.com/v1") == old


def test_what_a_spoke_cannot_hold_rides_in_the_annotation() -> None:
    hub = {"apiVersion": "example.com/v2", "kind": "Box", "metadata": {"name": "b"},
           "spec": {"name": "hello", "size": 3, "colour": "red"}}
    spoke = _boxes().convert(hub, "example.com/v1")
    assert spoke["spec"] == {"title": "hello", "size": 3}
    saved = json.loads(spoke["metadata"]["annotations"][CONVERSION_ANNOTATION])
    assert saved == {"spec": hub["spec"]}
    assert _boxes().convert(spoke, "example.com/v2") == hub
    # Edited at the spoke since: the spoke's fields win, the annotation is dropped.
    edited = {**spoke, "spec": {"title": "bye", "size": 3}}
    assert _boxes().convert(edited, "example.com/v2") == {
        **hub, "spec": {"name": "bye", "size": 3}}


def test_convert_names_the_object_and_field_of_a_spec_that_does_not_fit() -> None:
    bad = {"apiVersion": "example.com/v1", "kind": "Box",
           "metadata": {"name": "b", "namespace": "ns"}, "spec": {"title": 5}}
    expected = r"Box ns/b: invalid spec\.title: 5: expected a string"
    with pytest.raises(SpecFieldError, match=expected):
        _boxes().convert(bad, "example.com/v2")


def test_box_conversions_hold_every_property() -> None:
    check_conversions(_boxes(), max_examples=80)


def test_thanos_conversions_hold_every_property() -> None:
    check_conversions(THANOS_VERSIONS)


def test_a_lossy_conversion_is_caught_with_a_shrunk_example() -> None:
    with pytest.raises(AssertionError) as caught:
        check_conversions(_boxes(_lossy_to_hub), max_examples=200)
    message = str(caught.value)
    assert "'spoke-hub-spoke' violated at version v1" in message
    # Shrunk: the shortest title the truncation breaks, eleven characters, size at its minimum.
    titles = re.findall(r"BoxV1\(title='([^']*)', size=(\d+)\)", message)
    assert titles, message
    assert len(titles[0][0]) == 11, message
    assert titles[0][1] == "1", message


def test_thanos_defaulting_and_validation() -> None:
    spec = ThanosSpecV1Alpha2(query_frontend=ServingComponent(), query=None)
    with pytest.raises(SpecFieldError, match=r"spec\.queryFrontend"):
        THANOS_VERSIONS.validate_spec(spec, None)
    warned = ThanosSpecV1Alpha2(store_gateway=StorageComponent())
    assert THANOS_VERSIONS.validate_spec(warned, None) == [
        "spec.storeGateway without spec.objectStorage keeps blocks on its volume only"]
    stored = ThanosSpecV1Alpha2(store_gateway=StorageComponent(),
                                object_storage=ObjectStorage(secret_name="objstore"))
    assert THANOS_VERSIONS.validate_spec(stored, None) == []
    # Ratcheting: an object stored before the rule can still be updated.
    assert THANOS_VERSIONS.validate_spec(spec, spec) == []
    exposed = ThanosSpecV1Alpha2(query=ServingComponent(ingress=Ingress(host="q.example")))
    defaulted = THANOS_VERSIONS.default_spec(exposed)
    assert defaulted.query is not None
    assert defaulted.query.ingress is not None
    assert defaulted.query.ingress.ingress_class_name == DEFAULT_INGRESS_CLASS


def test_property_names_are_listed() -> None:
    assert "spoke-hub-spoke" in CONVERSION_PROPERTIES
    assert API_VERSION != API_VERSION_2
