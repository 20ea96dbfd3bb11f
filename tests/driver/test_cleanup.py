"""The cleanup finalizer: children the garbage collector cannot collect (cluster-scoped children
of a namespaced parent) go with their parent, ``on_delete`` runs under the finalizer, and a parent
without such children never gets it. On the embedded server and the real control plane."""

from __future__ import annotations

import contextlib
import copy
import logging
import re
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from builders import ResourceBuilder, child_name, resource_builder
from builders.objects import config_map
from reconciler import (
    AlreadyExistsError,
    KubernetesClient,
    NotFoundError,
    ParentSettings,
    Reporting,
)
from reconciler._base.errors import ReconcilerError
from reconciler._driver.operators import Operator
from reconciler._reconcile.cleanups import CLEANUP_STUCK_AFTER, ParentCleanup
from reconciler._reconcile.finalizing import CLEANUP_FINALIZER
from reconciler._reconcile.parents import ParentReconciler
from reconciler.testing import VirtualClock, wait_idle
from tests.driver.conftest import running, wait_until
from tests.driver.sample_operator import THING_CRD
from tests.driver.sample_operator import build as namespaced_build

RBAC = "rbac.authorization.k8s.io/v1"


API_VERSION = "cleanuptest.optk.dev/v1"
KIND = "Holder"
HOLDER_CRD: dict[str, Any] = copy.deepcopy(THING_CRD)
HOLDER_CRD["metadata"] = {"name": "holders.cleanuptest.optk.dev"}
HOLDER_CRD["spec"].update(group="cleanuptest.optk.dev", names={
    "plural": "holders", "singular": "holder", "kind": KIND, "listKind": "HolderList"})


@pytest.fixture
def kube(kube_api: Any) -> KubernetesClient:
    """A client on this test's server with the Holder CRD (this file's parent kind) served."""
    client = KubernetesClient(kube_api.api_client())
    with contextlib.suppress(AlreadyExistsError):
        client.create(HOLDER_CRD)
    assert wait_until(lambda: client.is_served(API_VERSION, KIND))
    return client


def thing(namespace: str, name: str) -> dict[str, Any]:
    """A Holder parent."""
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": name, "namespace": namespace}, "spec": {"value": "1"}}


def _role_name(parent: Any) -> str:
    meta = parent["metadata"]
    return f"{meta['namespace']}-{meta['name']}-reader"


