"""The pure sharding decisions: rendezvous hashing, membership from Leases, the assigner's
decision for one parent and the owner's side of the drain handshake."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders.names import MANAGED_BY_LABEL, OWNER_UID_LABEL
from reconciler import Sharding
from reconciler._sharding.decisions import (
    DRAIN_LABEL,
    SHARD_LABEL,
    Decision,
    adopt_patch,
    adoption,
    decide,
    live_shards,
    metadata_view,
    must_release,
    next_change,
    observe_members,
    rendezvous_shard,
)

KEYS = [f"ns/parent-{i}" for i in range(3000)]


def parent(name: str, shard: str | None = None, drain: bool = False) -> dict[str, Any]:
    labels = {} if shard is None else {SHARD_LABEL: shard}
    if drain:
        labels[DRAIN_LABEL] = "true"
    return {"metadata": {"name": name, "namespace": "ns", "labels": labels}}


def lease(shard: str, holder: str, renew: str, version: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": f"op-shard-{shard}", "labels": {SHARD_LABEL: shard},
                         "resourceVersion": version},
            "spec": {"holderIdentity": holder, "renewTime": renew, "leaseDurationSeconds": 10}}


def test_rendezvous_spreads_evenly_and_a_join_moves_about_one_in_n() -> None:
    three = {k: rendezvous_shard(k, ["a", "b", "c"]) for k in KEYS}
    counts = {s: sum(v == s for v in three.values()) for s in "abc"}
    assert all(abs(c - 1000) < 120 for c in counts.values()), counts
    four = {k: rendezvous_shard(k, ["a", "b", "c", "d"]) for k in KEYS}
    moved = [k for k in KEYS if three[k] != four[k]]
    assert all(four[k] == "d" for k in moved)  # only to the new shard
    assert abs(len(moved) / len(KEYS) - 0.25) < 0.04


@given(st.sets(st.sampled_from("abcdefgh"), min_size=2), st.sampled_from(KEYS[:200]))
def test_removing_a_shard_moves_only_its_own_keys(shards: set[str], key: str) -> None:
    owner = rendezvous_shard(key, shards)
    for gone in shards:
        after = rendezvous_shard(key, shards - {gone})
        assert after == owner or owner == gone


def test_rendezvous_of_no_shard_is_none() -> None:
    assert rendezvous_shard("ns/x", []) is None


def test_membership_is_judged_by_the_observers_clock() -> None:
    members = observe_members({}, [lease("a", "a", "2020-01-01T00:00:00.000000Z")], now=100.0,
                              default_duration=15)
    # the renewTime is ancient (skewed clock): what counts is when the record last changed
    assert live_shards(members, now=109.0) == {"a"}
    same = observe_members(members, [lease("a", "a", "2020-01-01T00:00:00.000000Z")],
                           now=105.0, default_duration=15)
    assert same["a"].observed_at == 100.0
    assert live_shards(same, now=110.5) == frozenset()
    renewed = observe_members(same, [lease("a", "a", "2020-01-01T00:00:02.000000Z", "2")],
                              now=111.0, default_duration=15)
    assert live_shards(renewed, now=120.0) == {"a"}
    released = observe_members(renewed, [lease("a", "", "2020-01-01T00:00:03.000000Z", "3")],
                               now=112.0, default_duration=15)
    assert live_shards(released, now=112.0) == frozenset()  # a released Lease: gone at once
    assert observe_members(released, [], now=113.0, default_duration=15) == {}


def test_the_assigner_wakes_at_the_next_expiry_or_drain_timeout() -> None:
    members = observe_members({}, [lease("a", "a", "t1"), lease("b", "b", "t1")], now=100.0,
                              default_duration=15)
    members = observe_members(members, [lease("a", "a", "t1"), lease("b", "b", "t2", "2")],
                              now=103.0, default_duration=15)
    # durations come from the Leases (10 s), counted from when this observer saw each record
    assert next_change(members, now=104.0, drain_timeout=60) == 110.0
    assert next_change(members, now=104.0, drains=[45.0], drain_timeout=60) == 105.0
    assert next_change(members, now=104.0, drains=[30.0], drain_timeout=60) == 110.0  # past
    assert live_shards(members, now=110.0) == {"b"}  # at that instant "a" is gone
    assert next_change(members, now=110.0, drain_timeout=60) == 113.0
    assert next_change(members, now=113.0, drain_timeout=60) is None
    assert next_change({}, now=0.0, drain_timeout=60) is None


def apply_json_patch(obj: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A JSON patch's ``test`` and ``add`` on labels (what ``adopt_patch`` uses); None when a
    test fails (the server's 422)."""
    labels = dict(obj["metadata"].get("labels") or {})
    for op in ops:
        if op["path"] == "/metadata/resourceVersion":
            if obj["metadata"].get("resourceVersion") != op["value"]:
                return None
            continue
        key = op["path"].removeprefix("/metadata/labels/").replace("~1", "/").replace("~0", "~")
        if op["op"] == "test" and labels.get(key) != op["value"]:
            return None
        if op["op"] == "add":
            labels[key] = op["value"]
    return {**obj, "metadata": {**obj["metadata"], "labels": labels}}


