"""Two Observers in two namespaces build the same cluster-wide Thanos CRD (issue 36, item 2).

One operator (all namespaces, as ``optk run examples.observer.operator:operator`` runs) and two
Observers. By default the CRD belongs to the Observer its ``optk.dev/owner-uid`` label names:
the other skips it and names the holder (``Reconciled`` False, ``ChildrenSkipped``, ``held by
Observer <ns>/obs``). Declared shared (``builders.shared``, ``make_operator(shared_crd=True)``)
both keep it, recorded in its ``optk.dev/shared-by`` annotation. Either way: the CRD's owner
does not change (nor is the CRD written at all) through 12 rounds of resyncs of both parents
with spec changes (the resyncs a 5 s interval makes in 60 s, forced with ``resync_all`` rather
than waited for); deleting either Observer completes within 10 s (before, the holder's cleanup
deleted the CRD, the other re-created it, and the cleanup retried with backoff for minutes);
the other keeps its ``Thanos``; the CRD goes with the last Observer. Both servers, one
operator and two namespaces per test."""

from __future__ import annotations

import contextlib
import copy
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from examples.observer.crds import API_VERSION, KIND
from examples.observer.operator import PRUNE, make_operator
from examples.thanos.crds import API_VERSION as THANOS_API_VERSION
from reconciler import KubernetesClient, NotFoundError, OperatorRuntime
from reconciler.testing import make_available, wait_idle, wait_synced
from tests.driver.conftest import wait_until
from tests.examples.test_observer import (  # noqa: F401  (the fixture)
    CRD_NAME,
    THANOS_SPEC,
    _condition,
    _exists,
    _observer,
    kube,
)

pytestmark = [pytest.mark.needs_controller_manager, pytest.mark.both_servers]

CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
ROUNDS = 12


@pytest.fixture
def client(kube: KubernetesClient) -> KubernetesClient:  # noqa: F811
    """The ``kube`` client of ``test_observer`` (no Thanos CRD before or after the test)."""
    return kube


@pytest.fixture
def second_namespace(kube_api: Any) -> Iterator[str]:
    """Another fresh namespace, deleted after the test."""
    name = f"test-{uuid.uuid4().hex[:10]}"
    with kube_api.api_client() as client:
        core = kubernetes.client.CoreV1Api(client)
        core.create_namespace(kubernetes.client.V1Namespace(
            metadata=kubernetes.client.V1ObjectMeta(name=name)))
        yield name
        with contextlib.suppress(kubernetes.client.ApiException):
            core.delete_namespace(name)


def _crd(client: KubernetesClient) -> dict[str, Any]:
    return client.get(*CRD, CRD_NAME)


def _uid(client: KubernetesClient, ns: str) -> str:
    return str(client.get(API_VERSION, KIND, "obs", namespace=ns)["metadata"]["uid"])


def _holder(crd: dict[str, Any]) -> str | None:
    return (crd["metadata"].get("labels") or {}).get("optk.dev/owner-uid")


def _record(crd: dict[str, Any]) -> set[str]:
    raw = (crd["metadata"].get("annotations") or {}).get("optk.dev/shared-by")
    return set(json.loads(raw)) if raw else set()


def _reconciled(client: KubernetesClient, ns: str) -> dict[str, Any]:
    return _condition(client, ns, "Reconciled")


def _install_both(client: KubernetesClient, runtime: OperatorRuntime, namespaces: list[str]
                  ) -> dict[str, str]:
    """Both Observers installed and converged; their uids by namespace."""
    for ns in namespaces:
        client.create(_observer(ns, {"spec": copy.deepcopy(THANOS_SPEC)}))
    for ns in namespaces:
        assert wait_until(lambda ns=ns: _exists(client, "apps/v1", "Deployment",
                                                "obs-thanos-operator", ns), 60)
        make_available(client, {"apiVersion": "apps/v1", "kind": "Deployment",
                              "metadata": {"name": "obs-thanos-operator", "namespace": ns}})
    for ns in namespaces:
        assert wait_until(lambda ns=ns: _exists(client, THANOS_API_VERSION, "Thanos", "obs", ns),
                          60)
    assert wait_idle(runtime, 30)
    return {ns: _uid(client, ns) for ns in namespaces}


