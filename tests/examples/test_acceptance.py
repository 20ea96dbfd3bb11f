"""Issue 10's acceptance points for the example operator, on both servers (``both_servers``).

On the real control plane (``reconciler.envtest.ControlPlane``) the requests are counted from the
API server's audit log (``request_counts()``), and the children are collected by the real garbage
collector: the Thanos operator converges; a steady-state resync of every parent makes no write
and no GET or LIST; drift (a deleted Service, a hand-scaled Deployment, a removed label) is
repaired; deleting a parent lets the garbage collector remove its children, ServiceMonitors (custom
resources) included. Each wait is bounded; the real server's first write to a new CRD's kind comes
about 2 s after the CRD, so the bounds are seconds, not milliseconds.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
import yaml

from builders import Inputs, run_builders
from builders.names import INSTANCE_LABEL, MANAGED_BY_LABEL
from examples.thanos import builders as thanos
from examples.thanos.crds import API_VERSION, KIND, SERVICE_MONITOR_CRD, THANOS_CRD
from examples.thanos.demo import CHILD_KINDS, SAMPLES_FILE, WRITE_VERBS, kubelet
from examples.thanos.operator import make_operator
from objectmatcher import MERGE_PATCH, calculate_patch
from reconciler import AlreadyExistsError, KubernetesClient, NotFoundError, OperatorRuntime
from reconciler._cache.inputs import client_reader, resolve_inputs
from reconciler.envtest import ControlPlane
from reconciler.testing import wait_idle, wait_synced

BOUND = 30.0
"""Seconds any one convergence may take (it takes well under 2 s on either server)."""

_GC_RESTARTED: set[int] = set()
"""Control planes whose garbage collector was restarted after the CRDs were installed."""


def eventually(check: Callable[[], tuple[bool, str]], *, bound: float = BOUND) -> str:
    """Poll ``check`` until it passes; fails with its last detail after ``bound`` seconds."""
    deadline = time.monotonic() + bound
    ok, detail = check()
    while not ok:
        assert time.monotonic() < deadline, f"not within {bound} s: {detail}"
        time.sleep(0.02)
        ok, detail = check()
    return detail


class Thanos:
    """The operator running in a test's namespace, and what the test reads of the cluster."""

    def __init__(self, client: KubernetesClient, runtime: OperatorRuntime, namespace: str) -> None:
        self.client, self.runtime, self.namespace = client, runtime, namespace

    def live(self, api_version: str, kind: str, name: str) -> dict[str, Any] | None:
        try:
            return self.client.get(api_version, kind, name, namespace=self.namespace)
        except NotFoundError:
            return None

    def apply_samples(self) -> list[str]:
        """The samples in the test's namespace, each with the object-storage Secret it names."""
        return apply_samples(self.client, self.namespace)

    def inputs_of(self, parent: dict[str, Any]) -> Inputs:
        """The parent's declared inputs as the cluster holds them now (one GET each)."""
        return resolve_inputs(thanos.declared_inputs(parent), client_reader(self.client))

    def converged(self, name: str) -> Callable[[], tuple[bool, str]]:
        """Every child built for the live parent is on the server exactly as built (with
        ServiceMonitors: their CRD is installed), and the parent is Ready; as no kubelet runs,
        each check makes the parent's workloads available first (``demo.kubelet``)."""

        def check() -> tuple[bool, str]:
            parent = self.live(API_VERSION, KIND, name)
            if parent is None:
                return False, f"{name} not found"
            kubelet(self.client, name, namespace=self.namespace)  # the query frontend waits
            pending = []
            for desired, state in run_builders(
                    thanos.build_with_inputs(parent, self.inputs_of(parent)), parent=parent):
                live = self.live(desired["apiVersion"], desired["kind"],
                                 desired["metadata"]["name"])
                label = f"{desired['kind']} {desired['metadata']['name']}"
                if state.is_absent:
                    if live is not None and not live["metadata"].get("deletionTimestamp"):
                        pending.append(f"{label} still exists")
                elif live is None:
                    pending.append(f"{label} missing")
                elif not calculate_patch(live, desired).is_empty:
                    pending.append(f"{label} differs")
            conditions = (parent.get("status") or {}).get("conditions") or ()
            if not any(c.get("type") == "Ready" and c.get("status") == "True"
                       and c.get("observedGeneration") == parent["metadata"].get("generation")
                       for c in conditions):
                pending.append(f"{name} not Ready")
            return not pending, "; ".join(pending) or f"{name} converged"

        return check

    def children(self, name: str) -> list[str]:
        selector = f"{INSTANCE_LABEL}={name},{MANAGED_BY_LABEL}={thanos.OPERATOR_NAME}"
        return [f"{item['kind']} {item['metadata']['name']}"
                for api_version, kind in CHILD_KINDS
                for item in self.client.list(api_version, kind, namespace=self.namespace,
                                             label_selector=selector).get("items", [])]

    def resync_every_parent(self) -> int:
        """Force a resync of every parent and wait until it ran; how many parents."""
        before = self.runtime.stats.total
        queued = self.runtime.resync_all()
        eventually(lambda: (self.runtime.stats.total >= before + queued
                            and wait_idle(self.runtime, 0.5, settle=0.2), "resync"))
        return queued


