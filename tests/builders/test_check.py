"""The testing kit checks itself: correct builders pass, and a deliberately broken builder is
caught for each invariant, with a message naming the invariant and the (shrunk) parent."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import strategies as st

import builders as b
from builders import names, objects
from builders import testing as bt
from tests.builders.helpers import (
    MANAGED_BY,
    SITE_CRD,
    build_site,
    make_parent,
    meta,
    site_deployment,
    site_service,
)

SITE_NAMES = bt.dns_labels(max_size=40, rfc1035=True)
# Full parents (labels, annotations) for the passing checks.
FULL_PARENTS = bt.from_schema(SITE_CRD, metadata=bt.object_metas(names=SITE_NAMES))


def _lean_metas(names: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Metadata without labels/annotations: failing checks shrink faster (the suite stays fast)."""
    return st.fixed_dictionaries(
        {
            "name": names,
            "namespace": bt.dns_labels(max_size=20),
            "uid": st.integers(0, 999).map(lambda n: f"uid-{n}"),
        }
    )


PARENTS = bt.from_schema(SITE_CRD, metadata=_lean_metas(SITE_NAMES))

Build = Callable[[b.KubeObject], list[b.ResourceBuilder]]


def _fails(build: Build, invariant: str, **options: Any) -> str:
    """Run check_builders expecting a violation of ``invariant``; returns the message."""
    with pytest.raises(AssertionError) as caught:
        bt.check_builders(
            build, PARENTS, **{"managed_by": MANAGED_BY, "max_examples": 30, **options}
        )
    message = str(caught.value)
    assert message.startswith(f"invariant '{invariant}' violated"), message
    assert "\nparent: {" in message
    return message


def test_the_correct_operator_passes() -> None:
    bt.check_builders(build_site, FULL_PARENTS, managed_by=MANAGED_BY, require_schemas=False)


def test_generated_parents_follow_the_crd() -> None:
    bt.check_builders(
        lambda parent: [lambda: (parent, b.DesiredState.PRESENT)],
        FULL_PARENTS,
        crd_schemas={"demo.optk.dev/v1alpha1/Site": SITE_CRD},
        require_schemas=True,
        skip=("owned",),
        max_examples=20,
    )


def test_a_raising_builder_breaks_builds_and_names_it() -> None:
    def build(parent: b.KubeObject) -> list[b.ResourceBuilder]:
        if parent["spec"]["replicas"] > 2:
            return [lambda: {}["missing"]]
        return build_site(parent)

    message = _fails(build, "builds")
    assert "KeyError" in message
    # shrunk: the smallest parent that fails has exactly 3 replicas and a one-letter name
    assert '"replicas": 3' in message
    assert re.search(r'"name": "[a-z]"', message)


def test_service_names_need_a_leading_letter() -> None:
    # Default names may start with a digit; a Service named after such a parent is invalid,
    # and the kit finds the smallest such parent: the one named "0".
    parents = bt.from_schema(SITE_CRD, metadata=_lean_metas(bt.dns_labels(max_size=10)))
    with pytest.raises(AssertionError) as caught:
        bt.check_builders(build_site, parents, max_examples=60)
    message = str(caught.value)
    assert message.startswith("invariant 'builds' violated: builder ")
    assert "site_service for parent Site" in message
    assert "DNS-1035" in message
    assert '"name": "0"' in message


def test_impure_builders_are_caught() -> None:
    counter = itertools.count()

    @b.resource_builder
    def stamped(parent: b.KubeObject) -> dict[str, Any]:
        return objects.config_map(metadata=meta(parent, "stamp"), data={"n": str(next(counter))})

    message = _fails(lambda p: [*build_site(p), stamped(p)], "pure")
    assert "ConfigMap" in message


def test_builders_mutating_the_parent_are_caught() -> None:
    def build(parent: b.KubeObject) -> list[b.ResourceBuilder]:
        parent["spec"].setdefault("seen", 0)  # type: ignore[index]
        return build_site(parent)

    assert "mutated its parent" in _fails(build, "pure")


def test_unstable_names_are_caught() -> None:
    counter = itertools.count()

    @b.resource_builder
    def moving(parent: b.KubeObject) -> dict[str, Any]:
        return objects.config_map(metadata=meta(parent, f"gen-{next(counter)}"))

    message = _fails(lambda p: [moving(p)], "stable names", skip=("pure",))
    assert "gen-" in message
    with pytest.raises(AssertionError, match="stable names"):
        bt.assert_stable_names(lambda p: [moving(p)], make_parent())


def test_invalid_names_are_caught() -> None:
    @b.resource_builder
    def raw_config(parent: b.KubeObject) -> dict[str, Any]:
        obj = objects.config_map(metadata=meta(parent, "config"))
        obj["metadata"]["name"] = parent["metadata"]["name"] + "_Config"
        return obj

    assert "_Config" in _fails(lambda p: [raw_config(p)], "valid names")


def test_duplicate_children_are_caught() -> None:
    message = _fails(lambda p: [site_service(p), site_deployment(p), site_service(p)], "unique")
    assert "two children are Service" in message