def _rounds(client: KubernetesClient, runtime: OperatorRuntime, namespaces: list[str]) -> None:
    """Resyncs of both parents with spec changes: the CRD is never written."""
    before = _crd(client)
    for round_ in range(ROUNDS):
        if round_ % 3 == 1:  # a spec change of one of them (its Thanos is updated)
            ns = namespaces[round_ % 2]
            client.patch(API_VERSION, KIND, "obs",
                       {"spec": {"thanos": {"spec": {"query": {"replicas": 2 + round_}}}}},
                       patch_type="application/merge-patch+json", namespace=ns)
        reconciles = runtime.stats.total
        assert runtime.resync_all() >= 2
        assert wait_until(lambda r=reconciles: runtime.stats.total >= r + 2, 30)
        assert wait_idle(runtime, 30)
        crd = _crd(client)
        assert _holder(crd) == _holder(before), f"round {round_}: the owner changed"
        assert crd["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], \
            f"round {round_}: the CRD was written"


def _delete_within(client: KubernetesClient, ns: str, seconds: float) -> float:
    started = time.monotonic()
    client.delete(API_VERSION, KIND, "obs", namespace=ns)
    assert wait_until(lambda: not _exists(client, API_VERSION, KIND, "obs", ns), seconds), \
        _condition(client, ns, "Cleanup")
    return time.monotonic() - started


@contextlib.contextmanager
def _operator(client: KubernetesClient, *, shared_crd: bool) -> Iterator[OperatorRuntime]:
    name = f"observer-{uuid.uuid4().hex[:6]}"
    runtime = make_operator(name=name, shared_crd=shared_crd, events=False).start(client)
    try:
        assert wait_synced(runtime, 20)
        yield runtime
    finally:
        runtime.stop(5)
        for item in client.list(API_VERSION, KIND)["items"]:
            meta = item["metadata"]
            with contextlib.suppress(NotFoundError):
                client.patch(API_VERSION, KIND, meta["name"], {"metadata": {"finalizers": None}},
                           patch_type="application/merge-patch+json",
                           namespace=meta["namespace"])
        for api_version, kind in PRUNE[1:3]:
            for item in client.list(api_version, kind, label_selector=(
                    f"app.kubernetes.io/managed-by={name}"))["items"]:
                client.delete(api_version, kind, item["metadata"]["name"])


def test_the_crd_belongs_to_one_observer_and_either_deletion_completes(
    client: KubernetesClient, kube_namespace: str, second_namespace: str,
) -> None:
    namespaces = [kube_namespace, second_namespace]
    with _operator(client, shared_crd=False) as runtime:
        uids = _install_both(client, runtime, namespaces)
        holder = next(ns for ns in namespaces if uids[ns] == _holder(_crd(client)))
        other = next(ns for ns in namespaces if ns != holder)
        skipped = _reconciled(client, other)
        assert skipped.get("reason") == "ChildrenSkipped", skipped
        assert f"held by Observer {holder}/obs (uid {uids[holder]})" in skipped["message"]
        assert _reconciled(client, holder).get("status") == "True", _reconciled(client, holder)

        _rounds(client, runtime, namespaces)

        # the holder goes: its cleanup releases the CRD (the other's Thanos is in it)
        _delete_within(client, holder, 10)
        assert _exists(client, THANOS_API_VERSION, "Thanos", "obs", other)
        # the other, woken by the CRD's change, takes it over
        assert wait_until(lambda: _holder(_crd(client)) == uids[other], 20), (
            _crd(client)["metadata"].get("labels"), _reconciled(client, other))
        assert wait_until(lambda: _reconciled(client, other).get("status") == "True", 20), \
            _reconciled(client, other)
        assert _exists(client, THANOS_API_VERSION, "Thanos", "obs", other)

        _delete_within(client, other, 10)
        assert wait_until(lambda: not _exists(client, *CRD, CRD_NAME), 20)


def test_a_shared_crd_is_kept_while_an_observer_builds_it(
    client: KubernetesClient, kube_namespace: str, second_namespace: str,
) -> None:
    namespaces = [kube_namespace, second_namespace]
    with _operator(client, shared_crd=True) as runtime:
        uids = _install_both(client, runtime, namespaces)
        crd = _crd(client)
        assert _record(crd) == set(uids.values())
        assert _holder(crd) is None
        assert crd["metadata"]["labels"]["optk.dev/shared"] == "true"
        for ns in namespaces:
            assert wait_until(lambda ns=ns: _reconciled(client, ns).get("status") == "True",
                              20), _reconciled(client, ns)

        _rounds(client, runtime, namespaces)

        first, last = namespaces
        _delete_within(client, first, 10)
        assert _record(_crd(client)) == {uids[last]}
        assert _exists(client, THANOS_API_VERSION, "Thanos", "obs", last)
        assert wait_idle(runtime, 30)
        assert _reconciled(client, last).get("status") == "True", _reconciled(client, last)

        _delete_within(client, last, 10)
        assert wait_until(lambda: not _exists(client, *CRD, CRD_NAME), 20)
