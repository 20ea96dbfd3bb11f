"""Making and combining builders: binding, compose, present_if, for_each, components, errors."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import builders as b
from builders import objects
from tests.builders.helpers import build_site, make_parent, meta, site_config, site_deployment


def test_bound_builders_build_fresh_dicts_with_their_state() -> None:
    parent = make_parent()
    obj, state = site_deployment(parent)()
    assert state == b.DesiredState.PRESENT
    assert obj["kind"] == "Deployment"
    assert obj["metadata"]["name"] == "web-server"
    again, _ = site_deployment(parent)()
    assert again == obj
    assert again is not obj
    assert again["spec"] is not obj["spec"]


def test_compose_flattens_components_lists_and_nones_in_order() -> None:
    parent = make_parent(config={"a": "1"})
    builders = build_site(parent)
    kinds = [obj["kind"] for obj, _ in b.run_builders(builders, parent=parent)]
    assert kinds == ["Deployment", "Service", "ConfigMap"]
    component = b.Component(name="x", builders=[[site_deployment(parent)], None])
    assert len(component) == 1
    assert b.compose(None, [component, [[component]]]) == [*component, *component]
    with pytest.raises(TypeError, match="compose"):
        b.compose(42)  # type: ignore[arg-type]


def test_present_if_false_yields_the_absent_stub_of_the_same_identity() -> None:
    parent = make_parent()
    present, _ = site_config(parent)()
    stub, state = b.present_if(False, site_config(parent))()
    assert state.is_absent
    assert stub == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": present["metadata"]["name"], "namespace": "team-a"},
    }
    assert b.present_if(True, site_config(parent)) is not None
    assert b.present_if(True, site_config(parent))()[1].is_present


def test_present_if_can_take_the_identity_when_the_builder_cannot_run() -> None:
    def needs_config() -> Any:
        raise KeyError("config")

    identity = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "n"}}
    stub, state = b.present_if(False, needs_config, identity=identity)()
    assert stub == identity
    assert state == b.DesiredState.ABSENT
    with pytest.raises(ValueError, match="ABSENT"):
        b.present_if(False, needs_config, absent_state=b.DesiredState.PRESENT)


def test_absent_builds_a_stub() -> None:
    obj, state = b.absent("v1", "Service", name="old", namespace="team-a")()
    assert obj == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "old", "namespace": "team-a"},
    }
    assert state.is_absent


def test_for_each_repeats_a_builder_per_item() -> None:
    parent = make_parent()

    @b.resource_builder
    def shard(parent: b.KubeObject, index: int) -> dict[str, Any]:
        return objects.config_map(
            metadata=meta(parent, f"shard-{index}"), data={"index": str(index)}
        )

    built = b.run_builders(b.for_each(range(3), lambda i: shard(parent, i)))
    assert [o["metadata"]["name"] for o, _ in built] == [
        "web-shard-0",
        "web-shard-1",
        "web-shard-2",
    ]


def test_a_raising_builder_is_a_build_error_naming_builder_and_parent() -> None:
    parent = make_parent()
    del parent["spec"]["image"]
    with pytest.raises(b.BuilderFailedError) as caught:
        site_deployment(parent)()
    error = caught.value
    assert error.builder.endswith("site_deployment")
    assert error.parent == "Site team-a/web"
    assert "KeyError" in error.reason
    assert isinstance(error.__cause__, KeyError)


def test_plain_callables_get_the_parent_from_run_builders() -> None:
    parent = make_parent()

    def nameless() -> Any:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}

    with pytest.raises(
        b.BuilderFailedError, match=r"nameless for parent Site team-a/web.*metadata.name"
    ):
        b.run_builders([nameless], parent=parent)


@pytest.mark.parametrize(
    "result",
    [None, "text", {"kind": "ConfigMap"}, ({"apiVersion": "v1"}, "PRESENT"), (1, 2, 3)],
)
def test_results_without_identity_are_build_errors(result: Any) -> None:
    @b.resource_builder
    def broken(parent: b.KubeObject) -> Any:
        return result

    with pytest.raises(b.BuilderFailedError, match="broken"):
        broken(make_parent())()


def test_builders_do_not_mutate_the_parent() -> None:
    parent = make_parent(config={"a": "1"})
    snapshot = copy.deepcopy(parent)
    b.run_builders(build_site(parent))
    assert parent == snapshot
