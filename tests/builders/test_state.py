"""DesiredState: the three constants, hooks as values, and the ready-made hooks."""

from __future__ import annotations

import copy
from typing import Any

import attrs
import pytest

from builders import DesiredState, KubeObject, StateKind, keep_cluster_ip, keep_hpa_replicas


def test_constants_are_distinct_and_say_which_they_are() -> None:
    assert DesiredState.PRESENT.is_present
    assert DesiredState.ABSENT.is_absent
    assert DesiredState.CREATED.is_created
    assert DesiredState.PRESENT.kind is StateKind.PRESENT
    assert len({DesiredState.PRESENT, DesiredState.ABSENT, DesiredState.CREATED}) == 3
    assert repr(DesiredState.ABSENT) == "DesiredState.ABSENT"


def test_states_with_hooks_are_frozen_comparable_values() -> None:
    with_hook = DesiredState.PRESENT.with_hooks(before_update=keep_cluster_ip)
    assert with_hook == DesiredState.PRESENT.with_hooks(before_update=keep_cluster_ip)
    assert with_hook != DesiredState.PRESENT
    assert with_hook.is_present
    assert with_hook.has_hooks
    assert with_hook.without_hooks() == DesiredState.PRESENT
    assert repr(with_hook) == "DesiredState.PRESENT.with_hooks(before_update=keep_cluster_ip)"
    assert DesiredState.PRESENT.create_hooks == ()  # the constant is untouched
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        with_hook.kind = StateKind.ABSENT  # type: ignore[misc]


def test_with_hooks_rejects_non_callables() -> None:
    with pytest.raises(TypeError, match="before_create"):
        DesiredState.PRESENT.with_hooks(before_create="nope")  # type: ignore[arg-type]


def test_no_hooks_means_identity_and_update_allowed() -> None:
    obj = {"kind": "ConfigMap", "data": {"a": "1"}}
    state = DesiredState.PRESENT
    assert state.before_create(obj) is obj
    assert state.before_update(obj, obj) is obj
    assert state.before_delete(obj) is obj
    assert state.should_update(obj, obj)


def test_hooks_chain_in_order_and_predicates_all_must_agree() -> None:
    def add(key: str) -> Any:
        def hook(current: KubeObject, desired: KubeObject) -> KubeObject:
            return {**desired, "trail": [*desired.get("trail", []), key]}

        return hook

    state = DesiredState.PRESENT.with_hooks(before_update=add("a")).with_hooks(
        before_update=add("b"), should_update=lambda c, d: True
    )
    assert state.before_update({}, {})["trail"] == ["a", "b"]
    assert state.should_update({}, {})
    assert not state.with_hooks(should_update=lambda c, d: False).should_update({}, {})
    created = DesiredState.CREATED.with_hooks(before_create=lambda d: {**d, "made": True})
    assert created.before_create({})["made"] is True


def test_before_delete_none_keeps_the_object() -> None:
    seen: list[KubeObject] = []

    def record(obj: KubeObject) -> KubeObject:
        seen.append(obj)
        return obj

    state = DesiredState.ABSENT.with_hooks(before_delete=lambda obj: None).with_hooks(
        before_delete=record
    )
    assert state.before_delete({"kind": "Secret"}) is None
    assert seen == []  # later hooks do not run once one kept the object


def test_keep_cluster_ip_keeps_allocated_addresses_without_mutating() -> None:
    current = {"spec": {"clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"], "ports": []}}
    desired = {"spec": {"ports": [{"port": 80}]}}
    snapshot = copy.deepcopy(desired)
    kept = keep_cluster_ip(current, desired)
    assert kept["spec"] == {
        "ports": [{"port": 80}],
        "clusterIP": "10.0.0.7",
        "clusterIPs": ["10.0.0.7"],
    }
    assert desired == snapshot
    explicit = {"spec": {"clusterIP": "None"}}
    assert keep_cluster_ip(current, explicit)["spec"]["clusterIP"] == "None"
    assert keep_cluster_ip({}, desired) is desired


def test_keep_hpa_replicas_takes_the_live_count() -> None:
    desired = {"spec": {"replicas": 1, "template": {}}}
    scaled = keep_hpa_replicas({"spec": {"replicas": 5}}, desired)
    assert scaled["spec"] == {"replicas": 5, "template": {}}
    assert desired["spec"]["replicas"] == 1
    assert keep_hpa_replicas({"spec": {}}, desired) is desired
