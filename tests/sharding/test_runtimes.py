"""Sharded runtimes in this process, each with its own client, against the embedded server.

Three replicas converge, each caching only its own parents and their children; a crashed
replica's parents are taken over within the lease duration; a replica joining takes about a
third of the parents, each moved by a drain its old owner acknowledged.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from builders.names import MANAGED_BY_LABEL, OWNER_UID_LABEL
from reconciler import KubernetesClient
from reconciler._driver.runtime import OperatorRuntime
from reconciler._sharding.decisions import SHARD_LABEL, shard_of
from reconciler.embedded import Faults
from tests.sharding.conftest import child_value, converged, item, owners, wait_until
from tests.sharding.sample import API_VERSION, USER_AGENT_PREFIX, make_operator, replica_client

LEASE = 2.0
PARENTS = 30


def start_replica(kube_api: Any, namespace: str, shard: str, **options: Any) -> OperatorRuntime:
    """One replica: its own ApiClient (user agent ``optk-shard/<shard>``) and runtime."""
    options.setdefault("replicas_hint", 3)
    options.setdefault("lease_duration", LEASE)
    operator = make_operator(namespace=namespace, **options)
    return operator.start(replica_client(kube_api.api_client(), shard), identity=shard,
                          environ={"OPTK_SHARD_ID": shard})


@pytest.fixture
def replicas(kube_api: Any, kube_namespace: str) -> Iterator[dict[str, OperatorRuntime]]:
    """Started replicas by shard id, stopped after the test."""
    runtimes: dict[str, OperatorRuntime] = {}
    with ExitStack() as stack:
        stack.callback(lambda: [rt.stop(2.0) for rt in runtimes.values() if not rt.finished])
        yield runtimes


def cached_parents(runtime: OperatorRuntime) -> set[str]:
    """The names of the parents in a runtime's cache."""
    keys = runtime.parents.cache.keys()  # a snapshot: the cache is not iterable
    return {name for _, name in keys}


def cached_children(runtime: OperatorRuntime) -> set[str]:
    """The names of the ConfigMaps in a runtime's child cache."""
    informer = runtime.informers.informer("v1", "ConfigMap")
    keys = [] if informer is None else informer.cache.keys()
    return {name for _, name in keys}


def test_three_replicas_converge_take_over_and_rebalance(
    kube_api: Any, kube_namespace: str, shard_client: KubernetesClient,
    replicas: dict[str, OperatorRuntime],
) -> None:
    ns, client = kube_namespace, shard_client
    kube_api.enable_request_log()
    for shard in ("a", "b", "c"):
        replicas[shard] = start_replica(kube_api, ns, shard)
    for index in range(PARENTS):
        client.create(item(ns, f"p{index:03d}"))
    assert wait_until(lambda: converged(client, ns, live={"a", "b", "c"}), 30), owners(client, ns)

    # each replica caches only its own parents and their children
    by_shard = owners(client, ns)
    assert wait_until(lambda: all(
        cached_parents(rt) == {n for n, s in by_shard.items() if s == shard}
        and cached_children(rt) == {f"{n}-cfg" for n, s in by_shard.items() if s == shard}
        for shard, rt in replicas.items()), 10)
    assert all(0 < sum(s == shard for s in by_shard.values()) < PARENTS for shard in "abc")
    # the assigner caches every parent, but only its metadata view (no spec, no status)
    assigner = next(rt.shards.assigner for rt in replicas.values()
                    if rt.shards and rt.shards.assigner)
    views = assigner.parents.cache.list()
    assert len(views) == PARENTS
    assert all(set(v) <= {"apiVersion", "kind", "metadata"} and v["metadata"]["uid"]
               and "managedFields" not in v["metadata"] for v in views)

    # crash one replica that is not the assigner: its parents move within the lease duration
    victim = next(s for s, rt in replicas.items() if rt.shards and not rt.shards.leading)
    theirs = {n for n, s in by_shard.items() if s == victim}
    replicas.pop(victim).stop(0.0, release_lease=False)
    live = {"a", "b", "c"} - {victim}
    # (the lease must expire first: 2 s here; the bound leaves room for a loaded machine,
    # benchmarks.sharding measures the takeover on a quiet one)
    assert wait_until(lambda: not set(owners(client, ns).values()) & {victim}, 3 * LEASE + 3)
    # the children moved with their parents (relabelled by the assigner), no reconcile needed
    assert wait_until(lambda: converged(client, ns, live=live), 20), owners(client, ns)
    for name in theirs:
        client.patch("shardtest.optk.dev/v1", "Item", name, {"spec": {"value": "2"}},
                     patch_type="application/merge-patch+json", namespace=ns)
    expected = lambda: all(  # noqa: E731
        (child := client.get("v1", "ConfigMap", f"{n}-cfg", namespace=ns))
        and (child.get("data") or {}).get("value") == "2" for n in theirs)
    assert wait_until(expected, 20)

    # a replica joins: about a third move, each released by its old owner first
    before = owners(client, ns)
    releases_before = sum(rt.shards.releases for rt in replicas.values() if rt.shards)
    replicas["d"] = start_replica(kube_api, ns, "d")
    live = live | {"d"}
    assert wait_until(lambda: "d" in set(owners(client, ns).values())
                      and all(s in live for s in owners(client, ns).values()), 20)
    time.sleep(3 * LEASE / 8)
    after = owners(client, ns)
    moved = {n for n in after if after[n] != before[n]}
    assert 0.1 * PARENTS <= len(moved) <= 0.6 * PARENTS, (len(moved), after)
    assert all(after[n] == "d" for n in moved)
    released = sum(rt.shards.releases for rt in replicas.values() if rt.shards and
                   rt is not replicas["d"]) - releases_before
    assert released == len(moved)
    assert wait_until(lambda: cached_parents(replicas["d"]) == moved, 10)

    # never two replicas writing the children (or status) of one parent at once (and the log
    # does tell the replicas apart: every one of them wrote children)
    assert child_writers(kube_api.request_log()) >= {f"{USER_AGENT_PREFIX}{s}" for s in "abcd"}
    assert overlapping_writers(kube_api.request_log()) == {}


