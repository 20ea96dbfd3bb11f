"""``ParentReconciler.reconcile(parent)`` against the embedded API server.

The parent is a custom resource with a status subresource (as an operator's would be); its
children are ordinary built-in objects. Promises checked: identity stamped on every child, one
child's error never stops the others, pruning only of ours and only of allowed kinds, status
conditions written only when they change, Events on the parent, and a steady state that makes no
write and no per-child read.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from builders import DesiredState, ResourceBuilder
from reconciler import (
    Action,
    KubernetesClient,
    NotFoundError,
    ParentReconciler,
    ParentSettings,
    ResourceReconciler,
)
from reconciler.embedded import Faults
from reconciler.testing import VirtualClock
from tests.reconciler.conftest import Requests, install_crd

GROUP = "parents.optk.dev"
API = f"{GROUP}/v1"
PRESENT, ABSENT = DesiredState.PRESENT, DesiredState.ABSENT


@pytest.fixture(scope="module")
def parent_kind(client: KubernetesClient) -> str:
    """The ``Stack`` CRD: namespaced, status subresource, free-form spec and status."""
    if not client.is_served(API, "Stack"):
        install_crd(client, group=GROUP, kind="Stack", plural="stacks", status=True)
    return "Stack"


@pytest.fixture
def parent(client: KubernetesClient, parent_kind: str, ns: str) -> dict[str, Any]:
    return client.create({"apiVersion": API, "kind": parent_kind,
                          "metadata": {"name": "demo", "namespace": ns},
                          "spec": {"size": 2}})


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def builders_of(*pairs: tuple[dict[str, Any], DesiredState]) -> list[ResourceBuilder]:
    return [(lambda p=p: p) for p in pairs]


def fresh(client: KubernetesClient, parent: dict[str, Any]) -> dict[str, Any]:
    meta = parent["metadata"]
    return client.get(API, "Stack", meta["name"], namespace=meta["namespace"])


@pytest.mark.both_servers
def test_children_get_identity_and_parent_gets_status_and_events(
    client: KubernetesClient, parent: dict[str, Any], ns: str
) -> None:
    pr = ParentReconciler(client, lambda p: builders_of((cm("demo-config", a="1"), PRESENT)),
                          operator_name="stack-operator")
    result = pr.reconcile(parent)
    assert result.ok
    assert [r.action for r in result.children] == [Action.CREATED]

    child = client.get("v1", "ConfigMap", "demo-config", namespace=ns)
    labels = child["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "stack-operator"
    assert labels["app.kubernetes.io/instance"] == "demo"
    assert labels["app.kubernetes.io/component"] == "config"
    assert labels["optk.dev/owner-uid"] == parent["metadata"]["uid"]
    [owner] = child["metadata"]["ownerReferences"]
    assert owner["uid"] == parent["metadata"]["uid"]
    assert owner["controller"] is True

    status = fresh(client, parent)["status"]
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Ready"]["status"] == "True"
    assert conditions["Reconciled"]["status"] == "True"
    assert conditions["Ready"]["observedGeneration"] == parent["metadata"]["generation"]
    assert status["observedGeneration"] == parent["metadata"]["generation"]
    assert status["lastReconcileTime"].endswith("Z")

    events = client.list("v1", "Event", namespace=ns)["items"]
    created = [e for e in events if e["reason"] == "Created"]
    assert len(created) == 1
    assert created[0]["involvedObject"]["uid"] == parent["metadata"]["uid"]
    assert "demo-config" in created[0]["message"]


@pytest.mark.both_servers
def test_steady_state_makes_no_write_and_no_read_per_child(
    client: KubernetesClient, parent: dict[str, Any], requests: Callable[[], Requests]
) -> None:
    children = [cm(f"demo-c{i}", i=str(i)) for i in range(6)]
    pr = ParentReconciler(client, lambda p: builders_of(*[(c, PRESENT) for c in children]),
                          operator_name="stack-operator")
    assert pr.reconcile(parent).ok
    with requests() as r:
        result = pr.reconcile(fresh(client, parent))
    assert result.ok
    assert all(c.action is Action.UNCHANGED for c in result.children)
    assert r.writes == 0
    assert r.count("get") == 1  # the fresh() read of the parent only: children come from a list
    assert r.count("list") == 1
    assert result.writes == 0
    assert not result.status_written


@pytest.mark.both_servers
def test_one_child_error_does_not_stop_the_others(
    client: KubernetesClient, parent: dict[str, Any], ns: str
) -> None:
    def build(p: Any) -> list[ResourceBuilder]:
        def broken() -> tuple[dict[str, Any], DesiredState]:
            raise RuntimeError("builder bug")

        return [
            lambda: (cm("demo-first", a="1"), PRESENT),
            lambda: (cm("Bad_Name", a="1"), PRESENT),  # the server refuses it (422)
            broken,
            lambda: (cm("demo-last", a="1"), PRESENT),
        ]

    pr = ParentReconciler(client, build, operator_name="stack-operator")
    result = pr.reconcile(parent)
    assert not result.ok
    assert [r.ref.name for r in result.children] == ["demo-first", "demo-last"]
    names = {e.ref.name for e in result.errors}
    assert "Bad_Name" in names
    assert any("broken" in name for name in names)  # the builder is named, not numbered
    client.get("v1", "ConfigMap", "demo-last", namespace=ns)

    conditions = {c["type"]: c for c in fresh(client, parent)["status"]["conditions"]}
    assert conditions["Reconciled"]["status"] == "False"
    assert "Bad_Name" in conditions["Reconciled"]["message"]
    assert "builder bug" in conditions["Ready"]["message"]
    warnings = [e for e in client.list("v1", "Event", namespace=ns)["items"]
                if e["type"] == "Warning"]
    assert warnings


@pytest.mark.both_servers
def test_pruning_deletes_only_ours_of_allowed_kinds(
    client: KubernetesClient, parent: dict[str, Any], ns: str
) -> None:
    wanted = {"demo-a", "demo-b"}

    def build(p: Any) -> list[ResourceBuilder]:
        objs = [cm(n, x="1") for n in sorted(wanted - {"demo-s"})]
        objs.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "demo-s"},
                     "stringData": {"k": "v"}} if "demo-s" in wanted else cm("demo-keep"))
        return builders_of(*[(o, PRESENT) for o in objs])

    wanted.add("demo-s")
    pr = ParentReconciler(
        client, build, operator_name="stack-operator",
        settings=ParentSettings(prune_kinds={("v1", "ConfigMap")}),
    )
    assert pr.reconcile(parent).ok
    # Someone else's object carrying our owner label must survive pruning.
    foreign = cm("demo-foreign")
    foreign["metadata"] |= {"namespace": ns,
                            "labels": {"optk.dev/owner-uid": parent["metadata"]["uid"]}}
    client.create(foreign)

    wanted.discard("demo-b")
    wanted.discard("demo-s")
    result = pr.reconcile(fresh(client, parent))
    assert result.ok
    assert [(r.ref.name, r.action) for r in result.pruned] == [("demo-b", Action.DELETED)]
    with pytest.raises(NotFoundError):
        client.get("v1", "ConfigMap", "demo-b", namespace=ns)
    client.get("v1", "ConfigMap", "demo-foreign", namespace=ns)
    client.get("v1", "Secret", "demo-s", namespace=ns)  # Secrets are not in the allow-list


@pytest.mark.both_servers
def test_absent_child_is_deleted_and_pending_deletion_requeues(
    client: KubernetesClient, parent: dict[str, Any], ns: str
) -> None:
    state = {"desired": PRESENT}
    held = cm("demo-held", a="1")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    pr = ParentReconciler(client, lambda p: builders_of((held, state["desired"])),
                          operator_name="stack-operator")
    assert pr.reconcile(parent).children[0].action is Action.CREATED
    state["desired"] = ABSENT
    assert pr.reconcile(fresh(client, parent)).children[0].action is Action.DELETED

    state["desired"] = PRESENT
    result = pr.reconcile(fresh(client, parent))
    assert result.requeue_after == 2.0
    conditions = {c["type"]: c for c in fresh(client, parent)["status"]["conditions"]}
    assert conditions["Ready"]["status"] == "False"
    assert conditions["Ready"]["reason"] == "ChildrenPending"
    client.patch("v1", "ConfigMap", "demo-held", {"metadata": {"finalizers": None}},
                 patch_type="application/merge-patch+json", namespace=ns)


@pytest.mark.both_servers
def test_status_time_is_refreshed_only_after_the_refresh_interval(
    client: KubernetesClient, parent: dict[str, Any]
) -> None:
    clock = VirtualClock()
    pr = ParentReconciler(
        client, lambda p: builders_of((cm("demo-t", a="1"), PRESENT)),
        operator_name="stack-operator", clock=clock,
        settings=ParentSettings(status_refresh=600.0, events=False),
    )
    assert pr.reconcile(parent).status_written
    first = fresh(client, parent)["status"]["lastReconcileTime"]
    clock.advance(60)
    assert not pr.reconcile(fresh(client, parent)).status_written
    clock.advance(600)
    assert pr.reconcile(fresh(client, parent)).status_written
    assert fresh(client, parent)["status"]["lastReconcileTime"] > first


@pytest.mark.both_servers
def test_by_default_an_unchanged_status_is_never_rewritten_however_old(
    client: KubernetesClient, parent: dict[str, Any]
) -> None:
    clock = VirtualClock()
    pr = ParentReconciler(
        client, lambda p: builders_of((cm("demo-d", a="1"), PRESENT)),
        operator_name="stack-operator", clock=clock, settings=ParentSettings(events=False),
    )
    assert pr.status_refresh is None
    assert pr.reconcile(parent).status_written
    clock.advance(30 * 86400)  # a month: no refresh just to age the recorded time
    result = pr.reconcile(fresh(client, parent))
    assert not result.status_written
    assert result.writes == 0


@pytest.mark.both_servers
def test_generation_change_is_observed(client: KubernetesClient, parent: dict[str, Any]) -> None:
    pr = ParentReconciler(
        client, lambda p: builders_of((cm("demo-g", a="1"), PRESENT)),
        operator_name="stack-operator", settings=ParentSettings(events=False),
    )
    pr.reconcile(parent)
    assert not pr.reconcile(fresh(client, parent)).status_written
    meta = parent["metadata"]
    client.patch(API, "Stack", meta["name"], {"spec": {"size": 3}},
                 patch_type="application/merge-patch+json", namespace=meta["namespace"])
    changed = fresh(client, parent)
    assert changed["metadata"]["generation"] > meta["generation"]
    assert pr.reconcile(changed).status_written
    status = fresh(client, parent)["status"]
    assert status["observedGeneration"] == changed["metadata"]["generation"]
    assert {c["observedGeneration"] for c in status["conditions"]} == {
        changed["metadata"]["generation"]}


@pytest.mark.both_servers
def test_a_user_removing_our_label_is_repaired(
    client: KubernetesClient, parent: dict[str, Any], ns: str
) -> None:
    pr = ParentReconciler(
        client, lambda p: builders_of((cm("demo-l", a="1"), PRESENT)),
        operator_name="stack-operator", settings=ParentSettings(events=False),
    )
    pr.reconcile(parent)
    client.patch("v1", "ConfigMap", "demo-l",
                 {"metadata": {"labels": {"optk.dev/owner-uid": None}}},
                 patch_type="application/merge-patch+json", namespace=ns)
    result = pr.reconcile(fresh(client, parent))
    assert result.children[0].action is Action.UPDATED
    labels = client.get("v1", "ConfigMap", "demo-l", namespace=ns)["metadata"]["labels"]
    assert labels["optk.dev/owner-uid"] == parent["metadata"]["uid"]


@pytest.mark.both_servers
def test_parent_without_uid_is_a_value_error(client: KubernetesClient) -> None:
    pr = ParentReconciler(client, lambda p: [], operator_name="x",
                          resources=ResourceReconciler(client))
    with pytest.raises(ValueError, match="uid"):
        pr.reconcile({"apiVersion": API, "kind": "Stack", "metadata": {"name": uuid.uuid4().hex}})


@pytest.mark.both_servers
def test_builders_may_return_official_models(
    client: KubernetesClient, parent: dict[str, Any], ns: str
) -> None:
    model = k8s.V1ConfigMap(api_version="v1", kind="ConfigMap", data={"m": "1"},
                            metadata=k8s.V1ObjectMeta(name="demo-model"))
    pr = ParentReconciler(
        client, lambda p: [lambda: (model, PRESENT)], operator_name="stack-operator",
        settings=ParentSettings(events=False),
    )
    assert pr.reconcile(parent).children[0].action is Action.CREATED
    live = client.get("v1", "ConfigMap", "demo-model", namespace=ns)
    assert live["metadata"]["labels"]["optk.dev/owner-uid"] == parent["metadata"]["uid"]
    assert pr.reconcile(fresh(client, parent)).children[0].action is Action.UNCHANGED


@pytest.mark.both_servers
def test_a_builder_without_identity_is_reported_by_name_and_parent(
    client: KubernetesClient, parent: dict[str, Any], requests: Callable[[], Requests]
) -> None:
    def nameless() -> tuple[dict[str, Any], DesiredState]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}, PRESENT

    pr = ParentReconciler(
        client, lambda p: [nameless], operator_name="stack-operator",
        settings=ParentSettings(events=False),
    )
    with requests() as r:
        result = pr.reconcile(parent)
    assert not result.ok
    [error] = result.errors
    assert "nameless" in error.ref.name
    assert "nameless" in error.message
    assert "demo" in error.message  # the parent is named too
    assert "metadata.name" in error.message
    assert r.count("create") == 0  # nothing nameless reached the server (events are off)


@pytest.mark.both_servers
def test_nothing_is_pruned_when_a_builder_fails(
    client: KubernetesClient, parent: dict[str, Any], ns: str
) -> None:
    broken = {"now": False}

    def build(p: Any) -> list[ResourceBuilder]:
        if broken["now"]:
            raise RuntimeError("cannot read the spec today")
        return builders_of((cm("demo-kept", a="1"), PRESENT))

    pr = ParentReconciler(
        client, build, operator_name="stack-operator",
        settings=ParentSettings(prune_kinds={("v1", "ConfigMap")}, events=False),
    )
    assert pr.reconcile(parent).ok
    broken["now"] = True
    result = pr.reconcile(fresh(client, parent))
    assert not result.ok
    assert result.pruned == ()
    client.get("v1", "ConfigMap", "demo-kept", namespace=ns)


@pytest.mark.both_servers
def test_a_child_that_is_not_ours_keeps_the_parent_not_ready(
    client: KubernetesClient, parent: dict[str, Any], ns: str
) -> None:
    client.create({**cm("demo-taken", a="theirs"),
                   "metadata": {"name": "demo-taken", "namespace": ns}})
    pr = ParentReconciler(
        client, lambda p: builders_of((cm("demo-taken", a="ours"), PRESENT)),
        operator_name="stack-operator", settings=ParentSettings(events=False),
    )
    result = pr.reconcile(parent)
    assert result.ok
    assert result.children[0].action is Action.SKIPPED
    # Not in our labelled list: a create is tried, refused (AlreadyExists), the object read.
    assert [c.verb for c in result.children[0].api_calls] == ["create", "get"]
    conditions = {c["type"]: c for c in fresh(client, parent)["status"]["conditions"]}
    assert conditions["Ready"]["status"] == "False"
    assert conditions["Ready"]["reason"] == "ChildrenSkipped"
    assert "demo-taken" in conditions["Ready"]["message"]
    assert client.get("v1", "ConfigMap", "demo-taken", namespace=ns)["data"] == {"a": "theirs"}


@pytest.mark.both_servers
def test_a_dry_run_is_a_plan_that_writes_nothing(
    client: KubernetesClient, parent: dict[str, Any], ns: str
) -> None:
    spec = {"data": "1"}

    def build(p: Any) -> list[ResourceBuilder]:
        return builders_of((cm("demo-planned", a=spec["data"]), PRESENT))

    plan = ParentReconciler(
        client, build, operator_name="stack-operator",
        settings=ParentSettings(dry_run=True, prune_kinds={("v1", "ConfigMap")}),
    )
    result = plan.reconcile(parent)
    assert result.dry_run
    assert [(r.ref.name, r.action) for r in result.children] == [("demo-planned", Action.CREATED)]
    with pytest.raises(NotFoundError):
        client.get("v1", "ConfigMap", "demo-planned", namespace=ns)
    assert "status" not in fresh(client, parent)
    assert client.list("v1", "Event", namespace=ns)["items"] == []

    ParentReconciler(client, build, operator_name="stack-operator").reconcile(parent)
    spec["data"] = "2"
    changed = plan.reconcile(fresh(client, parent)).children[0]
    assert changed.action is Action.UPDATED
    assert ("data", "a") in [d.path for d in changed.diff]
    assert client.get("v1", "ConfigMap", "demo-planned", namespace=ns)["data"] == {"a": "1"}


@pytest.mark.both_servers
def test_events_record_updates_and_deletes_on_the_parent(
    client: KubernetesClient, parent: dict[str, Any], ns: str
) -> None:
    state = {"value": "1", "second": PRESENT}

    def build(p: Any) -> list[ResourceBuilder]:
        return builders_of((cm("demo-e1", a=state["value"]), PRESENT),
                           (cm("demo-e2", a="x"), state["second"]))

    pr = ParentReconciler(client, build, operator_name="stack-operator")
    pr.reconcile(parent)
    state.update(value="2", second=ABSENT)
    pr.reconcile(fresh(client, parent))

    events = client.list("v1", "Event", namespace=ns)["items"]
    by_reason = {e["reason"]: e for e in events}
    assert "2 children" in by_reason["Created"]["message"]
    assert "demo-e1" in by_reason["Updated"]["message"]
    assert "demo-e2" in by_reason["Deleted"]["message"]
    assert {e["involvedObject"]["name"] for e in events} == {"demo"}
    assert {e["source"]["component"] for e in events} == {"stack-operator"}


def test_a_failed_list_fails_its_children_without_a_read_each(
    client: KubernetesClient, parent: dict[str, Any], kube_api: Any,
    requests: Callable[[], Requests],
) -> None:
    children = [cm(f"demo-f{i}", a="1") for i in range(3)]
    pr = ParentReconciler(
        client, lambda p: builders_of(*[(c, PRESENT) for c in children]),
        operator_name="stack-operator", settings=ParentSettings(events=False, write_status=False),
    )
    assert pr.reconcile(parent).ok
    with kube_api.faults(Faults(error_rate=1.0, verbs={"list"}, resources={"configmaps"})), \
            requests() as r:
        result = pr.reconcile(fresh(client, parent))
    assert not result.ok
    assert sorted(e.ref.name for e in result.errors) == ["demo-f0", "demo-f1", "demo-f2"]
    assert all("listing its kind failed" in e.message for e in result.errors)
    assert r.count("get") == 1  # fresh() only
    assert r.writes == 0
