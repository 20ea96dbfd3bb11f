"""List-map keys and CEL rules of typed specs, from the class to the servers (issue 36).

``spec_field(list_map_keys=...)`` makes a list of spec objects a list-map: the generated CRD says
``x-kubernetes-list-type: map`` with its keys, ``spec_of`` and both servers refuse two items of
the same keys (the embedded server with kube-apiserver's words), and ``spec_instances`` draws
unique keys. A field's CEL rules (``x-kubernetes-validations``) filter what ``spec_instances``
draws, with a clear error when a rule cannot hold. Drawn specs are sent to both servers: every
one is admitted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings

from builders.specs import (
    CelRule,
    SpecFieldError,
    UnsupportedSpecTypeError,
    crd_for,
    spec_field,
    spec_of,
    to_spec_dict,
)
from builders.testing import spec_instances
from reconciler import InvalidError, KubernetesClient
from tests.builders.test_specs import _established


@attrs.frozen(kw_only=True)
class Port:
    """A named port."""

    name: str = spec_field(pattern="^[a-c]{1,2}$")
    protocol: str = spec_field(default="TCP", pattern="^(TCP|UDP)$")
    number: int = spec_field(minimum=1, maximum=65535)


@attrs.frozen(kw_only=True)
class Scaling:
    """Bounds of the replicas."""

    low: int = spec_field(minimum=0, maximum=20)
    high: int = spec_field(minimum=0, maximum=20)


@attrs.frozen(kw_only=True)
class RuledSpec:
    """A spec with list-maps and CEL rules."""

    ports: list[Port] = spec_field(factory=list, max_items=6,
                                   list_map_keys=("name", "protocol"))
    scaling: Scaling | None = spec_field(default=None, rules=[
        CelRule(rule="self.low <= self.high", message="low must not exceed high")])
    owner: str = spec_field(default="team-a", pattern="^(team|user)-[a-z]$", rules=[
        CelRule(rule="self.startsWith('team-')", message="owner is a team")])
    weights: list[int] = spec_field(factory=list, minimum=0, maximum=9, max_items=4, rules=[
        CelRule(rule="self.all(w, w % 2 == 0)"),
        CelRule(rule="self == oldSelf", message="transition rules only run on updates")])


GROUP = "rules.test.optk.dev"
CRD = crd_for(RuledSpec, group=GROUP, kind="Ruled", version="v1")
NAMESPACE = "spec-rules"


def test_the_crd_declares_the_list_map_and_the_rules() -> None:
    spec = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    ports = spec["properties"]["ports"]
    assert ports["x-kubernetes-list-type"] == "map"
    assert ports["x-kubernetes-list-map-keys"] == ["name", "protocol"]
    assert spec["properties"]["scaling"]["x-kubernetes-validations"] == [
        {"rule": "self.low <= self.high", "message": "low must not exceed high"}]


def test_spec_of_refuses_two_items_of_the_same_keys() -> None:
    parent = {"apiVersion": f"{GROUP}/v1", "kind": "Ruled", "metadata": {"name": "r"},
              "spec": {"ports": [{"name": "a", "number": 1}, {"name": "a", "number": 2,
                                                               "protocol": "TCP"}]}}
    with pytest.raises(SpecFieldError, match=r"spec\.ports.*item 1 repeats the keys"):
        spec_of(parent, RuledSpec)
    parent["spec"]["ports"][1]["protocol"] = "UDP"
    assert len(spec_of(parent, RuledSpec).ports) == 2


@attrs.frozen(kw_only=True)
class _Item:
    name: str | None = spec_field(default=None)
    tags: list[str] = spec_field(factory=list)


@attrs.frozen(kw_only=True)
class _Strings:
    items: list[str] = spec_field(factory=list, list_map_keys=("name",))


@attrs.frozen(kw_only=True)
class _NotAList:
    items: int = spec_field(default=1, list_map_keys=("name",))


@attrs.frozen(kw_only=True)
class _UnknownKey:
    items: list[_Item] = spec_field(factory=list, list_map_keys=("nom",))


@attrs.frozen(kw_only=True)
class _ListKey:
    items: list[_Item] = spec_field(factory=list, list_map_keys=("tags",))


@attrs.frozen(kw_only=True)
class _OptionalKey:
    items: list[_Item] = spec_field(factory=list, list_map_keys=("name",))


@pytest.mark.parametrize(("cls", "says"), [
    (_Strings, "needs a list of spec objects"),
    (_NotAList, "needs a list of spec objects"),
    (_UnknownKey, "'nom' is not a field of the items"),
    (_ListKey, "'tags' must be a string, number or boolean"),
    (_OptionalKey, "'name' must be required or have a (server) default"),
])
def test_list_map_keys_the_server_would_refuse_are_refused_where_the_crd_is_made(
    cls: type, says: str
) -> None:
    with pytest.raises(UnsupportedSpecTypeError) as caught:
        crd_for(cls, group=GROUP, kind="Bad", version="v1")
    assert says in str(caught.value)
    assert f"spec class {cls.__name__} field items" in str(caught.value)


def test_list_map_keys_are_field_names() -> None:
    with pytest.raises(TypeError, match="list_map_keys"):
        spec_field(factory=list, list_map_keys="name")


@attrs.frozen(kw_only=True)
class Impossible:
    """A rule its field's range can never meet."""

    size: int = spec_field(minimum=0, maximum=5, rules=[CelRule(rule="self > 10")])


