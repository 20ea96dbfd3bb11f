"""``ResourceReconciler.reconcile_resource`` against the embedded API server.

Each test states one promise of issue 5 and checks it on the server itself, counting requests with
the server's accounting where "no write" is the promise.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from builders import DesiredState, keep_cluster_ip
from objectmatcher import LAST_APPLIED_ANNOTATION, calculate_patch
from reconciler import (
    Action,
    ConflictError,
    ImmutableFieldError,
    KubernetesClient,
    NotFoundError,
    ResourceReconciler,
    ResourceSettings,
)
from reconciler._client.protocol import ForwardingClient
from tests.reconciler.conftest import Requests, wait_for

MakeCM = Callable[..., dict[str, Any]]
PRESENT, ABSENT, CREATED = DesiredState.PRESENT, DesiredState.ABSENT, DesiredState.CREATED


@pytest.fixture
def rr(client: KubernetesClient) -> ResourceReconciler:
    return ResourceReconciler(client)


def deployment(ns: str, name: str, *, app: str = "web", image: str = "nginx:1.25",
               replicas: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {"containers": [{"name": "main", "image": image}]},
            },
        },
    }


def service(ns: str, name: str, port: int = 80) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": port}]},
    }


# -- PRESENT ---------------------------------------------------------------------------------


@pytest.mark.both_servers
@pytest.mark.both_servers
def test_present_creates_with_annotation_then_makes_no_write(
    rr: ResourceReconciler, client: KubernetesClient, requests: Callable[[], Requests], ns: str
) -> None:
    desired = deployment(ns, "web")
    first = rr.reconcile_resource(desired, PRESENT)
    assert first.action is Action.CREATED
    assert [c.verb for c in first.api_calls] == ["get", "create"]
    live = client.get("apps/v1", "Deployment", "web", namespace=ns)
    assert LAST_APPLIED_ANNOTATION in live["metadata"]["annotations"]

    with requests() as r:
        second = rr.reconcile_resource(desired, PRESENT)
    assert second.action is Action.UNCHANGED
    assert r.writes == 0
    assert second.writes == 0
    assert second.diff == ()


@pytest.mark.both_servers
@pytest.mark.both_servers
def test_user_edit_of_our_field_is_reverted_in_one_patch(
    rr: ResourceReconciler, client: KubernetesClient, requests: Callable[[], Requests], ns: str
) -> None:
    desired = deployment(ns, "edited")
    rr.reconcile_resource(desired, PRESENT)
    client.patch("apps/v1", "Deployment", "edited", {"spec": {"replicas": 7}},
                 patch_type="application/merge-patch+json", namespace=ns)
    with requests() as r:
        result = rr.reconcile_resource(desired, PRESENT)
    assert result.action is Action.UPDATED
    assert r.count("patch") == 1
    assert r.writes == 1
    assert any(item.path[-1] == "replicas" for item in result.diff)
    assert client.get("apps/v1", "Deployment", "edited", namespace=ns)["spec"]["replicas"] == 2
    assert rr.reconcile_resource(desired, PRESENT).action is Action.UNCHANGED


@pytest.mark.both_servers
def test_fields_of_the_server_and_other_actors_are_kept(
    rr: ResourceReconciler, client: KubernetesClient, configmap: MakeCM, ns: str
) -> None:
    desired = configmap("shared", ours="1")
    rr.reconcile_resource(desired, PRESENT)
    client.patch("v1", "ConfigMap", "shared",
                 {"data": {"theirs": "x"}, "metadata": {"labels": {"team": "b"}}},
                 patch_type="application/merge-patch+json", namespace=ns)
    assert rr.reconcile_resource(desired, PRESENT).action is Action.UNCHANGED
    live = client.get("v1", "ConfigMap", "shared", namespace=ns)
    assert live["data"] == {"ours": "1", "theirs": "x"}
    assert live["metadata"]["labels"] == {"team": "b"}

    # Server defaults of a Deployment never count as a difference either.
    rr.reconcile_resource(deployment(ns, "defaults"), PRESENT)
    assert rr.reconcile_resource(deployment(ns, "defaults"), PRESENT).action is Action.UNCHANGED


@pytest.mark.both_servers
def test_a_field_removed_from_the_builder_is_removed_from_the_object(
    rr: ResourceReconciler, client: KubernetesClient, configmap: MakeCM, ns: str
) -> None:
    rr.reconcile_resource(configmap("shrink", a="1", b="2"), PRESENT)
    result = rr.reconcile_resource(configmap("shrink", a="1"), PRESENT)
    assert result.action is Action.UPDATED
    assert client.get("v1", "ConfigMap", "shrink", namespace=ns)["data"] == {"a": "1"}


@pytest.mark.both_servers
def test_a_conflicting_concurrent_update_is_retried(
    rr: ResourceReconciler, client: KubernetesClient, configmap: MakeCM, ns: str
) -> None:
    rr.reconcile_resource(configmap("race", a="1"), PRESENT)
    stale = client.get("v1", "ConfigMap", "race", namespace=ns)
    client.patch("v1", "ConfigMap", "race", {"data": {"other": "z"}},
                 patch_type="application/merge-patch+json", namespace=ns)
    result = rr.reconcile_resource(configmap("race", a="2"), PRESENT, live=stale)
    assert result.action is Action.UPDATED
    assert [c.verb for c in result.api_calls] == ["patch", "get", "patch"]
    assert client.get("v1", "ConfigMap", "race", namespace=ns)["data"] == {"a": "2", "other": "z"}


class _Meddler(ForwardingClient):
    """A real second writer: before every patch of ours, it changes the object on the server."""

    def __init__(self, client: KubernetesClient) -> None:
        super().__init__(client)
        self.meddles = 0

    def patch(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.meddles += 1
        self.inner.patch(args[0], args[1], args[2], {"data": {"meddle": str(self.meddles)}},
                         patch_type="application/merge-patch+json",
                         namespace=kwargs["namespace"])
        return self.inner.patch(*args, **kwargs)


@pytest.mark.both_servers
def test_conflict_retries_are_bounded(
    client: KubernetesClient, configmap: MakeCM, ns: str
) -> None:
    ResourceReconciler(client).reconcile_resource(configmap("busy", a="1"), PRESENT)
    meddler = _Meddler(client)
    rr = ResourceReconciler(meddler, settings=ResourceSettings(conflict_retries=2))
    with pytest.raises(ConflictError, match="after 3 attempts") as caught:
        rr.reconcile_resource(configmap("busy", a="2"), PRESENT)
    assert caught.value.ref is not None
    assert caught.value.ref.name == "busy"
    assert meddler.meddles == 3


@pytest.mark.both_servers
def test_create_race_continues_as_update(
    rr: ResourceReconciler, client: KubernetesClient, configmap: MakeCM, ns: str
) -> None:
    rr.reconcile_resource(configmap("raced", a="1"), PRESENT)
    result = rr.reconcile_resource(configmap("raced", a="2"), PRESENT, live=None)
    assert result.action is Action.UPDATED
    assert [c.verb for c in result.api_calls] == ["create", "get", "patch"]
    assert client.get("v1", "ConfigMap", "raced", namespace=ns)["data"] == {"a": "2"}


@pytest.mark.both_servers
def test_object_being_deleted_is_requeued(
    rr: ResourceReconciler, client: KubernetesClient, configmap: MakeCM, ns: str
) -> None:
    obj = configmap("leaving", a="1")
    obj["metadata"]["finalizers"] = ["example.com/hold"]
    rr.reconcile_resource(obj, PRESENT)
    client.delete("v1", "ConfigMap", "leaving", namespace=ns)
    result = rr.reconcile_resource(configmap("leaving", a="2"), PRESENT)
    assert result.action is Action.SKIPPED
    assert result.requeue_after == 2.0
    assert result.writes == 0
    client.patch("v1", "ConfigMap", "leaving", {"metadata": {"finalizers": None}},
                 patch_type="application/merge-patch+json", namespace=ns)


# -- ownership -------------------------------------------------------------------------------


@pytest.mark.both_servers
def test_an_unowned_object_is_never_touched(
    rr: ResourceReconciler, client: KubernetesClient, requests: Callable[[], Requests],
    configmap: MakeCM, ns: str,
) -> None:
    client.create(configmap("foreign", a="theirs"))
    with requests() as r:
        present = rr.reconcile_resource(configmap("foreign", a="ours"), PRESENT)
        absent = rr.reconcile_resource(configmap("foreign"), ABSENT)
    assert present.action is Action.SKIPPED
    assert absent.action is Action.UNCHANGED  # ABSENT holds: no such object of ours
    assert "not managed by the toolkit" in present.reason
    assert "not ours (not managed by the toolkit" in absent.reason
    assert r.writes == 0
    assert client.get("v1", "ConfigMap", "foreign", namespace=ns)["data"] == {"a": "theirs"}

    adopted = rr.reconcile_resource(configmap("foreign", a="ours"), PRESENT, adopt=True)
    assert adopted.action is Action.UPDATED
    live = client.get("v1", "ConfigMap", "foreign", namespace=ns)
    assert live["data"] == {"a": "ours"}
    assert LAST_APPLIED_ANNOTATION in live["metadata"]["annotations"]


@pytest.mark.both_servers
def test_a_controller_owner_reference_makes_it_ours(
    rr: ResourceReconciler, client: KubernetesClient, configmap: MakeCM, ns: str
) -> None:
    owner = client.create(configmap("owner"))
    obj = configmap("owned", a="1")
    obj["metadata"]["ownerReferences"] = [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
        "uid": owner["metadata"]["uid"], "controller": True,
    }]
    client.create(obj)  # created by someone else, without our annotation
    uid = owner["metadata"]["uid"]
    result = rr.reconcile_resource(configmap("owned", a="2"), PRESENT, owner_uid=uid)
    assert result.action is Action.UPDATED
    other = rr.reconcile_resource(configmap("owned", a="3"), PRESENT, owner_uid="another-uid")
    assert other.action is Action.SKIPPED


# -- CREATED and ABSENT ----------------------------------------------------------------------


@pytest.mark.both_servers
def test_created_creates_but_never_updates(
    rr: ResourceReconciler, client: KubernetesClient, configmap: MakeCM, ns: str
) -> None:
    assert rr.reconcile_resource(configmap("once", a="1"), CREATED).action is Action.CREATED
    result = rr.reconcile_resource(configmap("once", a="2"), CREATED)
    assert result.action is Action.UNCHANGED
    assert result.writes == 0
    assert client.get("v1", "ConfigMap", "once", namespace=ns)["data"] == {"a": "1"}


@pytest.mark.both_servers
def test_absent_deletes_ours_and_missing_is_success(
    rr: ResourceReconciler, client: KubernetesClient, configmap: MakeCM, ns: str
) -> None:
    rr.reconcile_resource(configmap("doomed", a="1"), PRESENT)
    assert rr.reconcile_resource(configmap("doomed"), ABSENT).action is Action.DELETED
    with pytest.raises(NotFoundError):
        client.get("v1", "ConfigMap", "doomed", namespace=ns)
    assert rr.reconcile_resource(configmap("doomed"), ABSENT).action is Action.UNCHANGED
    not_served = {"apiVersion": "nothing.example.com/v1", "kind": "Nothing",
                  "metadata": {"name": "x", "namespace": ns}}
    assert rr.reconcile_resource(not_served, ABSENT).action is Action.UNCHANGED


# -- hooks -----------------------------------------------------------------------------------


@pytest.mark.both_servers
def test_hooks_run_at_their_points(
    rr: ResourceReconciler, client: KubernetesClient, configmap: MakeCM, ns: str
) -> None:
    seen: list[str] = []

    def before_create(desired: Any) -> Any:
        seen.append("create")
        new = copy.deepcopy(dict(desired))
        new["data"]["stamped"] = "yes"
        return new

    def keep(current: Any) -> Any:
        seen.append("delete")
        return None

    state = PRESENT.with_hooks(before_create=before_create)
    rr.reconcile_resource(configmap("hooked", a="1"), state)
    assert client.get("v1", "ConfigMap", "hooked", namespace=ns)["data"]["stamped"] == "yes"

    veto = PRESENT.with_hooks(should_update=lambda current, desired: False)
    assert rr.reconcile_resource(configmap("hooked", a="9"), veto).action is Action.UNCHANGED

    kept = rr.reconcile_resource(configmap("hooked"), ABSENT.with_hooks(before_delete=keep))
    assert kept.action is Action.UNCHANGED
    assert seen == ["create", "delete"]
    client.get("v1", "ConfigMap", "hooked", namespace=ns)


@pytest.mark.both_servers
def test_keep_cluster_ip_hook_avoids_a_false_update(
    rr: ResourceReconciler, client: KubernetesClient, ns: str
) -> None:
    state = PRESENT.with_hooks(before_update=keep_cluster_ip)
    assert rr.reconcile_resource(service(ns, "svc"), state).action is Action.CREATED
    ip = client.get("v1", "Service", "svc", namespace=ns)["spec"]["clusterIP"]
    assert rr.reconcile_resource(service(ns, "svc"), state).action is Action.UNCHANGED
    assert rr.reconcile_resource(service(ns, "svc", 81), state).action is Action.UPDATED
    assert client.get("v1", "Service", "svc", namespace=ns)["spec"]["clusterIP"] == ip


# -- immutable fields ------------------------------------------------------------------------


@pytest.mark.both_servers
def test_immutable_selector_change_is_an_error_naming_the_field_by_default(
    rr: ResourceReconciler, ns: str
) -> None:
    rr.reconcile_resource(deployment(ns, "fixed", app="a"), PRESENT)
    with pytest.raises(ImmutableFieldError) as caught:
        rr.reconcile_resource(deployment(ns, "fixed", app="b"), PRESENT)
    assert "spec.selector" in caught.value.fields
    assert "recreate=True" in str(caught.value)


@pytest.mark.needs_controller_manager
@pytest.mark.both_servers
def test_immutable_selector_change_recreates_when_enabled(
    client: KubernetesClient, ns: str
) -> None:
    rr = ResourceReconciler(
        client, settings=ResourceSettings(recreate_timeout=20.0, poll_interval=0.05),
    )
    first = rr.reconcile_resource(deployment(ns, "moving", app="a"), PRESENT)
    old_uid = first.live["metadata"]["uid"] if first.live else None
    result = rr.reconcile_resource(deployment(ns, "moving", app="b"), PRESENT, recreate=True)
    assert result.action is Action.RECREATED
    verbs = [c.verb for c in result.api_calls]
    assert verbs[:3] == ["get", "patch", "delete"]
    assert verbs[-1] == "create"
    live = client.get("apps/v1", "Deployment", "moving", namespace=ns)
    assert live["metadata"]["uid"] != old_uid
    assert live["spec"]["selector"] == {"matchLabels": {"app": "b"}}

    only_services = ResourceReconciler(
        client, settings=ResourceSettings(recreate=True, recreate_kinds={"Service"}),
    )
    with pytest.raises(ImmutableFieldError, match="recreate_kinds"):
        only_services.reconcile_resource(deployment(ns, "moving", app="c"), PRESENT)


# -- secrets ---------------------------------------------------------------------------------


@pytest.mark.both_servers
def test_secret_values_never_appear_in_the_result(
    rr: ResourceReconciler, client: KubernetesClient, ns: str
) -> None:
    def secret(value: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "creds", "namespace": ns},
                "stringData": {"password": value}}

    rr.reconcile_resource(secret("hunter2"), PRESENT)
    result = rr.reconcile_resource(secret("correct-horse"), PRESENT)
    assert result.action is Action.UPDATED
    text = repr(result) + repr(result.diff)
    assert "hunter2" not in text
    assert "correct-horse" not in text
    annotation = client.get("v1", "Secret", "creds", namespace=ns)["metadata"]["annotations"][
        LAST_APPLIED_ANNOTATION]
    assert "correct-horse" not in annotation


@pytest.mark.both_servers
def test_official_models_are_accepted(
    rr: ResourceReconciler, client: KubernetesClient, ns: str
) -> None:
    model = k8s.V1ConfigMap(api_version="v1", kind="ConfigMap", data={"k": "v"},
                            metadata=k8s.V1ObjectMeta(name="modelled", namespace=ns))
    assert rr.reconcile_resource(model, PRESENT).action is Action.CREATED
    assert rr.reconcile_resource(model, PRESENT).action is Action.UNCHANGED
    assert client.get("v1", "ConfigMap", "modelled", namespace=ns)["data"] == {"k": "v"}


def test_misuse_is_a_type_or_value_error(rr: ResourceReconciler) -> None:
    with pytest.raises(TypeError):
        rr.reconcile_resource({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "x"}}, "present")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"metadata\.name"):
        rr.reconcile_resource({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}, PRESENT)



class SteppingClock:
    """A ``Clock`` whose ``sleep`` moves its time forward at once (no real waiting)."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.slept = 0.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept += seconds

    def wait(self, condition: Any, timeout: float | None) -> None:
        self.now += timeout or 0.0


