"""Label-selector inputs (``builders.inputs.SelectorRef``), pure: the value, what ``Inputs`` gives
a builder for it (the matched objects sorted by name, copies), its digest and versions, and
``check_builders`` over drawn matches (none, some, forbidden, changed)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import builders as b
from builders import objects
from builders.inputs import (
    InputForbiddenError,
    InputMissingError,
    SelectorRef,
    inputs_digest,
    with_inputs_digest,
)
from builders.testing import InputStates, check_builders
from tests.builders.test_check_inputs import PARENTS

OPERATOR = "selector-test"


def _cm(name: str, ns: str = "ns", version: str = "1", **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": version,
                         "labels": labels}, "data": {"k": name}}


SEL = SelectorRef(api_version="v1", kind="ConfigMap", namespace="ns", match_labels={"team": "a"})


def test_a_selector_is_a_frozen_hashable_value_with_its_labels_sorted() -> None:
    one = SelectorRef(api_version="v1", kind="ConfigMap", namespace="ns",
                      match_labels={"z": "1", "a": "2"})
    other = SelectorRef(api_version="v1", kind="ConfigMap", namespace="ns",
                        match_labels=[("a", "2"), ("z", "1")])
    assert one == other
    assert hash(one) == hash(other)
    assert one.match_labels == (("a", "2"), ("z", "1"))
    assert one.label_selector == "a=2,z=1"
    assert str(one) == "ConfigMap.v1 ns -l a=2,z=1"
    assert str(SelectorRef(api_version="v1", kind="Secret")) == "Secret.v1 -l (every)"
    with pytest.raises(AttributeError):
        one.kind = "Secret"  # type: ignore[misc]
    with pytest.raises(TypeError):
        SelectorRef("v1", "ConfigMap")  # type: ignore[misc]  # keyword-only


def test_a_bad_label_is_refused_naming_the_field() -> None:
    with pytest.raises(b.InvalidSpecError, match=r"SelectorRef\(ConfigMap\)\.match_labels"):
        SelectorRef(api_version="v1", kind="ConfigMap", match_labels={"team": "no spaces"})
    with pytest.raises(ValueError, match="match_labels"):  # InvalidSpecError is a ValueError
        SelectorRef(api_version="v1", kind="ConfigMap", match_labels={"-bad-": "x"})


@given(labels=st.dictionaries(st.sampled_from(["team", "tier", "app"]),
                              st.sampled_from(["a", "b"]), max_size=3),
       wanted=st.dictionaries(st.sampled_from(["team", "tier"]), st.sampled_from(["a", "b"]),
                              max_size=2),
       ns=st.sampled_from(["ns", "other"]))
def test_matches_is_every_wanted_label_in_the_namespace(
    labels: dict[str, str], wanted: dict[str, str], ns: str
) -> None:
    sel = SelectorRef(api_version="v1", kind="ConfigMap", namespace="ns", match_labels=wanted)
    expected = ns == "ns" and all(labels.get(k) == v for k, v in wanted.items())
    assert sel.matches(_cm("x", ns, **labels)) is expected
    everywhere = SelectorRef(api_version="v1", kind="ConfigMap", match_labels=wanted)
    assert everywhere.matches(_cm("x", ns, **labels)) is all(
        labels.get(k) == v for k, v in wanted.items())


def test_selected_gives_copies_sorted_by_name_and_names_the_selector_when_unavailable() -> None:
    inputs = b.Inputs(selected={SEL: [_cm("c", team="a"), _cm("a", team="a")]})
    got = inputs.selected(SEL)
    assert [o["metadata"]["name"] for o in got] == ["a", "c"]
    got[0]["data"]["k"] = "changed"
    assert inputs.selected(SEL)[0]["data"]["k"] == "a"  # a copy each time
    assert SEL in inputs.refs
    assert len(inputs) == 0  # the mapping is of named inputs only
    assert "'k'" not in repr(inputs)
    assert "ConfigMap.v1 ns -l team=a" in repr(inputs)
    assert b.Inputs(selected={SEL: []}).selected(SEL) == []  # nothing matches: not missing
    with pytest.raises(InputForbiddenError, match=r"ConfigMap\.v1 ns -l team=a"):
        b.Inputs(forbidden=[SEL]).selected(SEL)
    with pytest.raises(InputMissingError):
        b.Inputs().selected(SEL)  # not declared


def test_digest_and_versions_follow_what_the_selector_matches() -> None:
    base = b.Inputs(selected={SEL: [_cm("a", team="a")]})
    same = b.Inputs(selected={SEL: [_cm("a", version="7", team="a")]})
    more = b.Inputs(selected={SEL: [_cm("a", team="a"), _cm("b", team="a")]})
    edited = b.Inputs(selected={SEL: [{**_cm("a", team="a"), "data": {"k": "other"}}]})
    assert inputs_digest(base) == inputs_digest(same)  # a version alone is no change
    assert len({inputs_digest(x) for x in (base, more, edited)}) == 3
    assert inputs_digest(b.Inputs(forbidden=[SEL]), [SEL]) != inputs_digest(base, [SEL])
    assert base.versions == (("ConfigMap.v1 ns -l team=a", "ns/a=1"),)
    assert more.versions != base.versions
    assert same.versions != base.versions


def _selector(parent: dict[str, Any]) -> SelectorRef:
    return SelectorRef(api_version="v1", kind="ConfigMap", namespace="ns",
                       match_labels={"app": parent["metadata"]["name"]})


def build(parent: dict[str, Any], inputs: b.Inputs) -> list[b.ResourceBuilder]:
    """A Deployment rolled by the digest of every ConfigMap labelled ``app=<parent>``."""
    sel = _selector(parent)

    @b.resource_builder
    def app(parent: dict[str, Any]) -> dict[str, Any]:
        names = [o["metadata"]["name"] for o in inputs.selected(sel)]
        dep = objects.deployment(
            metadata=b.child_meta(parent, component="app", managed_by=OPERATOR),
            selector_labels=b.selector_labels(parent, component="app"),
            containers=[objects.container(name="app", image="example.com/app:1",
                                          args=names)])
        return with_inputs_digest(dep, inputs_digest(inputs, [sel]))

    return [app(parent)]


def test_check_builders_draws_selector_matches() -> None:
    seen: list[int | None] = []

    def counting(parent: dict[str, Any], inputs: b.Inputs) -> list[b.ResourceBuilder]:
        sel = _selector(parent)
        matched = None if sel in inputs.forbidden else inputs.selected(sel)
        seen.append(None if matched is None else len(matched))
        assert matched is None or all(sel.matches(o) for o in matched)
        return build(parent, inputs)

    check_builders(counting, PARENTS, inputs=InputStates(declare=lambda p: [_selector(p)]),
                   managed_by=OPERATOR, max_examples=30)
    assert None in seen, seen  # forbidden
    assert 0 in seen, seen  # nothing matched
    assert any(n and n > 1 for n in seen), seen


def _copy(name: str, data: dict[str, Any]) -> Any:
    @b.resource_builder
    def copy(parent: dict[str, Any]) -> dict[str, Any]:
        return objects.config_map(
            metadata=b.child_meta(parent, component=f"copy-{name}", managed_by=OPERATOR),
            data=data)
    return copy


def test_a_child_per_matched_object_named_by_the_match_passes_input_changes() -> None:
    def per_match(parent: dict[str, Any], inputs: b.Inputs) -> list[b.ResourceBuilder]:
        out = []
        for obj in inputs.selected(_selector(parent)):
            out.append(_copy(obj["metadata"]["name"], dict(obj.get("data") or {}))(parent))
        return out

    check_builders(per_match, PARENTS, managed_by=OPERATOR, max_examples=20,
                   inputs=InputStates(declare=lambda p: [_selector(p)],
                                      states=("present", "missing")))
