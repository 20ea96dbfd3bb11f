"""Typed specs: conversion both ways, the generated schema, and its round trip through a server.

The round trip runs on the embedded API server and, when kube assets are found, on a real
control plane (``kube_api`` in ``both_servers`` tests): the generated CRD is installed,
custom resources made from generated specs are created and read back, and the server must accept
what the class accepts, reject what it rejects and default what it defaults.
"""

from __future__ import annotations

import enum
import json
import time
from typing import Any, Literal

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import builders as b
from builders.specs import (
    PrinterColumn,
    SpecFieldError,
    UnsupportedSpecTypeError,
    crd_for,
    from_spec_dict,
    schema_for,
    spec_field,
    spec_of,
    to_spec_dict,
)
from builders.testing import spec_instances
from reconciler import InvalidError, KubernetesClient
from reconciler.embedded import EmbeddedApiServer


class Tier(enum.Enum):
    """A service tier."""

    GOLD = "gold"
    SILVER = "silver"


@attrs.frozen(kw_only=True)
class Storage:
    """Where the data lives."""

    size: str = spec_field(pattern="^[1-9][0-9]{0,3}Gi$", description="Volume size.")
    class_name: str | None = spec_field(default=None, max_length=20)


@attrs.frozen(kw_only=True)
class Limits:
    """Resource limits."""

    cpu: float = spec_field(default=0.5, minimum=0.1, maximum=8)
    memory_mb: int = spec_field(default=256, minimum=64, maximum=65536, name="memoryMB")


@attrs.frozen(kw_only=True)
class AppSpec:
    """An application."""

    image: str = spec_field(pattern="^[a-z0-9./-]+:[a-z0-9.]+$", max_length=60)
    replicas: int = spec_field(default=1, minimum=0, maximum=10)
    mode: Literal["fast", "safe"] = spec_field(default="safe")
    tier: Tier = spec_field(default=Tier.SILVER)
    debug: bool = spec_field(default=False, server_default=False)
    args: list[str] = spec_field(factory=list, max_items=3, min_length=1, max_length=10)
    ports: tuple[int, ...] = spec_field(default=(), minimum=1, maximum=65535, max_items=2)
    labels: dict[str, str] = spec_field(factory=dict)
    limits: Limits = spec_field(factory=Limits)
    storage: Storage | None = spec_field(default=None, description="Persistent storage.")
    extra: dict[str, Any] | None = spec_field(default=None)


@attrs.frozen(kw_only=True)
class AppStatus:
    """What the operator saw."""

    phase: Literal["Pending", "Running"] | None = spec_field(default=None)


GROUP = "specs.test.optk.dev"
CRD = crd_for(
    AppSpec, group=GROUP, kind="App", version="v1", status=AppStatus,
    printer_columns=[PrinterColumn(name="Replicas", json_path=".spec.replicas", type="integer")],
)


def parent(spec: Any, name: str = "a") -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "App",
            "metadata": {"name": name, "namespace": "ns"}, "spec": spec}


# -- conversion ---------------------------------------------------------------------------------

def test_spec_of_fills_defaults_and_converts_types() -> None:
    spec = spec_of(parent({"image": "web:1", "tier": "gold", "ports": [80],
                           "storage": {"size": "5Gi"}, "limits": {"memoryMB": 512}}), AppSpec)
    assert spec == AppSpec(image="web:1", tier=Tier.GOLD, ports=(80,),
                           storage=Storage(size="5Gi"), limits=Limits(memory_mb=512))
    assert spec.limits.cpu == 0.5
    assert spec.mode == "safe"
    assert spec.args == []