@pytest.mark.both_servers
def test_recreate_gives_up_waiting_at_the_deadline_and_requeues(
    client: KubernetesClient, ns: str
) -> None:
    clock = SteppingClock()
    rr = ResourceReconciler(
        client, clock=clock,
        settings=ResourceSettings(recreate=True, recreate_timeout=5.0, poll_interval=1.0),
    )
    held = deployment(ns, "held", app="a")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    rr.reconcile_resource(held, PRESENT)
    changed = deployment(ns, "held", app="b")
    changed["metadata"]["finalizers"] = ["example.com/hold"]

    result = rr.reconcile_resource(changed, PRESENT)
    assert result.action is Action.DELETED
    assert result.requeue_after == 2.0
    assert clock.slept == 5.0
    assert client.get("apps/v1", "Deployment", "held", namespace=ns)["metadata"][
        "deletionTimestamp"]

    client.patch("apps/v1", "Deployment", "held", {"metadata": {"finalizers": None}},
                 patch_type="application/merge-patch+json", namespace=ns)
    wait_for(lambda: rr.reconcile_resource(changed, PRESENT).action is Action.CREATED)
    live = client.get("apps/v1", "Deployment", "held", namespace=ns)
    assert live["spec"]["selector"] == {"matchLabels": {"app": "b"}}
    client.patch("apps/v1", "Deployment", "held", {"metadata": {"finalizers": None}},
                 patch_type="application/merge-patch+json", namespace=ns)