@resource_builder
def cluster_role(parent: Any) -> dict[str, Any]:
    """A ClusterRole named after the parent's namespace and name."""
    return {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": _role_name(parent)},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}


@resource_builder
def cluster_role_binding(parent: Any) -> dict[str, Any]:
    """Binds the ClusterRole to the namespace's default ServiceAccount."""
    return {"apiVersion": RBAC, "kind": "ClusterRoleBinding",
            "metadata": {"name": _role_name(parent)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": _role_name(parent)},
            "subjects": [{"kind": "ServiceAccount", "name": "default",
                          "namespace": parent["metadata"]["namespace"]}]}


@resource_builder
def settings(parent: Any) -> dict[str, Any]:
    """A namespaced child next to the cluster-scoped ones."""
    return config_map(metadata={"name": child_name(parent["metadata"]["name"], "cfg")},
                      data={"value": "1"})


def build(parent: Any) -> Sequence[ResourceBuilder]:
    """A ConfigMap, a ClusterRole and a ClusterRoleBinding per Holder."""
    return [settings(parent), cluster_role(parent), cluster_role_binding(parent)]


def _operator(ns: str, **options: Any) -> Operator:
    options.setdefault("build", build)
    options.setdefault("reporting", Reporting(events=False))
    return Operator(api_version=API_VERSION, kind=KIND, namespace=ns,
                    name=f"c-{uuid.uuid4().hex[:8]}", **options)


def _exists(client: KubernetesClient, api_version: str, kind: str, name: str,
            namespace: str | None = None) -> bool:
    try:
        client.get(api_version, kind, name, namespace=namespace)
    except NotFoundError:
        return False
    return True


def _cluster_children(client: KubernetesClient, name: str) -> list[bool]:
    return [_exists(client, RBAC, kind, name) for kind in ("ClusterRole", "ClusterRoleBinding")]


@pytest.fixture
def cleanup_parent(kube: KubernetesClient, kube_namespace: str) -> Iterator[dict[str, Any]]:
    """A Holder (created by the test body) whose leftovers are removed afterwards, so that a
    failed test never leaves a namespace stuck behind our finalizer."""
    parent = thing(kube_namespace, "p")
    yield parent
    with contextlib.suppress(NotFoundError):
        kube.patch(API_VERSION, KIND, "p", {"metadata": {"finalizers": None}},
                   patch_type="application/merge-patch+json", namespace=kube_namespace)
    name = _role_name(parent)
    for kind in ("ClusterRole", "ClusterRoleBinding"):
        with contextlib.suppress(NotFoundError):
            kube.delete(RBAC, kind, name)


def _finalizers(client: KubernetesClient, ns: str) -> list[str]:
    return list(client.get(API_VERSION, KIND, "p", namespace=ns)["metadata"]
                .get("finalizers") or ())


@pytest.mark.both_servers
def test_cluster_scoped_children_go_with_their_parent(
    kube: KubernetesClient, kube_namespace: str, cleanup_parent: dict[str, Any]
) -> None:
    ns, name = kube_namespace, _role_name(cleanup_parent)
    with running(_operator(ns), kube):
        kube.create(cleanup_parent)
        assert wait_until(lambda: _cluster_children(kube, name) == [True, True])
        assert _finalizers(kube, ns) == [CLEANUP_FINALIZER]
        kube.delete(API_VERSION, KIND, "p", namespace=ns)
        assert wait_until(lambda: not _exists(kube, API_VERSION, KIND, "p", ns), 20)
        assert _cluster_children(kube, name) == [False, False]


@pytest.mark.both_servers
def test_children_deleted_by_hand_never_keep_the_parent(
    kube: KubernetesClient, kube_namespace: str, cleanup_parent: dict[str, Any]
) -> None:
    ns, name = kube_namespace, _role_name(cleanup_parent)
    with running(_operator(ns), kube):
        kube.create(cleanup_parent)
        assert wait_until(lambda: _cluster_children(kube, name) == [True, True])
    # the operator is stopped: the hand deletions are not repaired
    kube.delete(RBAC, "ClusterRole", name)
    kube.delete(RBAC, "ClusterRoleBinding", name)
    with running(_operator(ns), kube) as runtime:
        # a deletion right away: before a reconcile could create them again, or after it
        kube.delete(API_VERSION, KIND, "p", namespace=ns)
        started = time.monotonic()
        assert wait_until(lambda: not _exists(kube, API_VERSION, KIND, "p", ns), 10)
        assert time.monotonic() - started < 5.0
        assert _cluster_children(kube, name) == [False, False]
        # nothing left retrying (the parent's DELETED event may still be in a worker's hands
        # for a moment), and nothing re-created once the parent is gone
        assert wait_idle(runtime, 10, settle=0.3)
        assert _cluster_children(kube, name) == [False, False]


@pytest.mark.both_servers
def test_an_operator_restarted_during_a_deletion_finishes_the_cleanup(
    kube: KubernetesClient, kube_namespace: str, cleanup_parent: dict[str, Any]
) -> None:
    ns, name = kube_namespace, _role_name(cleanup_parent)
    operator = _operator(ns)
    with running(operator, kube):
        kube.create(cleanup_parent)
        assert wait_until(lambda: _cluster_children(kube, name) == [True, True])
    kube.delete(API_VERSION, KIND, "p", namespace=ns)
    time.sleep(0.3)
    live = kube.get(API_VERSION, KIND, "p", namespace=ns)  # held by the finalizer
    assert live["metadata"].get("deletionTimestamp")
    assert _cluster_children(kube, name) == [True, True]
    with running(operator, kube):
        assert wait_until(lambda: not _exists(kube, API_VERSION, KIND, "p", ns), 20)
        assert _cluster_children(kube, name) == [False, False]


@pytest.mark.both_servers
def test_only_namespaced_children_never_get_the_finalizer(
    kube: KubernetesClient, kube_namespace: str
) -> None:
    ns = kube_namespace
    parent = kube.create(thing(ns, "plain"))
    reconciler = ParentReconciler(
        kube, namespaced_build, operator_name="plain-op", settings=ParentSettings(events=False),
    )
    first = reconciler.reconcile(parent)
    assert first.ok
    # one create of the ConfigMap and one status write: no metadata patch of the parent
    writes = [(c.verb, c.ref.kind) for c in first.api_calls
              if c.verb in ("create", "patch", "update", "delete")]
    assert writes == [("create", "ConfigMap"), ("patch", KIND)]
    live = kube.get(API_VERSION, KIND, "plain", namespace=ns)
    assert not live["metadata"].get("finalizers")
    assert reconciler.reconcile(live).writes == 0
    with_cluster = ParentReconciler(
        kube, build, operator_name="plain-op", settings=ParentSettings(events=False),
    )
    other = kube.create(thing(ns, "other"))
    try:
        result = with_cluster.reconcile(other)
        assert result.ok
        # the finalizer is one more write, made before the cluster-scoped children
        kinds = [(c.verb, c.ref.kind) for c in result.api_calls if c.verb != "list"]
        assert kinds.index(("patch", KIND)) < kinds.index(("create", "ClusterRole"))
        assert _exists(kube, RBAC, "ClusterRole", _role_name(other))
        assert kube.get(API_VERSION, KIND, "other", namespace=ns)["metadata"][
            "finalizers"] == [CLEANUP_FINALIZER]
    finally:
        kube.patch(API_VERSION, KIND, "other", {"metadata": {"finalizers": None}},
                   patch_type="application/merge-patch+json", namespace=ns)
        for kind in ("ClusterRole", "ClusterRoleBinding"):
            kube.delete(RBAC, kind, _role_name(other))


@pytest.mark.both_servers
def test_on_delete_runs_once_under_the_finalizer_retried_with_backoff(
    kube: KubernetesClient, kube_namespace: str, cleanup_parent: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    ns = kube_namespace
    calls: list[float] = []
    lock = threading.Lock()

    def on_delete(parent: Any) -> None:
        with lock:
            calls.append(time.monotonic())
            if len(calls) <= 3:
                raise RuntimeError(f"external store unreachable (attempt {len(calls)})")

    with running(_operator(ns, build=namespaced_build, on_delete=on_delete), kube):
        kube.create(cleanup_parent)
        assert wait_until(lambda: _finalizers(kube, ns) == [CLEANUP_FINALIZER])
        assert not calls
        kube.delete(API_VERSION, KIND, "p", namespace=ns)
        assert wait_until(lambda: len(calls) >= 2)
        live = kube.get(API_VERSION, KIND, "p", namespace=ns)  # waits for the hook
        conditions = {c["type"]: c for c in live.get("status", {}).get("conditions", ())}
        assert conditions["Cleanup"]["status"] == "False"
        assert "external store unreachable" in conditions["Cleanup"]["message"]
        assert wait_until(lambda: not _exists(kube, API_VERSION, KIND, "p", ns), 20)
        time.sleep(0.2)
    assert len(calls) == 4  # three failures, one success, never again
    # The backoff grows: the delays the worker decided (milliseconds apart at first, so the
    # gaps between calls measure the machine's load as much as the backoff).
    delays = [float(match.group(1)) for record in caplog.records
              if (match := re.search(r"cleanup pending .*; retrying in ([0-9.]+)s",
                                     record.getMessage()))]
    assert len(delays) == 3, delays
    assert delays[2] > delays[0], delays


def test_a_waiting_cleanup_is_no_warning_until_it_is_stuck_or_fails(
    kube: KubernetesClient, kube_namespace: str, caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 36: a cleanup that waits (an ordered teardown, children with finalizers) is logged
    at INFO, not WARNING, and not alarming (the retry line is DEBUG); past
    ``CLEANUP_STUCK_AFTER`` since the deletion (virtual time), or failing, it is a WARNING."""
    caplog.set_level(logging.INFO, logger="optk.cleanup")
    ns = kube_namespace
    kube.create({**thing(ns, "w"), "metadata": {"name": "w", "namespace": ns,
                                                "finalizers": ["test.optk.dev/hold"]}})
    try:
        kube.delete(API_VERSION, KIND, "w", namespace=ns)
        parent = kube.get(API_VERSION, KIND, "w", namespace=ns)

        def finalize(at: float, teardown: Any) -> tuple[bool, list[int]]:
            caplog.clear()
            cleanup = ParentCleanup(kube, clock=VirtualClock(start=at))
            cleanup.teardown = teardown
            outcome = cleanup.finalize(parent)
            assert not outcome.done
            return outcome.alarming, [r.levelno for r in caplog.records]

        def waits(parent: Any) -> str:
            return "Deployment web waits until ConfigMap after is gone"

        def fails(parent: Any) -> str:
            raise ReconcilerError("ConfigMap after: delete failed: 500 server error")

        assert finalize(time.time(), waits) == (False, [logging.INFO])
        assert finalize(time.time() + CLEANUP_STUCK_AFTER + 10, waits) == (
            True, [logging.WARNING])
        assert finalize(time.time(), fails) == (True, [logging.WARNING])
        assert "cleanup failed" in caplog.records[0].getMessage()
    finally:
        kube.patch(API_VERSION, KIND, "w", {"metadata": {"finalizers": None}},
                   patch_type="application/merge-patch+json", namespace=ns)