def apply_samples(client: KubernetesClient, namespace: str) -> list[str]:
    """Create the samples in ``namespace``, and first the object-storage Secret each names (the
    store gateway's declared input); their names."""
    names = []
    for sample in yaml.safe_load_all(SAMPLES_FILE.read_text()):
        if sample:
            parent = copy.deepcopy(sample)
            parent["metadata"]["namespace"] = namespace
            secret = thanos.object_storage(parent)
            if secret is not None:
                with contextlib.suppress(AlreadyExistsError):
                    client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {
                        "name": secret.name, "namespace": namespace},
                        "stringData": {"objstore.yml": "type: FILESYSTEM"}})
            client.create(parent)
            names.append(parent["metadata"]["name"])
    return names


def install_crds(kube_api: Any) -> KubernetesClient:
    """A client of ``kube_api``, once both CRDs of the example are installed and served."""
    client = KubernetesClient(kube_api.api_client())
    for crd in (THANOS_CRD, SERVICE_MONITOR_CRD):
        with contextlib.suppress(AlreadyExistsError):  # installed by an earlier test
            client.create(crd)
    eventually(lambda: (client.is_served(API_VERSION, KIND)
                        and client.is_served("monitoring.coreos.com/v1", "ServiceMonitor"),
                        "CRDs served"))
    return client


@pytest.fixture
def operator(kube_api: Any, kube_namespace: str) -> Iterator[Thanos]:
    """The Thanos operator with both CRDs installed, on ``kube_api``."""
    client = install_crds(kube_api)
    if isinstance(kube_api, ControlPlane) and id(kube_api) not in _GC_RESTARTED:
        # the garbage collector learns CRD kinds at start (else on a ~30 s rescan)
        kube_api.restart_controller_manager()
        _GC_RESTARTED.add(id(kube_api))
    # scoped to the test's namespace: earlier tests' namespaces may still be torn down
    runtime = attrs.evolve(make_operator(), namespace=kube_namespace,
                           install=[]).start(client)
    try:
        assert wait_synced(runtime, BOUND)
        yield Thanos(client, runtime, kube_namespace)
    finally:
        runtime.stop(timeout=5.0)


@pytest.mark.both_servers
def test_the_example_operator_converges(operator: Thanos) -> None:
    for name in operator.apply_samples():
        eventually(operator.converged(name))
    assert len(operator.children("observatory")) == 14  # 10 + a ServiceMonitor per component


@pytest.mark.both_servers
def test_a_steady_state_resync_makes_no_write_and_no_read(
    operator: Thanos, kube_api: Any
) -> None:
    names = operator.apply_samples()
    for name in names:
        eventually(operator.converged(name))
    assert wait_idle(operator.runtime, BOUND, settle=0.3)
    # The first comparison of a custom kind (ServiceMonitor) lists the CRDs once to learn its
    # schema; that cache is warm after one resync, so the steady state is the second.
    operator.resync_every_parent()
    beats = operator.runtime.stats.heartbeats
    before = kube_api.request_counts()
    assert operator.resync_every_parent() == len(names)
    after = kube_api.request_counts()
    spent = {verb: after.get(verb, 0) - before.get(verb, 0) for verb in after}
    # a heartbeat beat (one PUT of its Lease a minute) may fall in the window: a sign of life,
    # not a write of the resync
    beats = operator.runtime.stats.heartbeats - beats
    assert sum(spent.get(verb, 0) for verb in WRITE_VERBS) - beats == 0, spent
    assert spent.get("get", 0) == 0, spent
    assert spent.get("list", 0) == 0, spent


@pytest.mark.both_servers
def test_drift_is_repaired(operator: Thanos) -> None:
    operator.apply_samples()
    eventually(operator.converged("observatory"))
    service = operator.live("v1", "Service", "observatory-query")
    assert service is not None
    operator.client.delete("v1", "Service", "observatory-query", namespace=operator.namespace)

    def recreated() -> tuple[bool, str]:
        now = operator.live("v1", "Service", "observatory-query")
        return (now is not None and now["metadata"]["uid"] != service["metadata"]["uid"],
                "Service observatory-query recreated")

    eventually(recreated)
    eventually(operator.converged("observatory"))
    operator.client.patch("apps/v1", "Deployment", "observatory-query",
                          {"spec": {"replicas": 5}}, patch_type=MERGE_PATCH,
                          namespace=operator.namespace)
    eventually(lambda: ((operator.live("apps/v1", "Deployment", "observatory-query") or {})
                        .get("spec", {}).get("replicas") == 2, "scaled back to 2"))
    operator.client.patch("apps/v1", "StatefulSet", "observatory-store-gateway",
                          {"metadata": {"labels": {"app.kubernetes.io/component": None}}},
                          patch_type=MERGE_PATCH, namespace=operator.namespace)
    eventually(lambda: ("app.kubernetes.io/component" in (
        (operator.live("apps/v1", "StatefulSet", "observatory-store-gateway") or {})
        .get("metadata", {}).get("labels") or {}), "label restored"))
    eventually(operator.converged("observatory"))


