"""Sharded, a parent whose child's name another owner's object holds is woken when that object
is deleted (issue 38).

Each replica's child informers select its shard label, which the foreign object lacks, so only
the named watch of ``reconciler._sharding.foreign`` sees it go: held by the parent's owner
while the parent waits, by no other replica, and let go once the child is created.
"""

from __future__ import annotations

import time
from typing import Any

import attrs

from builders import ObjectRef
from builders.names import MANAGED_BY_LABEL
from reconciler import KubernetesClient, NotFoundError
from reconciler._cache.pool import InformerPool
from reconciler._driver.runtime import OperatorRuntime
from reconciler._reconcile.sharing import ownership_marker
from reconciler._reconcile.waits import NOT_OURS, Wait, WaitRegistry, Watch
from reconciler._sharding.decisions import rendezvous_shard
from reconciler._sharding.foreign import ForeignWatches, name_scope
from tests.sharding.conftest import item, owners, wait_until
from tests.sharding.test_runtimes import replicas, start_replica

__all__ = ["replicas"]  # the fixture

WAKE_BOUND = 10.0
"""Seconds from the foreign objects' deletion to the children's creation (measured 0.02-0.07 s
on the shared 2-core machine; without the named watch they wait for the next resync, hours
away)."""


def one_per_shard(namespace: str, shards: tuple[str, ...]) -> dict[str, str]:
    """A parent name for each shard (its rendezvous shard), by shard."""
    found: dict[str, str] = {}
    for i in range(100):
        shard = rendezvous_shard(f"{namespace}/p{i}", shards)
        assert shard is not None
        found.setdefault(shard, f"p{i}")
    assert set(found) == set(shards)
    return found


def skipped(client: KubernetesClient, namespace: str, name: str) -> bool:
    """Whether the parent's status says a child was skipped (another owner holds its name)."""
    parent = client.get("shardtest.optk.dev/v1", "Item", name, namespace=namespace)
    return any(c.get("type") == "Reconciled" and c.get("reason") == "ChildrenSkipped"
               for c in (parent.get("status") or {}).get("conditions") or ())


def managed_child(client: KubernetesClient, namespace: str, name: str) -> bool:
    """Whether the operator's ConfigMap ``name`` exists."""
    try:
        child = client.get("v1", "ConfigMap", name, namespace=namespace)
    except NotFoundError:
        return False
    return (child["metadata"].get("labels") or {}).get(MANAGED_BY_LABEL) == "shards"


def held(runtime: OperatorRuntime) -> set[ObjectRef]:
    """What a replica watches by name."""
    assert runtime.foreign is not None
    return runtime.foreign.held


def test_a_parent_whose_child_name_a_foreign_object_holds_gets_it_when_the_object_is_deleted(
    kube_api: Any, kube_namespace: str, shard_client: KubernetesClient,
    replicas: dict[str, OperatorRuntime],
) -> None:
    ns, client = kube_namespace, shard_client
    parents = one_per_shard(ns, ("a", "b"))
    refs = {shard: ObjectRef(api_version="v1", kind="ConfigMap", name=f"{name}-cfg",
                            namespace=ns)
            for shard, name in parents.items()}
    for ref in refs.values():  # someone else's, without the operator's labels
        client.create({"apiVersion": "v1", "kind": "ConfigMap", "data": {"x": "1"},
                       "metadata": {"name": ref.name, "namespace": ns}})
    for shard in ("a", "b"):
        replicas[shard] = start_replica(kube_api, ns, shard, replicas_hint=2)
    for name in parents.values():
        client.create(item(ns, name))
    assert wait_until(lambda: owners(client, ns) == {n: s for s, n in parents.items()}, 20)
    assert wait_until(lambda: all(skipped(client, ns, n) for n in parents.values()), 20)
    # each owner watches exactly its parent's contested object by name, no other replica does
    assert wait_until(lambda: all(held(replicas[s]) == {refs[s]} for s in refs), 5), {
        s: held(r) for s, r in replicas.items()}
    for shard, ref in refs.items():
        informer = replicas[shard].pool.informer(name_scope(ref))
        assert informer is not None
        assert wait_until(lambda i=informer: i.has_synced, 5)
    time.sleep(0.3)  # the skip settled: nothing queued for it any more
    reconciles = {s: sum(r.stats.reconciles.values()) for s, r in replicas.items()}

    started = time.monotonic()
    for ref in refs.values():
        client.delete("v1", "ConfigMap", ref.name, namespace=ns)
    assert wait_until(lambda: all(managed_child(client, ns, r.name) for r in refs.values()),
                      WAKE_BOUND), "the children were not created after the foreign objects went"
    took = time.monotonic() - started
    print(f"children created {took:.3f} s after the foreign objects were deleted")
    # the waits resolved: the named informers are let go (and stopped: nothing else held them)
    assert wait_until(lambda: all(not held(r) for r in replicas.values()), 5)
    for shard, ref in refs.items():
        assert replicas[shard].pool.informer(name_scope(ref)) is None
        assert sum(replicas[shard].stats.reconciles.values()) > reconciles[shard]
    assert wait_until(lambda: not any(skipped(client, ns, n) for n in parents.values()), 10)


def test_named_watches_follow_the_waits_and_catch_what_went_before_their_first_list(
    kube_namespace: str, shard_client: KubernetesClient,
) -> None:
    """``ForeignWatches`` alone, on a pool of the real client: an object gone before its named
    informer listed wakes its parent at the first list; one present and unchanged does not,
    until it is deleted; a resolved wait lets its informer go."""
    ns, client = kube_namespace, shard_client
    pool = InformerPool(client)
    waits = WaitRegistry()
    woken: list[tuple[str, str]] = []
    foreign = ForeignWatches(pool, waits, visible=lambda ref: False,
                             wake=lambda *event: woken.extend(waits.wakes(*event)))
    def wait_on(parent: str, ref: ObjectRef, seen: str | None) -> None:
        watch = Watch(ref=ref, rule=ownership_marker, seen=seen)
        waits.replace((ns, parent), [Wait(ref=ref, reason=NOT_OURS, message=str(ref),
                                          watches=(watch,))])
    try:
        kept = client.create({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "kept", "namespace": ns}})
        kept_ref = ObjectRef.of(kept)
        gone_ref = attrs.evolve(kept_ref, name="gone-early")
        wait_on("p", gone_ref, seen=ownership_marker(kept))  # seen, then deleted
        wait_on("q", kept_ref, seen=ownership_marker(kept))
        assert foreign.held == {gone_ref, kept_ref}
        assert wait_until(lambda: (ns, "p") in woken, 10), woken
        informer = pool.informer(name_scope(kept_ref))
        assert informer is not None
        assert wait_until(lambda: informer.has_synced, 5)
        time.sleep(0.2)
        assert (ns, "q") not in woken
        client.delete("v1", "ConfigMap", "kept", namespace=ns)
        assert wait_until(lambda: (ns, "q") in woken, 10), woken
        waits.replace((ns, "p"), ())
        assert foreign.held == {kept_ref}
        assert pool.informer(name_scope(gone_ref)) is None
        waits.replace((ns, "q"), ())
        assert not foreign.held
        assert pool.informer(name_scope(kept_ref)) is None
    finally:
        foreign.stop()
        pool.stop()
