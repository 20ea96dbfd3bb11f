"""The clusters as a declared input (``builders.inputs.ClusterSelector``), pure: the value, what
``Inputs.clusters`` gives a builder (names and labels, sorted by name, never a kubeconfig), its
errors, its digest and versions, and ``check_builders`` over drawn clusters (placed children are
unique per cluster)."""

from __future__ import annotations

from typing import Any

import pytest

import builders as b
from builders.inputs import (
    Cluster,
    ClusterSelector,
    InputForbiddenError,
    InputMissingError,
    Inputs,
    inputs_digest,
)
from builders.testing import InputStates, check_builders
from tests.builders.test_check_inputs import PARENTS

PROD = ClusterSelector({"env": "prod"})


def test_a_selector_matches_clusters_carrying_all_its_labels() -> None:
    assert PROD.matches({"env": "prod", "tier": "gold"})
    assert not PROD.matches({"env": "dev"})
    assert ClusterSelector().matches({})  # empty: every cluster
    assert ClusterSelector({"b": "2", "a": "1"}) == ClusterSelector({"a": "1", "b": "2"})
    assert PROD.label_selector == "env=prod"
    assert str(PROD) == "clusters -l env=prod"
    with pytest.raises(b.InvalidSpecError, match=r"ClusterSelector\.match_labels"):
        ClusterSelector({"bad key!": "x"})


def test_inputs_give_the_matched_clusters_sorted_and_say_why_not() -> None:
    found = [Cluster(name="edge-2", labels={"env": "prod"}),
             Cluster(name="edge-1", labels={"env": "prod", "tier": "gold"})]
    inputs = Inputs(clusters={PROD: found})
    assert [c.name for c in inputs.clusters(PROD)] == ["edge-1", "edge-2"]
    assert inputs.clusters(PROD)[0].labels == {"env": "prod", "tier": "gold"}
    assert PROD in inputs.refs
    assert "clusters={'clusters -l env=prod': ['edge-1', 'edge-2']}" in repr(inputs)
    with pytest.raises(InputMissingError):
        inputs.clusters(ClusterSelector({"env": "dev"}))  # not declared
    with pytest.raises(InputForbiddenError):
        Inputs(forbidden=[PROD]).clusters(PROD)
    assert Inputs(clusters={PROD: []}).clusters(PROD) == []


def test_the_digest_and_versions_change_with_the_clusters_and_their_labels() -> None:
    one = Inputs(clusters={PROD: [Cluster(name="edge-1", labels={"env": "prod"})]})
    relabelled = Inputs(clusters={PROD: [Cluster(name="edge-1",
                                                 labels={"env": "prod", "tier": "x"})]})
    more = Inputs(clusters={PROD: [Cluster(name="edge-1", labels={"env": "prod"}),
                                   Cluster(name="edge-2", labels={"env": "prod"})]})
    digests = {inputs_digest(i) for i in (one, relabelled, more)}
    assert len(digests) == 3
    assert len({i.versions for i in (one, relabelled, more)}) == 3
    assert inputs_digest(one) == inputs_digest(
        Inputs(clusters={PROD: [Cluster(name="edge-1", labels={"env": "prod"})]}))


def _build(parent: Any, inputs: Inputs) -> list[b.ResourceBuilder]:
    meta = parent["metadata"]

    def cm(cluster: Cluster) -> b.ResourceBuilder:
        obj = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": b.objects.child_meta(parent, component="placed",
                                                managed_by="cluster-test",
                                                name=f"{meta['name']}-placed",
                                                namespace="remote")}
        return b.placed(lambda: obj, cluster=cluster.name)

    return [cm(c) for c in inputs.clusters(PROD)]


def test_check_builders_draws_clusters_and_a_name_in_two_clusters_is_two_children() -> None:
    check_builders(_build, PARENTS, inputs=InputStates(declare=lambda p: [PROD]),
                   managed_by="cluster-test", max_examples=30)