def test_graceful_leave_per_shard_heartbeats_and_metrics(
    kube_api: Any, kube_namespace: str, shard_client: KubernetesClient,
    replicas: dict[str, OperatorRuntime],
) -> None:
    ns, client = kube_namespace, shard_client
    # a lease far longer than the waits below: parents that move were released, not expired
    long_lease = 30.0
    for shard in ("a", "b"):
        replicas[shard] = start_replica(kube_api, ns, shard, replicas_hint=2, heartbeat=0.5,
                                        lease_duration=long_lease)
    for index in range(12):
        client.create(item(ns, f"q{index:02d}"))
    assert wait_until(lambda: converged(client, ns, live={"a", "b"}), 20), owners(client, ns)
    # one heartbeat Lease per shard
    assert wait_until(lambda: {"shards-resync-a", "shards-resync-b"} <= {
        lease["metadata"]["name"] for lease in client.list(
            "coordination.k8s.io/v1", "Lease", namespace=ns).get("items") or ()}, 10)
    leader = next(rt for rt in replicas.values() if rt.shards and rt.shards.leading)
    counts = {s: sum(v == s for v in owners(client, ns).values()) for s in "ab"}
    def exposed() -> bool:
        text = leader.metrics.exposition().decode()
        return all(f'optk_shard_parents{{controller="shards",shard="{s}"}} {float(n)}' in text
                   for s, n in counts.items())
    assert wait_until(exposed, 10), leader.metrics.exposition().decode()
    # a graceful stop releases the Lease: its parents move at once, long before the lease
    # would have expired
    other = next(s for s, rt in replicas.items() if rt is not leader)
    replicas.pop(other).stop(5.0)
    assert wait_until(lambda: set(owners(client, ns).values()) == {leader.shards.shard
                                                                   if leader.shards else ""},
                      long_lease / 3)
    assert wait_until(lambda: converged(client, ns, live={str(
        leader.shards.shard if leader.shards else "")}), 10)


def child_writers(log: list[Any]) -> set[str]:
    """The user agents of the replicas that wrote a ConfigMap (a child) successfully."""
    return {r.user_agent for r in log if (r.user_agent or "").startswith(USER_AGENT_PREFIX)
            and r.code < 400 and r.resource == "configmaps"
            and r.verb in ("create", "update", "patch")}