def test_adoption_relabels_only_the_operators_child_of_that_parent() -> None:
    ours = {"metadata": {"name": "p-cfg", "labels": {
        MANAGED_BY_LABEL: "op", OWNER_UID_LABEL: "u1", SHARD_LABEL: "old"}}}
    ops = adopt_patch(shard="new", operator="op", owner_uid="u1")
    adopted = apply_json_patch(ours, ops)
    assert adopted is not None
    assert adopted["metadata"]["labels"][SHARD_LABEL] == "new"
    assert {op["path"] for op in ops} == {
        "/metadata/labels/app.kubernetes.io~1managed-by", "/metadata/labels/optk.dev~1owner-uid",
        "/metadata/labels/optk.dev~1shard"}
    assert apply_json_patch(ours, adopt_patch(shard="new", operator="op", owner_uid="u2")) is None
    foreign = {"metadata": {"name": "p-cfg", "labels": {OWNER_UID_LABEL: "u1"}}}
    assert apply_json_patch(foreign, ops) is None


@pytest.mark.parametrize("policy", [None, "no-prune", "ignore", "observe", "create-only",
                                    "bogus"])
def test_adoption_reads_the_child_and_respects_its_policy(policy: str | None) -> None:
    """An adoption is a patch like any other: a child whose ``optk.dev/policy`` forbids
    patches (or names no policy the toolkit knows) is not relabelled; one already this shard's,
    another operator's or another parent's neither; the patch holds only for the version
    read."""
    annotations = {} if policy is None else {"optk.dev/policy": policy}
    live = {"metadata": {"name": "p-cfg", "resourceVersion": "7", "annotations": annotations,
                         "labels": {MANAGED_BY_LABEL: "op", OWNER_UID_LABEL: "u1",
                                    SHARD_LABEL: "old"}}}
    ops = adoption(live, shard="new", operator="op", owner_uid="u1")
    if policy not in (None, "no-prune"):
        assert ops is None
        return
    assert ops is not None
    adopted = apply_json_patch(live, ops)
    assert adopted is not None
    assert adopted["metadata"]["labels"][SHARD_LABEL] == "new"
    newer = {**live, "metadata": {**live["metadata"], "resourceVersion": "8"}}
    assert apply_json_patch(newer, ops) is None  # changed since the read: refused
    assert adoption(adopted, shard="new", operator="op", owner_uid="u1") is None
    assert adoption(live, shard="new", operator="op", owner_uid="u2") is None
    assert adoption(live, shard="new", operator="other", owner_uid="u1") is None


def test_the_assigners_view_of_a_parent_keeps_only_what_it_decides_on() -> None:
    full = {"apiVersion": "x/v1", "kind": "Item", "spec": {"big": "x" * 1000},
            "status": {"lastReconcile": "t"},
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                         "labels": {SHARD_LABEL: "a", DRAIN_LABEL: "true"},
                         "annotations": {"a": "b"}, "managedFields": [{"manager": "m"}],
                         "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    view = metadata_view(full)
    assert view == {"apiVersion": "x/v1", "kind": "Item", "metadata": {
        "name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7",
        "labels": {SHARD_LABEL: "a", DRAIN_LABEL: "true"},
        "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    kw: dict[str, Any] = {"live": frozenset({"a", "b"}), "drain_started": 0.0, "now": 1.0,
                          "drain_timeout": 30}
    assert decide(view, **kw) == decide(full, **kw)
    assert metadata_view({"metadata": {"name": "p"}}) == {"metadata": {"name": "p"}}


def test_decisions() -> None:
    live = frozenset({"a", "b", "c"})
    name = next(k for k in KEYS if rendezvous_shard(k, sorted(live)) == "a").split("/")[1]
    kw: dict[str, Any] = {"live": live, "drain_started": None, "now": 50.0, "drain_timeout": 30}
    assert decide(parent(name), **kw).decision is Decision.ASSIGN
    assert decide(parent(name), **kw).target == "a"
    assert decide(parent(name, "a"), **kw).decision is Decision.NOTHING
    gone = decide(parent(name, "z"), **kw)
    assert (gone.decision, gone.target, gone.current) == (Decision.ASSIGN, "a", "z")
    assert decide(parent(name, "b"), **kw).decision is Decision.DRAIN
    waiting = {**kw, "drain_started": 40.0}
    assert decide(parent(name, "b", drain=True), **waiting).decision is Decision.WAIT
    late = {**kw, "drain_started": 10.0}
    assert decide(parent(name, "b", drain=True), **late).decision is Decision.FORCE
    assert decide(parent(name), **{**kw, "live": frozenset()}).decision is Decision.NOTHING


def test_the_owner_releases_only_its_own_drained_parents() -> None:
    assert must_release(parent("x", "a", drain=True), "a")
    assert not must_release(parent("x", "a"), "a")
    assert not must_release(parent("x", "b", drain=True), "a")


def test_sharding_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="lease_duration > renew_deadline"):
        Sharding(lease_duration=5, renew_deadline=6)
    with pytest.raises(ValueError, match="shard_id"):
        Sharding(shard_id="not a label!")
    with pytest.raises(ValueError, match="replicas_hint"):
        Sharding(replicas_hint=0)
    assert Sharding().resolve_id({"OPTK_SHARD_ID": "s1"}, "host") == "s1"
    assert Sharding(shard_id="x").resolve_id({"OPTK_SHARD_ID": "s1"}, "host") == "x"
    assert Sharding().resolve_id({}, "pod/name:1") == "pod-name-1"