def test_to_spec_dict_is_json_and_converts_back() -> None:
    spec = AppSpec(image="web:1", tier=Tier.GOLD, storage=Storage(size="1Gi", class_name="ssd"),
                   extra={"a": [1, "b"]})
    out = to_spec_dict(spec)
    assert json.loads(json.dumps(out)) == out
    assert out["tier"] == "gold"
    assert out["storage"] == {"size": "1Gi", "className": "ssd"}
    assert "memoryMB" in out["limits"]
    assert spec_of(parent(out), AppSpec) == spec


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        ({}, "spec.image", "required"),
        ({"image": "web:1", "replicas": 11}, "spec.replicas", "above the maximum 10"),
        ({"image": "web:1", "replicas": True}, "spec.replicas", "expected an integer"),
        ({"image": "Web:1"}, "spec.image", "does not match"),
        ({"image": "web:1", "mode": "slow"}, "spec.mode", "not one of"),
        ({"image": "web:1", "tier": "bronze"}, "spec.tier", "not one of"),
        ({"image": "web:1", "storage": {"size": "0Gi"}}, "spec.storage.size", "does not match"),
        ({"image": "web:1", "args": ["a", "b", "c", "d"]}, "spec.args", "more than 3 items"),
        ({"image": "web:1", "args": [""]}, "spec.args", "shorter than 1"),
        ({"image": "web:1", "ports": ["80"]}, "spec.ports[0]", "expected an integer"),
        ({"image": "web:1", "labels": {"a": 1}}, "spec.labels['a']", "expected a string"),
        ({"image": "web:1", "replica": 2}, "spec.replica", "unknown field of AppSpec"),
        ({"image": "web:1", "limits": {"cpu": 9}}, "spec.limits.cpu", "above the maximum 8"),
        ("web", "spec", "expected an object"),
    ],
)
def test_spec_of_names_the_parent_and_the_field(spec: Any, field: str, reason: str) -> None:
    with pytest.raises(SpecFieldError) as caught:
        spec_of(parent(spec, name="shop"), AppSpec)
    assert caught.value.field == field
    assert caught.value.parent == "App ns/shop"
    assert reason in str(caught.value)
    assert "App ns/shop" in str(caught.value)
    assert isinstance(caught.value, b.InvalidSpecError | ValueError)


def test_null_is_absent_and_a_missing_spec_is_empty() -> None:
    assert spec_of(parent({"image": "a:1", "storage": None, "replicas": None}), AppSpec) == (
        AppSpec(image="a:1"))
    with pytest.raises(SpecFieldError, match="required"):
        spec_of({"kind": "App", "metadata": {"name": "x"}}, AppSpec)


def test_construction_checks_constraints_too() -> None:
    with pytest.raises(SpecFieldError, match=r"AppSpec\.replicas.*above the maximum"):
        AppSpec(image="a:1", replicas=99)
    assert from_spec_dict(Storage, {"size": "2Gi"}) == Storage(size="2Gi")


def test_unsupported_types_are_refused_with_the_field() -> None:
    @attrs.frozen(kw_only=True)
    class Bad:
        tags: set[str] = spec_field(factory=set)

    with pytest.raises(UnsupportedSpecTypeError, match="tags") as caught:
        schema_for(Bad)
    assert isinstance(caught.value, TypeError)
    with pytest.raises(UnsupportedSpecTypeError):
        schema_for(dict)

    @attrs.frozen(kw_only=True)
    class BadDefault:
        n: int = spec_field(default=5, maximum=3)

    with pytest.raises(UnsupportedSpecTypeError, match="default 5"):
        schema_for(BadDefault)


# -- the generated schema -------------------------------------------------------------------------

def test_the_schema_says_what_the_class_says() -> None:
    version = CRD["spec"]["versions"][0]
    root = version["openAPIV3Schema"] if "openAPIV3Schema" in version else version["schema"][
        "openAPIV3Schema"]
    spec = root["properties"]["spec"]
    props = spec["properties"]
    assert spec["required"] == ["image"]
    assert spec["description"] == "An application."
    assert props["replicas"] == {"type": "integer", "minimum": 0, "maximum": 10, "default": 1}
    assert props["mode"] == {"type": "string", "enum": ["fast", "safe"], "default": "safe"}
    assert props["tier"] == {"type": "string", "enum": ["gold", "silver"], "default": "silver"}
    assert props["debug"] == {"type": "boolean"}  # server_default=False: no schema default
    assert props["args"] == {"type": "array", "maxItems": 3, "default": [],
                             "items": {"type": "string", "minLength": 1, "maxLength": 10}}
    assert props["ports"]["items"] == {"type": "integer", "minimum": 1, "maximum": 65535}
    assert props["labels"] == {"type": "object", "additionalProperties": {"type": "string"},
                               "default": {}}
    assert props["limits"]["default"] == {"cpu": 0.5, "memoryMB": 256}
    assert props["storage"]["description"] == "Persistent storage."
    assert props["storage"]["required"] == ["size"]
    assert "default" not in props["storage"]
    assert props["extra"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    preserved = [path for path, _ in _walk(spec)
                 if path.endswith("x-kubernetes-preserve-unknown-fields")]
    assert preserved == ["properties.extra.x-kubernetes-preserve-unknown-fields"]
    status = root["properties"]["status"]
    assert status["properties"]["phase"]["enum"] == ["Pending", "Running"]
    assert status["x-kubernetes-preserve-unknown-fields"] is True  # the toolkit's conditions
    assert version["subresources"] == {"status": {}}
    assert [c["name"] for c in version["additionalPrinterColumns"]] == ["Replicas", "Age"]
    assert CRD["metadata"]["name"] == f"apps.{GROUP}"
    assert CRD["spec"]["names"]["listKind"] == "AppList"


def _walk(node: Any, path: str = "") -> list[tuple[str, Any]]:
    if not isinstance(node, dict):
        return [(path, node)]
    found = []
    for key, value in node.items():
        found += _walk(value, f"{path}.{key}" if path else key)
    return found


@pytest.mark.parametrize(("kind", "plural"), [("Thanos", "thanoses"), ("Policy", "policies"),
                                              ("Gateway", "gateways"), ("App", "apps")])
def test_plural_defaults(kind: str, plural: str) -> None:
    assert crd_for(Storage, group="g.io", kind=kind, version="v1")["spec"]["names"]["plural"] == (
        plural)


# -- the round trip through the embedded API server -----------------------------------------------

def _established(client: KubernetesClient, name: str, *, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        crd = client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
        conditions = (crd.get("status") or {}).get("conditions") or ()
        if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def apps(kube_api: EmbeddedApiServer) -> Any:
    """A client of ``kube_api`` with the App CRD installed and Established (both servers)."""
    client = KubernetesClient(kube_api.api_client())
    client.create(CRD)
    assert _established(client, CRD["metadata"]["name"])
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "specs-roundtrip"}}
    client.create(namespace)
    yield client
    client.delete("v1", "Namespace", "specs-roundtrip")
    client.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD["metadata"]["name"])