def overlapping_writers(log: list[Any]) -> dict[str, list[str]]:
    """Parents whose child or status writes came from two replicas interleaved (A, B, A):
    a handover leaves the old writer silent for good."""
    writers: dict[str, list[str]] = {}
    for record in sorted(log, key=lambda r: r.at):
        agent = record.user_agent or ""
        if not agent.startswith(USER_AGENT_PREFIX) or record.code >= 400:
            continue
        if record.verb not in ("create", "update", "patch", "delete") or not record.name:
            continue
        if record.resource.startswith("configmaps"):
            parent = record.name.removesuffix("-cfg")
        elif record.resource == "items.shardtest.optk.dev/status":
            parent = record.name
        else:
            continue
        sequence = writers.setdefault(parent, [])
        if not sequence or sequence[-1] != agent:
            sequence.append(agent)
    return {p: seq for p, seq in writers.items() if len(seq) != len(set(seq))}


def test_a_new_owner_adopts_the_built_and_the_leftover_children_of_a_moved_in_parent(
    kube_api: Any, kube_namespace: str, shard_client: KubernetesClient,
    replicas: dict[str, OperatorRuntime],
) -> None:
    """The built child is relabelled by name (a conditional JSON patch); an unbuilt child of a
    prune kind is found by owner uid, relabelled and then pruned by the new owner; a
    ConfigMap of another owner is left alone."""
    ns, client = kube_namespace, shard_client
    prune = [("v1", "ConfigMap")]
    replicas["a"] = start_replica(kube_api, ns, "a", replicas_hint=1, prune=prune)
    client.create(item(ns, "solo"))
    assert wait_until(lambda: converged(client, ns, live={"a"}), 20)
    uid = client.get(API_VERSION, "Item", "solo", namespace=ns)["metadata"]["uid"]
    def config_map(name: str, owner_uid: str) -> dict[str, Any]:
        owned = [{"apiVersion": API_VERSION, "kind": "Item", "name": "solo", "uid": uid,
                  "controller": True}] if owner_uid == uid else []  # GC takes dangling ones
        return {"apiVersion": "v1", "kind": "ConfigMap", "data": {}, "metadata": {
            "name": name, "namespace": ns, "ownerReferences": owned, "labels": {
                MANAGED_BY_LABEL: "shards", OWNER_UID_LABEL: owner_uid, SHARD_LABEL: "gone"}}}
    # left by an earlier build (no longer built) and labelled for a shard long gone
    client.create(config_map("solo-old", uid))
    client.create(config_map("stranger", "another-parent"))
    replicas.pop("a").stop(0.0, release_lease=False)  # a crash: the Leases expire
    replicas["b"] = start_replica(kube_api, ns, "b", replicas_hint=1, prune=prune)
    assert wait_until(lambda: owners(client, ns) == {"solo": "b"}, 6 * LEASE)
    def shard_label(name: str) -> str | None:
        return shard_of(client.get("v1", "ConfigMap", name, namespace=ns))
    assert wait_until(lambda: shard_label("solo-cfg") == "b" and shard_label("solo-old") == "b")
    shards = replicas["b"].shards
    assert shards is not None
    # the count follows each adoption's answer: the label can be seen a moment before it
    assert wait_until(lambda: shards.adopted == 2, 5), shards.adopted
    assert shard_label("stranger") == "gone"
    # the new owner sees the leftover, so its next reconcile prunes it
    client.patch(API_VERSION, "Item", "solo", {"spec": {"value": "2"}},
                 patch_type="application/merge-patch+json", namespace=ns)
    assert wait_until(lambda: "solo-old" not in {c["metadata"]["name"] for c in client.list(
        "v1", "ConfigMap", namespace=ns).get("items") or ()})
    assert converged(client, ns, live={"b"}, value="2")
    assert shard_label("stranger") == "gone"


def test_a_child_edited_while_its_owner_was_dead_is_repaired_at_the_takeover(
    kube_api: Any, kube_namespace: str, shard_client: KubernetesClient,
    replicas: dict[str, OperatorRuntime],
) -> None:
    """Adoption relabels the children without a full reconcile; a child that drifted while no
    replica watched it (its owner crashed) is planned against the caches after the adoption and
    repaired at once, not at the next periodic resync (hours away)."""
    ns, client = kube_namespace, shard_client
    replicas["a"] = start_replica(kube_api, ns, "a", replicas_hint=1)
    for name in ("kept", "drifted"):
        client.create(item(ns, name))
    assert wait_until(lambda: converged(client, ns, live={"a"}), 20)
    replicas.pop("a").stop(0.0, release_lease=False)  # a crash: the Leases expire
    client.patch("v1", "ConfigMap", "drifted-cfg", {"data": {"value": "edited"}},
                 patch_type="application/merge-patch+json", namespace=ns)
    replicas["b"] = start_replica(kube_api, ns, "b", replicas_hint=1)
    assert wait_until(lambda: converged(client, ns, live={"b"}), 6 * LEASE), {
        name: child_value(client, ns, name) for name in ("kept", "drifted")}
    assert replicas["b"].stats.triggers["moved-in"] == 2