def test_custom_resource_lists_compare_by_the_crd_list_map_keys(
    rr: ResourceReconciler, client: KubernetesClient, ns: str
) -> None:
    group = f"lm{uuid.uuid4().hex[:8]}.example.com"
    client.create({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"routes.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"kind": "Route", "plural": "routes"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                         "type": "object", "properties": {"rules": {
                             "type": "array", "x-kubernetes-list-type": "map",
                             "x-kubernetes-list-map-keys": ["name"],
                             "items": {"type": "object", "properties": {
                                 "name": {"type": "string"}, "to": {"type": "string"}}},
                         }}}}}}}]},
    })
    api_version = f"{group}/v1"
    wait_for(lambda: client.is_served(api_version, "Route"))
    route = {"apiVersion": api_version, "kind": "Route",
             "metadata": {"name": "r", "namespace": ns},
             "spec": {"rules": [{"name": "main", "to": "svc-a"}, {"name": "alt", "to": "svc-b"}]}}
    rr.reconcile_resource(route, PRESENT)
    # Another actor writes the same rules in another order: for a list keyed by name (as the
    # CRD declares) that is no difference; compared by position it would be.
    client.patch(api_version, "Route", "r",
                 {"spec": {"rules": list(reversed(route["spec"]["rules"]))}},
                 patch_type="application/merge-patch+json", namespace=ns)
    assert rr.reconcile_resource(route, PRESENT).action is Action.UNCHANGED
    assert not calculate_patch(client.get(api_version, "Route", "r", namespace=ns),
                               route).is_empty  # what the matcher says without the schema

    changed = copy.deepcopy(route)
    changed["spec"]["rules"][0]["to"] = "svc-c"
    assert rr.reconcile_resource(changed, PRESENT).action is Action.UPDATED
    rules = client.get(api_version, "Route", "r", namespace=ns)["spec"]["rules"]
    assert sorted((r["name"], r["to"]) for r in rules) == [("alt", "svc-b"), ("main", "svc-c")]