def _create(client: KubernetesClient, spec: Any) -> dict[str, Any]:
    """What the server would store for ``spec`` (a dry-run create: validated, defaulted)."""
    obj = parent(spec, name="app")
    obj["metadata"]["namespace"] = "specs-roundtrip"
    return client.create(obj, dry_run=True)


ROUND_TRIP = settings(max_examples=40, deadline=None,
                      suppress_health_check=[HealthCheck.function_scoped_fixture,
                                             HealthCheck.too_slow])


@pytest.mark.both_servers
@ROUND_TRIP
@given(spec_instances(AppSpec))
def test_the_server_accepts_every_generated_spec_and_keeps_it(apps: Any, spec: AppSpec) -> None:
    stored = _create(apps, to_spec_dict(spec))
    assert spec_of(stored, AppSpec) == spec


SERVER_DEFAULTED = ["replicas", "mode", "tier", "args", "ports", "labels", "limits"]


@pytest.mark.both_servers
@ROUND_TRIP
@given(spec_instances(AppSpec), st.data())
def test_the_server_defaults_what_the_class_defaults(apps: Any, spec: AppSpec,
                                                     data: st.DataObject) -> None:
    sent = to_spec_dict(spec)
    for key in data.draw(st.sets(st.sampled_from(SERVER_DEFAULTED))):
        sent.pop(key, None)
    if "limits" in sent and data.draw(st.booleans()):
        sent["limits"] = {}  # nested defaults apply inside a block that is sent empty
    stored = _create(apps, sent)
    expected = to_spec_dict(spec_of(parent(sent), AppSpec), server_defaults_only=True)
    assert stored["spec"] == {**expected, **({"debug": sent["debug"]} if "debug" in sent else {})}


BREAKS = {
    "replicas": st.integers(min_value=11, max_value=1000) | st.integers(max_value=-1),
    "image": st.sampled_from(["", "Web:1", "web", "a" * 61 + ":1"]),
    "mode": st.sampled_from(["slow", "FAST", ""]),
    "tier": st.sampled_from(["bronze", "Gold"]),
    "args": st.just(["a", "b", "c", "d"]) | st.just([""]) | st.just(["x" * 11]),
    "ports": st.just([0]) | st.just([70000]) | st.just([1, 2, 3]),
    "limits": st.just({"cpu": 0.01}) | st.just({"memoryMB": 1 << 20}),
    "storage": st.just({"size": "1Ti"}) | st.just({}) | st.just({"size": "1Gi",
                                                                   "className": "c" * 21}),
}


@pytest.mark.both_servers
@ROUND_TRIP
@given(spec_instances(AppSpec), st.sampled_from(sorted(BREAKS)), st.data())
def test_the_server_rejects_what_the_class_rejects(apps: Any, spec: AppSpec, field: str,
                                                   data: st.DataObject) -> None:
    sent = {**to_spec_dict(spec), field: data.draw(BREAKS[field])}
    with pytest.raises(SpecFieldError):
        spec_of(parent(sent), AppSpec)
    with pytest.raises(InvalidError):
        _create(apps, sent)