def test_a_replica_that_cannot_renew_its_lease_stops_before_the_lease_expires(
    kube_api: Any, kube_namespace: str, shard_client: KubernetesClient,
    replicas: dict[str, OperatorRuntime],
) -> None:
    """Lease renewals fail (the replica is cut off from the Leases, its other requests pass):
    it stops itself within the renew deadline, before the assigner would move its parents."""
    ns, client = kube_namespace, shard_client
    replicas["a"] = start_replica(kube_api, ns, "a", replicas_hint=1)
    client.create(item(ns, "solo"))
    assert wait_until(lambda: converged(client, ns, live={"a"}), 20)
    runtime = replicas["a"]
    sharding = runtime.operator.sharding
    assert sharding is not None
    cut = Faults(error_rate=1.0, error_code=503, verbs={"update"},
                 resources={"leases.coordination.k8s.io"})
    with kube_api.faults(cut):
        started = time.monotonic()
        assert wait_until(lambda: runtime.finished, 3 * LEASE)
        stopped = time.monotonic() - started
    assert stopped < sharding.lease_duration, stopped
    assert stopped >= sharding.renew_deadline - sharding.renew_period, stopped


def test_a_paused_parent_moved_in_has_no_child_relabelled_until_unpaused(
    kube_api: Any, kube_namespace: str, shard_client: KubernetesClient,
    replicas: dict[str, OperatorRuntime],
) -> None:
    """A pause writes nothing of a parent's children, adoption included: the new owner of a
    paused parent leaves its children's shard label as it is (found by the sharded operator
    machine: a paused parent's child was patched after a crash), and relabels them once the
    parent is unpaused."""
    from reconciler._reconcile.policies import PAUSED_ANNOTATION

    ns, client = kube_namespace, shard_client
    replicas["a"] = start_replica(kube_api, ns, "a", replicas_hint=1)
    client.create(item(ns, "held"))
    assert wait_until(lambda: converged(client, ns, live={"a"}), 20)

    def child() -> dict[str, Any]:
        return client.get("v1", "ConfigMap", "held-cfg", namespace=ns)

    client.patch(API_VERSION, "Item", "held",
                 {"metadata": {"annotations": {PAUSED_ANNOTATION: "true"}}},
                 patch_type="application/merge-patch+json", namespace=ns)
    assert wait_until(lambda: any(
        c.get("reason") == "ReconcilePaused" for c in (client.get(
            API_VERSION, "Item", "held", namespace=ns).get("status") or {}).get(
                "conditions") or ()), 20)
    version = child()["metadata"]["resourceVersion"]
    replicas.pop("a").stop(0.0, release_lease=False)  # a crash: the Leases expire
    replicas["b"] = start_replica(kube_api, ns, "b", replicas_hint=1)
    assert wait_until(lambda: owners(client, ns) == {"held": "b"}, 6 * LEASE)
    assert wait_until(lambda: replicas["b"].stats.triggers["moved-in"] >= 1, 10)
    time.sleep(1.0)  # room for an adoption's patch to land, were one sent
    assert child()["metadata"]["resourceVersion"] == version
    assert shard_of(child()) == "a"
    client.patch(API_VERSION, "Item", "held",
                 {"metadata": {"annotations": {PAUSED_ANNOTATION: None}}},
                 patch_type="application/merge-patch+json", namespace=ns)
    assert wait_until(lambda: converged(client, ns, live={"b"}), 20)