def test_a_rule_no_drawn_value_meets_is_a_clear_error() -> None:
    @settings(max_examples=1, database=None)
    @given(spec_instances(Impossible))
    def draw(spec: Impossible) -> None:
        raise AssertionError(f"drew {spec}")

    with pytest.raises(UnsupportedSpecTypeError) as caught:
        draw()
    message = str(caught.value)
    assert "spec class Impossible field size" in message
    assert "'self > 10'" in message
    assert re.search(r"no value drawn in \d+ tries satisfies", message)


@pytest.fixture(scope="module")
def ruled(kube_api: Any) -> Iterator[KubernetesClient]:
    """A client of ``kube_api`` with the Ruled CRD installed and Established (both servers)."""
    client = KubernetesClient(kube_api.api_client())
    client.create(CRD)
    assert _established(client, CRD["metadata"]["name"])
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    yield client
    client.delete("v1", "Namespace", NAMESPACE)
    client.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD["metadata"]["name"])


def _create(client: KubernetesClient, spec: Any) -> dict[str, Any]:
    """A dry-run create of a Ruled parent: what the server admits, validated and defaulted."""
    return client.create({"apiVersion": f"{GROUP}/v1", "kind": "Ruled",
                          "metadata": {"name": "r", "namespace": NAMESPACE}, "spec": spec},
                         dry_run=True)


@pytest.mark.both_servers
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(spec_instances(RuledSpec))
def test_every_drawn_spec_is_admitted(ruled: KubernetesClient, spec: RuledSpec) -> None:
    names = [(p.name, p.protocol) for p in spec.ports]
    assert len(names) == len(set(names))
    stored = _create(ruled, to_spec_dict(spec))
    assert spec_of(stored, RuledSpec) == spec


@pytest.mark.both_servers
def test_both_servers_refuse_duplicate_keys_and_broken_rules(ruled: KubernetesClient) -> None:
    with pytest.raises(InvalidError) as caught:
        _create(ruled, {"ports": [{"name": "a", "number": 1}, {"name": "b", "number": 2},
                                  {"name": "a", "protocol": "TCP", "number": 3}]})
    [cause] = caught.value.causes
    assert (cause.reason, cause.field) == ("FieldValueDuplicate", "spec.ports[2]")
    assert cause.message == ('Duplicate value: map[string]interface {}'
                             '{"name":"a", "protocol":"TCP"}')
    with pytest.raises(InvalidError, match="low must not exceed high"):
        _create(ruled, {"scaling": {"low": 3, "high": 2}})