@pytest.mark.both_servers
def test_dry_run_reports_recreate_and_delete_without_writing(
    client: KubernetesClient, ns: str
) -> None:
    ResourceReconciler(client).reconcile_resource(deployment(ns, "planned", app="a"), PRESENT)
    before = client.get("apps/v1", "Deployment", "planned", namespace=ns)
    plan = ResourceReconciler(client, dry_run=True, settings=ResourceSettings(recreate=True))
    recreate = plan.reconcile_resource(deployment(ns, "planned", app="b"), PRESENT)
    assert recreate.action is Action.RECREATED
    assert recreate.dry_run
    assert "spec.selector" in recreate.reason
    delete = plan.reconcile_resource(deployment(ns, "planned"), ABSENT)
    assert delete.action is Action.DELETED
    assert delete.writes == 0
    after = client.get("apps/v1", "Deployment", "planned", namespace=ns)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_plan_without_executing_reads_and_writes_nothing(
    rr: ResourceReconciler, configmap: MakeCM, requests: Callable[[], Requests]
) -> None:
    from reconciler._reconcile.planning import PlanAction

    assert rr.plan(configmap("planned-cm", a="1"), PRESENT).action is PlanAction.CREATE
    rr.reconcile_resource(configmap("planned-cm", a="1"), PRESENT)
    with requests() as r:
        planned = rr.plan(configmap("planned-cm", a="2"), PRESENT)
    assert planned.action is PlanAction.PATCH
    assert (r.writes, r.count("get")) == (0, 1)
    assert ("change", ("data", "a")) in [(d.op, d.path) for d in planned.diff]
    assert rr.reconcile_resource(configmap("planned-cm", a="2"), PRESENT).action is Action.UPDATED
    assert rr.plan(configmap("planned-cm", a="2"), PRESENT).action is PlanAction.UNCHANGED