@pytest.mark.both_servers
@pytest.mark.parametrize("policy", ["ignore", "observe", "create-only"])
def test_a_child_whose_policy_forbids_patches_is_not_relabelled_by_its_new_owner(
    kube_api: Any, kube_namespace: str, shard_client: KubernetesClient,
    replicas: dict[str, OperatorRuntime], policy: str,
) -> None:
    """``optk.dev/policy: ignore`` (``observe``, ``create-only``) forbids every patch of the
    child, the shard label of an adoption included: the new owner of a moved-in parent reads
    the child first and leaves it as it is (found by the sharded operator machine's soak: an
    ignored Deployment was relabelled after a restart moved its parent), and its reconciles
    after the move write nothing to it either; the parent's other child is adopted."""
    from reconciler._reconcile.policies import POLICY_ANNOTATION

    ns, client = kube_namespace, shard_client
    replicas["a"] = start_replica(kube_api, ns, "a", replicas_hint=1)
    for name in ("kept", "other"):
        client.create(item(ns, name))
    assert wait_until(lambda: converged(client, ns, live={"a"}), 20)

    def child() -> dict[str, Any]:
        return client.get("v1", "ConfigMap", "kept-cfg", namespace=ns)

    client.patch("v1", "ConfigMap", "kept-cfg",
                 {"metadata": {"annotations": {POLICY_ANNOTATION: policy}}},
                 patch_type="application/merge-patch+json", namespace=ns)
    version = child()["metadata"]["resourceVersion"]
    replicas.pop("a").stop(0.0, release_lease=False)  # a crash: the Leases expire
    replicas["b"] = start_replica(kube_api, ns, "b", replicas_hint=1)
    assert wait_until(lambda: set(owners(client, ns).values()) == {"b"}, 6 * LEASE)
    assert wait_until(lambda: shard_of(client.get(
        "v1", "ConfigMap", "other-cfg", namespace=ns)) == "b", 10)
    shards = replicas["b"].shards
    assert shards is not None
    assert wait_until(lambda: shards.adopted == 1, 5), shards.adopted
    # a change of the parent: the new owner reconciles it, and still leaves the child alone
    client.patch(API_VERSION, "Item", "kept", {"spec": {"value": "2"}},
                 patch_type="application/merge-patch+json", namespace=ns)
    assert wait_until(lambda: (client.get(API_VERSION, "Item", "kept", namespace=ns).get(
        "status") or {}).get("observedGeneration") == 2, 20)
    time.sleep(0.5)  # room for a write to land, were one sent
    assert child()["metadata"]["resourceVersion"] == version  # no write landed
    assert shard_of(child()) == "a"
    assert child_value(client, ns, "kept") == "1"


@pytest.mark.both_servers
def test_a_child_the_new_owner_could_not_relabel_is_still_deleted_when_absent(
    kube_api: Any, kube_namespace: str, shard_client: KubernetesClient,
    replicas: dict[str, OperatorRuntime],
) -> None:
    """A ``create-only`` child keeps its old shard label at a move (no patch), so the new
    owner's child cache never holds it; when the parent turns it ABSENT, the owner reads it
    from the server and deletes it (found by the sharded operator machine's soak: an ABSENT
    child handed over while it waited stayed for good)."""
    from reconciler._reconcile.policies import POLICY_ANNOTATION

    ns, client = kube_namespace, shard_client
    replicas["a"] = start_replica(kube_api, ns, "a", replicas_hint=1)
    client.create(item(ns, "gone"))
    assert wait_until(lambda: converged(client, ns, live={"a"}), 20)
    client.patch("v1", "ConfigMap", "gone-cfg",
                 {"metadata": {"annotations": {POLICY_ANNOTATION: "create-only"}}},
                 patch_type="application/merge-patch+json", namespace=ns)
    replicas.pop("a").stop(0.0, release_lease=False)  # a crash: the Leases expire
    replicas["b"] = start_replica(kube_api, ns, "b", replicas_hint=1)
    assert wait_until(lambda: owners(client, ns) == {"gone": "b"}, 6 * LEASE)
    assert wait_until(lambda: replicas["b"].stats.triggers["moved-in"] >= 1, 10)
    assert shard_of(client.get("v1", "ConfigMap", "gone-cfg", namespace=ns)) == "a"
    client.patch(API_VERSION, "Item", "gone", {"spec": {"value": "absent"}},
                 patch_type="application/merge-patch+json", namespace=ns)
    assert wait_until(lambda: child_value(client, ns, "gone") is None, 20)
    assert wait_until(lambda: any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in (client.get(
            API_VERSION, "Item", "gone", namespace=ns).get("status") or {}).get(
                "conditions") or ()), 20)
