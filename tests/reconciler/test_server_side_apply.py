"""The ``ServerSideApply`` write strategy and the migrations both ways, on both servers.

Reads go through a cache-like reader that drops ``managedFields`` as the informer cache does, so
the planner's "read the object once when a write is due" path is the one tested.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from builders import DesiredState
from objectmatcher import LAST_APPLIED_ANNOTATION
from reconciler import (
    Action,
    KubernetesClient,
    ResourceReconciler,
    ResourceSettings,
    ServerSideApply,
    ThreeWayMerge,
)
from reconciler._cache.stores import compact
from reconciler._reconcile.applying import APPLIED_DIGEST_ANNOTATION
from reconciler.informers import PassThroughCache
from tests.reconciler.conftest import Requests

MANAGER = "optk"  # the client's fieldManager (KubernetesClient without an operator name)
MERGE = "application/merge-patch+json"
APPLY = "application/apply-patch+yaml"


class _CacheLike(PassThroughCache):
    """Reads from the server, stored as the informer cache stores them (no managedFields)."""

    def get(self, api_version: str, kind: str, name: str, *,
            namespace: str | None = None) -> dict[str, Any] | None:
        found = super().get(api_version, kind, name, namespace=namespace)
        return None if found is None else compact(found)


def _reconciler(client: KubernetesClient, strategy: Any) -> ResourceReconciler:
    reconciler = ResourceReconciler(
        client, reader=_CacheLike(client), settings=ResourceSettings(apply=strategy),
    )
    assert reconciler.field_manager == MANAGER
    return reconciler


def _cm(ns: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "ssa", "namespace": ns, "labels": {"app": "ssa"}},
            "data": data}


def _deployment(ns: str, *, env: dict[str, str], replicas: int | None = 2) -> dict[str, Any]:
    labels = {"app": "ssa"}
    spec: dict[str, Any] = {
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
            "name": "web", "image": "nginx:1.25",
            "env": [{"name": k, "value": v} for k, v in env.items()],
            "resources": {"requests": {"cpu": "1000m", "memory": "64Mi"}},
            "ports": [{"containerPort": 8080, "name": "http"}],
        }]}},
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "ssa", "namespace": ns}, "spec": spec}


def _live(client: KubernetesClient, obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return client.get(obj["apiVersion"], obj["kind"], meta["name"], namespace=meta["namespace"])


def _managers(live: dict[str, Any]) -> set[tuple[str, str]]:
    return {(e["manager"], e["operation"]) for e in live["metadata"].get("managedFields") or ()}


@pytest.mark.both_servers
def test_create_steady_drift_and_removal(
    client: KubernetesClient, ns: str, requests: Callable[[], Requests]
) -> None:
    ssa = _reconciler(client, ServerSideApply())
    desired = _deployment(ns, env={"A": "1", "B": "2"})
    created = ssa.reconcile_resource(desired, DesiredState.PRESENT)
    assert created.action is Action.CREATED
    live = _live(client, desired)
    assert (MANAGER, "Apply") in _managers(live)
    assert APPLIED_DIGEST_ANNOTATION in live["metadata"]["annotations"]
    assert LAST_APPLIED_ANNOTATION not in live["metadata"]["annotations"]
    with requests() as r:  # steady state: the server normalised cpu "1000m" to "1"
        again = ssa.reconcile_resource(desired, DesiredState.PRESENT)
    assert again.action is Action.UNCHANGED
    assert r.writes == 0
    # a hand edit of a field we own (an Update manager) is taken back by one apply
    client.patch("apps/v1", "Deployment", "ssa", {"spec": {"replicas": 5}},
                 patch_type=MERGE, namespace=ns)
    with requests() as r:
        repaired = ssa.reconcile_resource(desired, DesiredState.PRESENT)
    assert repaired.action is Action.UPDATED
    assert r.count("patch") == 1
    assert r.writes == 1
    assert _live(client, desired)["spec"]["replicas"] == 2
    # an env entry removed from the builder is removed from the live object
    smaller = _deployment(ns, env={"A": "1"})
    assert ssa.reconcile_resource(smaller, DesiredState.PRESENT).action is Action.UPDATED
    container = _live(client, desired)["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == [{"name": "A", "value": "1"}]


@pytest.mark.both_servers
def test_a_field_another_apply_manager_owns_is_reported_not_written(
    client: KubernetesClient, ns: str, requests: Callable[[], Requests]
) -> None:
    ssa = _reconciler(client, ServerSideApply())
    desired = _cm(ns, a="1", b="2")
    ssa.reconcile_resource(desired, DesiredState.PRESENT)
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"},
             "data": {"a": "theirs"}}
    theirs = KubernetesClient(client.api_client, operator_name="other-controller")
    theirs.patch("v1", "ConfigMap", "ssa", other, patch_type=APPLY, namespace=ns,
                 force=True)  # another controller takes data.a by a forced apply
    with requests() as r:
        result = ssa.reconcile_resource(desired, DesiredState.PRESENT)
    assert result.action is Action.SKIPPED
    assert ".data.a" in result.reason
    assert "other-controller" in result.reason
    assert r.writes == 0
    assert _live(client, desired)["data"] == {"a": "theirs", "b": "2"}
    forced = _reconciler(client, ServerSideApply(force=True))
    assert forced.reconcile_resource(desired, DesiredState.PRESENT).action is Action.UPDATED
    assert _live(client, desired)["data"] == {"a": "1", "b": "2"}


@pytest.mark.both_servers
def test_a_child_missing_from_the_cache_is_read_before_it_is_applied(
    client: KubernetesClient, ns: str, requests: Callable[[], Requests]
) -> None:
    # an apply creates what is missing and merges into what exists: a foreign object at the
    # child's place, with the very values the builder builds, is not in the operator's child
    # list (no owner label), so the reconcile is told live=None; it must read before applying
    ssa = _reconciler(client, ServerSideApply())
    foreign = _cm(ns, a="1")
    client.create(foreign)  # someone else's: no annotation of ours, no owner reference
    with requests() as r:
        result = ssa.reconcile_resource(foreign, DesiredState.PRESENT, owner_uid="uid-1",
                                        live=None)
    assert result.action is Action.SKIPPED
    assert "not managed by the toolkit" in result.reason
    assert (r.count("get"), r.writes) == (1, 0)
    live = _live(client, foreign)
    assert (MANAGER, "Apply") not in _managers(live)
    assert APPLIED_DIGEST_ANNOTATION not in (live["metadata"].get("annotations") or {})
    # a child that is missing indeed: one read, one apply (the cost of a created child)
    client.delete("v1", "ConfigMap", "ssa", namespace=ns)
    with requests() as r:
        created = ssa.reconcile_resource(foreign, DesiredState.PRESENT, owner_uid="uid-1",
                                         live=None)
    assert created.action is Action.CREATED
    assert (r.count("get"), r.count("patch"), r.writes) == (1, 1, 1)
    assert (MANAGER, "Apply") in _managers(_live(client, foreign))
    # read by name from the server already (a reader that asks the server): no second read
    client.delete("v1", "ConfigMap", "ssa", namespace=ns)
    with requests() as r:
        assert ssa.reconcile_resource(foreign, DesiredState.PRESENT).action is Action.CREATED
    assert (r.count("get"), r.count("patch")) == (1, 1)


def _without_volatile(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items()
            if k not in ("managedFields", "resourceVersion", "annotations", "generation")}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}


@pytest.mark.both_servers
def test_migration_to_server_side_apply_and_back(client: KubernetesClient, ns: str) -> None:
    three_way = _reconciler(client, ThreeWayMerge())
    ssa = _reconciler(client, ServerSideApply())
    desired = _deployment(ns, env={"A": "1", "B": "2", "C": "3"})
    assert three_way.reconcile_resource(desired, DesiredState.PRESENT).action is Action.CREATED
    before = _live(client, desired)
    assert LAST_APPLIED_ANNOTATION in before["metadata"]["annotations"]
    # the switch: ownership moves to an Apply entry; nothing else changes
    switched = ssa.reconcile_resource(desired, DesiredState.PRESENT)
    assert switched.action is Action.UPDATED
    migrated = _live(client, desired)
    annotations = migrated["metadata"]["annotations"]
    assert LAST_APPLIED_ANNOTATION not in annotations
    assert APPLIED_DIGEST_ANNOTATION in annotations
    assert (MANAGER, "Apply") in _managers(migrated)
    assert _without_volatile(migrated) == _without_volatile(before)
    assert ssa.reconcile_resource(desired, DesiredState.PRESENT).writes == 0
    # a field removed from the builder after the switch is gone, nothing else changed
    fewer = _deployment(ns, env={"A": "1", "C": "3"})
    ssa.reconcile_resource(fewer, DesiredState.PRESENT)
    after = _live(client, desired)
    env = after["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "A", "value": "1"}, {"name": "C", "value": "3"}]
    expected = _without_volatile(migrated)
    expected["spec"]["template"]["spec"]["containers"][0]["env"] = env
    assert _without_volatile(after) == expected
    # back to three-way: the annotation returns, a removed field is deleted, nothing else
    fewest = _deployment(ns, env={"A": "1"})
    back = three_way.reconcile_resource(fewest, DesiredState.PRESENT)
    assert back.action is Action.UPDATED
    final = _live(client, desired)
    assert LAST_APPLIED_ANNOTATION in final["metadata"]["annotations"]
    assert APPLIED_DIGEST_ANNOTATION not in final["metadata"]["annotations"]
    env = final["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "A", "value": "1"}]
    expected["spec"]["template"]["spec"]["containers"][0]["env"] = env
    assert _without_volatile(final) == expected
    assert three_way.reconcile_resource(fewest, DesiredState.PRESENT).writes == 0


@pytest.mark.both_servers
def test_a_kind_can_keep_the_other_strategy(client: KubernetesClient, ns: str) -> None:
    mixed = ResourceReconciler(
        client, reader=_CacheLike(client),
        settings=ResourceSettings(apply=ServerSideApply(),
                                  apply_kinds={"ConfigMap": ThreeWayMerge()}),
    )
    mixed.reconcile_resource(_cm(ns, a="1"), DesiredState.PRESENT)
    mixed.reconcile_resource(_deployment(ns, env={"A": "1"}), DesiredState.PRESENT)
    cm = _live(client, _cm(ns))
    assert LAST_APPLIED_ANNOTATION in cm["metadata"]["annotations"]
    assert (MANAGER, "Apply") not in _managers(cm)
    assert (MANAGER, "Apply") in _managers(_live(client, _deployment(ns, env={})))
