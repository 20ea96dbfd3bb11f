"""Sharding and the one evaluation of the builders (issue 35, items 2 and 3), on the embedded
server.

The Thanos example's query frontend depends on its query component: its children are written only
once the query Deployment is Available. Each replica builds through the one evaluation of
``reconciler._reconcile.declared`` (the shard label is stamped there), so a sharded operator, with
one replica or two, waits exactly as an unsharded one. Checked from the server's request log: up
to the status patch that makes a parent's query Deployment Available, the replica owning it
created one Deployment (the query's) and no Ingress; the frontend's Deployment and Ingress
follow. (Before, ``stamp_shard`` wrapped each builder in a class that hid its component, and the
frontend was created at once.)

``optk trace`` and ``optk plan`` stamp the parent's shard label as the replicas do
(``reconciler._sharding.decisions.child_labels``): the trace and the plan of a converged parent of
a sharded operator propose nothing (before, every child showed an update removing the label).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from examples.thanos import builders as thanos
from examples.thanos.crds import API_VERSION, KIND, THANOS_CRD
from examples.thanos.operator import make_operator
from reconciler import (
    AlreadyExistsError,
    KubernetesClient,
    LeaderElection,
    NotFoundError,
    ParentSettings,
    Sharding,
)
from reconciler._commands.plans import plan_parents
from reconciler._commands.traces import trace_parent
from reconciler._driver.runtime import OperatorRuntime
from reconciler._reconcile.reconciling import Action
from reconciler._sharding.decisions import child_labels, rendezvous_shard, shard_of
from reconciler.testing import make_available, wait_idle, wait_synced
from tests.sharding import sample
from tests.sharding.conftest import converged, item, wait_until
from tests.sharding.sample import API_VERSION as API_VERSION_ITEMS

LEASE = 2.0
BOUND = 30.0
"""Seconds a wait may take (well under 2 s each on a quiet machine)."""
AGENT = "optk-thanos-shard/"
CREATED_KINDS = {"deployments.apps": "Deployment", "ingresses.networking.k8s.io": "Ingress"}


def _client(kube_api: Any, shard: str) -> KubernetesClient:
    """A replica's client: the Thanos operator's field manager, user agent ``AGENT<shard>`` (the
    request log tells the replicas' writes apart)."""
    client = KubernetesClient(kube_api.api_client(), operator_name=thanos.OPERATOR_NAME)
    client.user_agent = f"{AGENT}{shard}"
    return client


def _start(kube_api: Any, namespace: str, shard: str, replicas: int) -> OperatorRuntime:
    """The Thanos operator in ``namespace``; sharded (short leases) unless ``replicas`` is 0."""
    operator = attrs.evolve(make_operator(), namespace=namespace, install=[])
    if replicas:
        operator = attrs.evolve(
            operator,
            leader_election=LeaderElection(namespace=namespace, lease_duration=LEASE,
                                           renew_deadline=LEASE * 0.7, retry_period=LEASE / 8),
            sharding=Sharding(namespace=namespace, lease_duration=LEASE,
                              renew_deadline=LEASE * 0.7, renew_period=LEASE / 8,
                              drain_timeout=5 * LEASE, replicas_hint=replicas))
    return operator.start(_client(kube_api, shard), identity=shard,
                          environ={"OPTK_SHARD_ID": shard})


@pytest.fixture
def runtimes() -> Iterator[dict[str, OperatorRuntime]]:
    """Started runtimes by shard id, stopped after the test."""
    started: dict[str, OperatorRuntime] = {}
    try:
        yield started
    finally:
        for runtime in started.values():
            runtime.stop(timeout=5.0)


def _live(client: KubernetesClient, api_version: str, kind: str, name: str,
          namespace: str) -> dict[str, Any] | None:
    try:
        return client.get(api_version, kind, name, namespace=namespace)
    except NotFoundError:
        return None


@pytest.mark.parametrize("replicas", [0, 1, 2], ids=["unsharded", "one-replica", "two-replicas"])
def test_the_query_frontend_waits_for_the_query_deployment_sharded_as_unsharded(
    kube_api: Any, kube_namespace: str, runtimes: dict[str, OperatorRuntime], replicas: int,
) -> None:
    ns = kube_namespace
    client = KubernetesClient(kube_api.api_client())
    with contextlib.suppress(AlreadyExistsError):  # installed by an earlier test
        client.create(THANOS_CRD)
    assert wait_until(lambda: client.is_served(API_VERSION, KIND), BOUND)
    shards = ["a", "b"][:max(replicas, 1)]
    for shard in shards:
        runtimes[shard] = _start(kube_api, ns, shard, replicas)
    assert all(wait_synced(runtime, BOUND) for runtime in runtimes.values())
    # one parent per replica (rendezvous hashing of namespace/name, as the assigner decides)
    owned: dict[str, str] = {}
    for index in range(64):
        if len(owned) == len(shards):
            break
        name = f"gated-{index}"
        owned.setdefault(str(rendezvous_shard(f"{ns}/{name}", shards)), name)
    assert sorted(owned) == shards, owned
    kube_api.enable_request_log()
    for name in owned.values():
        client.create({"apiVersion": API_VERSION, "kind": KIND,
                       "metadata": {"name": name, "namespace": ns},
                       "spec": {"query": {}, "queryFrontend": {"ingress": {"host": "q.example"}}}})
    query = {name: f"{name}-{thanos.QUERY.component}" for name in owned.values()}
    frontend = {name: f"{name}-{thanos.QUERY_FRONTEND.component}" for name in owned.values()}

    if replicas:  # each parent is its expected replica's
        assert wait_until(lambda: all(
            shard_of(client.get(API_VERSION, KIND, name, namespace=ns)) == shard
            for shard, name in owned.items()), BOUND)
    assert wait_until(lambda: all(_live(client, "apps/v1", "Deployment", query[name], ns)
                                  for name in owned.values()), BOUND)
    assert all(wait_idle(runtime, BOUND, settle=0.3) for runtime in runtimes.values())
    for name in owned.values():
        for api_version, kind in (("apps/v1", "Deployment"), ("networking.k8s.io/v1", "Ingress")):
            assert _live(client, api_version, kind, frontend[name], ns) is None, (
                f"{kind} {frontend[name]} created before {query[name]} was Available")
        make_available(client, {"apiVersion": "apps/v1", "kind": "Deployment",
                                "metadata": {"name": query[name], "namespace": ns}})
    assert wait_until(lambda: all(
        _live(client, "networking.k8s.io/v1", "Ingress", frontend[name], ns)
        for name in owned.values()), BOUND)

    log = [r for r in kube_api.request_log() if r.namespace == ns and r.code < 400]
    for shard, name in owned.items():
        available = next(i for i, r in enumerate(log) if r.verb == "patch" and r.name == query[name]
                         and r.resource == "deployments.apps/status")
        creates = [(i, CREATED_KINDS[r.resource]) for i, r in enumerate(log)
                   if r.user_agent == f"{AGENT}{shard}" and r.verb == "create"
                   and r.resource in CREATED_KINDS]
        before = sorted(kind for i, kind in creates if i < available)
        after = sorted(kind for i, kind in creates if i > available)
        # the query's Deployment first; the frontend's Deployment and Ingress only once it is
        # Available
        assert (before, after) == (["Deployment"], ["Deployment", "Ingress"]), (name, creates)


def test_the_trace_and_the_plan_of_a_sharded_parent_keep_its_shard_label(
    kube_api: Any, kube_namespace: str, shard_client: KubernetesClient,
) -> None:
    ns, client = kube_namespace, shard_client
    operator = sample.make_operator(namespace=ns, replicas_hint=1)
    runtime = operator.start(sample.replica_client(kube_api.api_client(), "a"), identity="a",
                             environ={"OPTK_SHARD_ID": "a"})
    try:
        client.create(item(ns, "p"))
        assert wait_until(lambda: converged(client, ns, live={"a"}), BOUND)
        assert wait_idle(runtime, BOUND, settle=0.3)
        trace = trace_parent(client, operator, name="p", namespace=ns)
        assert [(c.ref.name, c.next) for c in trace.children] == [("p-cfg", "none")], trace
        [result] = plan_parents(
            client, operator.build, [client.get(API_VERSION_ITEMS, "Item", "p", namespace=ns)],
            operator_name=operator.name,
            parent_settings=ParentSettings(child_labels=child_labels(operator.sharding)))
        assert [(c.ref.name, c.action) for c in result.children] == [
            ("p-cfg", Action.UNCHANGED)], result.children
    finally:
        runtime.stop(timeout=5.0)