@pytest.mark.needs_controller_manager
@pytest.mark.both_servers
def test_a_deleted_parents_children_are_garbage_collected(operator: Thanos) -> None:
    operator.apply_samples()
    for name in ("observatory", "edge"):
        eventually(operator.converged(name))
    operator.runtime.stop(timeout=5.0)  # the garbage collector alone removes them
    operator.client.delete(API_VERSION, KIND, "observatory", namespace=operator.namespace)
    eventually(lambda: (not operator.children("observatory"),
                        f"left: {operator.children('observatory')}"))
    assert len(operator.children("edge")) == 3  # Deployment, Service, ServiceMonitor


def _ready_condition(parent: dict[str, Any] | None) -> dict[str, Any]:
    return next((c for c in ((parent or {}).get("status") or {}).get("conditions") or ()
                 if c.get("type") == "Ready"), {})


@pytest.mark.both_servers
def test_the_query_frontend_waits_for_the_query_deployment_to_be_available(
    operator: Thanos,
) -> None:
    """Issue 24: no query-frontend child exists while the query Deployment is not Available,
    the parent's Ready condition names the wait, and the frontend follows once it is (made
    Available by status patches, as a kubelet would: none runs)."""
    name, client, ns = "gated", operator.client, operator.namespace
    client.create({"apiVersion": API_VERSION, "kind": KIND,
                   "metadata": {"name": name, "namespace": ns},
                   "spec": {"query": {}, "queryFrontend": {"ingress": {"host": "q.example"}}}})
    frontend = f"{name}-{thanos.QUERY_FRONTEND.component}"
    query = f"{name}-{thanos.QUERY.component}"

    def waiting() -> tuple[bool, str]:
        ready = _ready_condition(operator.live(API_VERSION, KIND, name))
        message = str(ready.get("message", ""))
        return (ready.get("status") == "False" and ready.get("reason") == "DependencyNotReady"
                and f"Deployment {ns}/{query}" in message, f"Ready is {ready}")

    eventually(waiting)
    assert wait_idle(operator.runtime, BOUND, settle=0.3)
    ready = _ready_condition(operator.live(API_VERSION, KIND, name))
    assert f"Deployment {ns}/{frontend}" in ready["message"], ready
    assert "waits for component 'query'" in ready["message"], ready
    assert operator.live("apps/v1", "Deployment", query) is not None
    for api_version, kind in (("apps/v1", "Deployment"), ("v1", "Service"),
                              ("networking.k8s.io/v1", "Ingress")):
        assert operator.live(api_version, kind, frontend) is None, f"{kind} {frontend} created"
    eventually(operator.converged(name))  # each check makes the workloads available
    assert _ready_condition(operator.live(API_VERSION, KIND, name))["status"] == "True"


@pytest.mark.both_servers
def test_a_rotated_object_storage_secret_rolls_the_store_gateway_once(operator: Thanos) -> None:
    operator.apply_samples()
    eventually(operator.converged("observatory"))
    assert wait_idle(operator.runtime, BOUND, settle=0.3)
    store = operator.live("apps/v1", "StatefulSet", "observatory-store-gateway")
    assert store is not None
    generation = store["metadata"]["generation"]
    operator.client.patch("v1", "Secret", "thanos-objstore",
                          {"stringData": {"objstore.yml": "type: S3"}},
                          patch_type=MERGE_PATCH, namespace=operator.namespace)
    eventually(operator.converged("observatory"))  # the digest of the new contents
    assert wait_idle(operator.runtime, BOUND, settle=0.3)
    rolled = operator.live("apps/v1", "StatefulSet", "observatory-store-gateway") or {}
    assert rolled["metadata"]["generation"] == generation + 1  # one new pod template
    # The Secret gone: InputMissing naming it, the other children stay converged.
    operator.client.delete("v1", "Secret", "thanos-objstore", namespace=operator.namespace)

    def missing() -> tuple[bool, str]:
        parent = operator.live(API_VERSION, KIND, "observatory") or {}
        reconciled = next((c for c in (parent.get("status") or {}).get("conditions") or ()
                           if c.get("type") == "Reconciled"), {})
        return (reconciled.get("reason") == "InputMissing"
                and "thanos-objstore" in reconciled.get("message", ""), str(reconciled))

    eventually(missing)
    assert operator.live("apps/v1", "Deployment", "observatory-query") is not None