def test_schema_violations_are_caught() -> None:
    @b.resource_builder
    def bad_replicas(parent: b.KubeObject) -> dict[str, Any]:
        obj, _ = site_deployment(parent)()
        return {**obj, "spec": {**obj["spec"], "replicas": str(parent["spec"]["replicas"])}}

    message = _fails(lambda p: [bad_replicas(p), site_service(p)], "schema")
    assert "spec.replicas" in message


def test_missing_owner_reference_and_labels_are_caught() -> None:
    @b.resource_builder
    def orphan(parent: b.KubeObject) -> dict[str, Any]:
        obj, _ = site_deployment(parent)()
        obj["metadata"].pop("ownerReferences")
        return obj

    assert "controller owner reference" in _fails(lambda p: [orphan(p)], "owned")

    @b.resource_builder
    def unlabelled(parent: b.KubeObject) -> dict[str, Any]:
        return objects.config_map(metadata=objects.object_meta(name="x", namespace="y"))

    assert "app.kubernetes.io/managed-by" in _fails(lambda p: [unlabelled(p)], "owned")
    message = _fails(build_site, "owned", managed_by="someone-else")
    assert "want 'someone-else'" in message


def test_selectors_that_select_nothing_are_caught() -> None:
    @b.resource_builder
    def stray_service(parent: b.KubeObject) -> dict[str, Any]:
        return objects.service(
            metadata=meta(parent, "stray"),
            selector=b.selector_labels(parent, component="nothing"),
            ports={"http": 80},
        )

    message = _fails(lambda p: [site_deployment(p), stray_service(p)], "selectors")
    assert "selects no workload" in message

    @b.resource_builder
    def mismatched(parent: b.KubeObject) -> dict[str, Any]:
        obj, _ = site_deployment(parent)()
        obj["spec"]["template"]["metadata"]["labels"] = {"other": "x"}
        return obj

    assert "does not match its pod labels" in _fails(lambda p: [mismatched(p)], "selectors")


def test_absent_stubs_with_content_are_caught() -> None:
    def build(parent: b.KubeObject) -> list[b.ResourceBuilder]:
        obj, _ = site_service(parent)()
        return [site_deployment(parent), lambda: (obj, b.DesiredState.ABSENT)]

    message = _fails(build, "absent stubs")
    assert "'spec'" in message
    assert "metadata.labels" in message


def test_present_if_stubs_pass_the_absent_check() -> None:
    def build(parent: b.KubeObject) -> list[b.ResourceBuilder]:
        return [site_deployment(parent), b.present_if(False, site_service(parent))]

    bt.check_builders(build, PARENTS, managed_by=MANAGED_BY, max_examples=20)


def test_individual_assertions_work_on_examples() -> None:
    parent = make_parent(config={"k": "v"})
    children = bt.check_parent(build_site, parent, managed_by=MANAGED_BY)
    assert [o["kind"] for o, _ in children] == ["Deployment", "Service", "ConfigMap"]
    bt.assert_unique(children)
    bt.assert_selectors_match(children)
    with pytest.raises(ValueError, match="unknown invariants"):
        bt.check_parent(build_site, parent, skip=("nonsense",))
    assert set(bt.INVARIANTS) >= {"pure", "unique", "schema", "owned", "selectors"}


def test_match_expressions_follow_kubernetes_semantics() -> None:
    obj, state = site_deployment(make_parent())()
    labels = obj["spec"]["template"]["metadata"]["labels"]
    key = next(iter(labels))
    for op, values, ok in [
        ("In", [labels[key]], True),
        ("In", ["zz"], False),
        ("NotIn", ["zz"], True),
        ("Exists", [], True),
        ("DoesNotExist", [], False),
    ]:
        obj["spec"]["selector"] = {
            "matchExpressions": [{"key": key, "operator": op, "values": values}]
        }
        if ok:
            bt.assert_selectors_match([(obj, state)])
        else:
            with pytest.raises(AssertionError, match="selectors"):
                bt.assert_selectors_match([(obj, state)])


@pytest.mark.parametrize("strategy", [st.just({"kind": "X"})])
def test_check_builders_rejects_unknown_skip_names(strategy: st.SearchStrategy[Any]) -> None:
    with pytest.raises(ValueError, match="unknown invariants"):
        bt.check_builders(build_site, strategy, skip=("typo",), max_examples=1)


def test_owner_references_across_namespaces_are_caught() -> None:
    parent = make_parent()
    meta_elsewhere = b.child_meta(parent, component="x", managed_by=MANAGED_BY, namespace="other")
    good = objects.config_map(metadata=meta_elsewhere)
    bt.assert_owned([(good, b.DesiredState.PRESENT)], parent=parent, managed_by=MANAGED_BY)
    bad = objects.config_map(
        metadata={**meta_elsewhere, "ownerReferences": [names.owner_reference(parent)]}
    )
    with pytest.raises(AssertionError, match="cannot have a controller owner reference"):
        bt.assert_owned([(bad, b.DesiredState.PRESENT)], parent=parent)
