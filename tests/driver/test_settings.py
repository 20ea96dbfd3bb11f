"""The operator's settings, grouped by concept (issue 37): ``Operator`` keeps at most 20
top-level fields, each group checks itself and names the bad field, and the flat keywords of
earlier releases still work for this release, with a ``DeprecationWarning`` naming the new place."""

from __future__ import annotations

import warnings
from typing import Any

import attrs
import pytest

from reconciler import (
    Applying,
    Contention,
    KubernetesClient,
    Operator,
    Policies,
    Readiness,
    Reporting,
    ServerSideApply,
    Serving,
    Watching,
)
from reconciler._driver.settings import MOVED
from tests.driver.conftest import make_operator

_MINIMAL: dict[str, Any] = {"api_version": "x.dev/v1", "kind": "Thing", "build": lambda p: []}

_OLD_VALUES: dict[str, Any] = {
    "recreate": True, "prune": [("v1", "ConfigMap")], "paused": True,
    "paused_namespaces": ["maintenance"], "drift": "warn", "ignore_fields": ["/spec/replicas"],
    "contention": None, "apply": ServerSideApply(), "apply_kinds": {"Deployment.apps":
                                                                    ServerSideApply()},
    "reuse_builds": False, "event_coalesce": 0.5, "watch_children": False,
    "watch_inactivity_timeout": 30.0, "metrics_port": 8080, "events": False,
    "status": lambda parent, children: {}, "condition_types": ["Available"],
    "readiness": Readiness(recheck=5.0),
}


def test_operator_keeps_at_most_twenty_top_level_fields() -> None:
    names = [field.name for field in attrs.fields(Operator)]
    assert len(names) <= 20, names
    assert {"policies", "applying", "watching", "serving", "reporting"} <= set(names)


@pytest.mark.parametrize("keyword", sorted(MOVED))
def test_each_flat_keyword_still_works_and_warns_naming_its_new_place(keyword: str) -> None:
    group, field = MOVED[keyword]
    value = _OLD_VALUES[keyword]
    with pytest.warns(DeprecationWarning, match=rf"Operator\({keyword}=\.\.\.\) is deprecated: "
                                                rf"use Operator\({group}=\w+\({field}=\.\.\.\)\)"):
        operator = Operator(**_MINIMAL, **{keyword: value})
    stored = getattr(getattr(operator, group), field)
    grouped = Operator(**_MINIMAL, **{group: type(getattr(operator, group))(**{field: value})})
    assert getattr(getattr(grouped, group), field) == stored
    assert operator == attrs.evolve(grouped, build=operator.build)
    with pytest.warns(DeprecationWarning, match=rf"read Operator\.{group}\.{field}"):
        assert getattr(operator, keyword) == stored


def test_the_grouped_settings_warn_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        operator = Operator(
            **_MINIMAL,
            policies=Policies(recreate=True, drift="warn", contention=Contention(window=5.0)),
            applying=Applying(strategy=ServerSideApply(), reuse_builds=False),
            watching=Watching(coalesce=0.1, children=False),
            serving=Serving(metrics_port=9090, bind_address="127.0.0.1"),
            reporting=Reporting(events=False, condition_types=("Available",)),
        )
        assert operator.policies.recreate
        assert not operator.applying.reuse_builds
        assert operator.pauses({}).everything is False


def test_a_flat_keyword_lands_on_top_of_its_group() -> None:
    with pytest.warns(DeprecationWarning, match=r"Operator\(drift="):
        operator = Operator(**_MINIMAL, policies=Policies(recreate=True), drift="warn")
    assert operator.policies.recreate
    assert operator.policies.drift.value == "warn"


def test_an_unknown_keyword_is_a_type_error_naming_it() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'recreat'"):
        Operator(**_MINIMAL, recreat=True)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Applying(strategy="ssa"), "Applying: strategy must be ThreeWayMerge()"),
    (lambda: Applying(kinds={"Deployment.apps": 1}),
     "Applying: kinds['Deployment.apps'] must be"),
    (lambda: Policies(contention=3), "Policies: contention must be a Contention"),
    (lambda: Policies(ignore_fields="/spec"), "not the string '/spec'"),
    (lambda: Policies(ignore_fields=["spec"]), "spec"),
    (lambda: Watching(coalesce=-1), "Watching: coalesce must be >= 0"),
    (lambda: Serving(metrics_port=70000), "Serving: metrics_port must be 0..65535"),
    (lambda: Reporting(condition_types="Available"), "Reporting: condition_types must be a list"),
    (lambda: Reporting(condition_types=["Ready"]), "Reporting: "),
    (lambda: Operator(**_MINIMAL, policies=Policies, ), "policies must be a Policies"),
])
def test_each_group_names_its_bad_field(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        make()


@pytest.mark.both_servers
def test_start_takes_serving_and_the_old_metrics_keywords_still_work(
    client: KubernetesClient, ns: str
) -> None:
    operator = make_operator(ns)
    runtime = operator.start(client, serving=Serving(metrics_port=0))
    try:
        assert runtime.health is not None
        assert runtime.health.url.startswith("http://127.0.0.1:")
    finally:
        runtime.stop(5)
    with pytest.warns(DeprecationWarning, match=r"Operator\.start\(metrics_port=\.\.\.\) is "
                                                r"deprecated: use Operator\.start\(serving="):
        runtime = operator.start(client, metrics_port=0)
    try:
        assert runtime.health is not None
    finally:
        runtime.stop(5)


def test_operator_clusters_is_kept_in_applying_without_a_field_or_a_warning() -> None:
    """Issue 41 names ``Operator(clusters=ClusterSecrets(...))``; where a child is written is
    the apply group's, so it is ``applying.clusters`` and ``Operator`` keeps 20 fields."""
    from reconciler import ClusterSecrets

    fleet = ClusterSecrets(namespace="fleet")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        operator = make_operator("ns", clusters=fleet)
    assert operator.clusters is fleet
    assert operator.applying.clusters is fleet
    assert len(attrs.fields(type(operator))) <= 20
    assert make_operator("ns", applying=Applying(clusters=fleet), clusters=fleet).clusters is fleet
    with pytest.raises(ValueError, match="clusters given twice"):
        make_operator("ns", applying=Applying(clusters=ClusterSecrets(namespace="other")),
                      clusters=fleet)
