"""Pausing a running operator, on both servers: nothing written while paused, converged once lifted.

A parent annotated ``optk.dev/paused: "true"`` gets its ``Reconciled=False/ReconcilePaused``
condition (its one write), then takes no write at all while its child is edited and its spec
changes: the server's request accounting (the embedded server's counts, the real API server's
audit log) sees only the test's own writes. Removing the annotation reconciles it at once (a
parent event, not a resync). The operator-wide pause (``OPTK_PAUSED``) and the namespace pause
write nothing at all, not even the condition.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from reconciler import KubernetesClient, ResyncPolicy
from reconciler._reconcile.finalizing import CLEANUP_FINALIZER
from reconciler.testing import wait_idle
from tests.driver.conftest import child_data, make_operator, running, thing, wait_until
from tests.driver.sample_operator import API_VERSION

QUIET = ResyncPolicy(heartbeat=None)  # no heartbeat Lease: every write counted is a parent's
WRITES = ("create", "update", "patch", "delete", "deletecollection")


def server_writes(kube_api: Any) -> int:
    counts = kube_api.request_counts()
    return sum(counts.get(verb, 0) for verb in WRITES)


def merge(client: KubernetesClient, api_version: str, kind: str, name: str, ns: str,
          body: dict[str, Any]) -> None:
    client.patch(api_version, kind, name, body, patch_type="application/merge-patch+json",
                 namespace=ns)


def reconciled(client: KubernetesClient, ns: str, name: str) -> dict[str, Any]:
    parent = client.get(API_VERSION, "Thing", name, namespace=ns)
    return next((c for c in (parent.get("status") or {}).get("conditions") or ()
                 if c["type"] == "Reconciled"), {})


@pytest.mark.both_servers
def test_a_paused_parent_takes_no_write_and_converges_at_once_when_lifted(
        client: KubernetesClient, kube_api: Any, ns: str) -> None:
    with running(make_operator(ns, resync=QUIET), client) as runtime:
        client.create(thing(ns, "a", "1"))
        assert wait_until(lambda: child_data(client, ns, "a") == {"value": "1"})
        generation = client.get(API_VERSION, "Thing", "a", namespace=ns)["metadata"]["generation"]
        merge(client, API_VERSION, "Thing", "a", ns,
              {"metadata": {"annotations": {"optk.dev/paused": "true"}}})
        assert wait_until(lambda: reconciled(client, ns, "a").get("reason") == "ReconcilePaused")
        assert wait_idle(runtime, 10)
        condition = reconciled(client, ns, "a")
        assert condition["status"] == "False"
        assert "optk.dev/paused" in condition["message"]

        before = server_writes(kube_api)
        for kind, name, body in (("ConfigMap", "a-cfg", {"data": {"value": "edited"}}),
                                 ("ConfigMap", "a-cfg", {"data": {"extra": "x"}}),
                                 ("Thing", "a", {"spec": {"value": "2"}})):
            # Each change reaches the operator (it reconciles the parent) and it writes nothing.
            reconciles = sum(runtime.stats.reconciles.values())
            merge(client, "v1" if kind == "ConfigMap" else API_VERSION, kind, name, ns, body)
            assert wait_until(lambda n=reconciles: sum(runtime.stats.reconciles.values()) > n)
        assert wait_idle(runtime, 10)
        time.sleep(0.5)  # room for a late write to show
        assert server_writes(kube_api) - before == 3  # the test's own three
        assert child_data(client, ns, "a") == {"value": "edited", "extra": "x"}
        paused = client.get(API_VERSION, "Thing", "a", namespace=ns)
        assert paused["status"]["observedGeneration"] == generation  # kstatus: not current

        lifted = time.monotonic()
        merge(client, API_VERSION, "Thing", "a", ns,
              {"metadata": {"annotations": {"optk.dev/paused": None}}})
        assert wait_until(lambda: child_data(client, ns, "a") == {"value": "2", "extra": "x"})
        converged = time.monotonic() - lifted
        assert wait_until(lambda: reconciled(client, ns, "a").get("status") == "True")
        # The figure is 1 s; the bound leaves room for a loaded machine (a hang fails).
        assert converged < 5.0, converged
        print(f"converged {converged:.3f} s after unpausing")


@pytest.mark.both_servers
@pytest.mark.parametrize("how", ["operator", "namespace"])
def test_operator_and_namespace_pauses_write_nothing_at_all(
        client: KubernetesClient, kube_api: Any, ns: str, how: str) -> None:
    environ = {"OPTK_PAUSED": "1"} if how == "operator" else {"OPTK_PAUSED_NAMESPACES": ns}
    with running(make_operator(ns, resync=QUIET), client, environ=environ) as runtime:
        before, reconciles = server_writes(kube_api), sum(runtime.stats.reconciles.values())
        client.create(thing(ns, "b", "1"))
        assert wait_until(lambda: sum(runtime.stats.reconciles.values()) > reconciles)
        assert wait_idle(runtime, 10)
        time.sleep(0.5)
        assert server_writes(kube_api) - before == 1  # the test's create alone
        assert child_data(client, ns, "b") is None
        assert "status" not in client.get(API_VERSION, "Thing", "b", namespace=ns)


@pytest.mark.both_servers
def test_a_paused_parent_being_deleted_keeps_its_cleanup_until_lifted(
        client: KubernetesClient, ns: str) -> None:
    calls: list[str] = []
    operator = make_operator(ns, resync=QUIET, on_delete=lambda p: calls.append(
        p["metadata"]["name"]))
    with running(operator, client) as runtime:
        client.create(thing(ns, "e", "1"))  # reconciled: it gets the cleanup finalizer
        assert wait_until(lambda: CLEANUP_FINALIZER in (client.get(
            API_VERSION, "Thing", "e", namespace=ns)["metadata"].get("finalizers") or ()))
        merge(client, API_VERSION, "Thing", "e", ns,
              {"metadata": {"annotations": {"optk.dev/paused": "true"}}})
        assert wait_until(lambda: reconciled(client, ns, "e").get("reason") == "ReconcilePaused")
        client.delete(API_VERSION, "Thing", "e", namespace=ns)
        assert wait_idle(runtime, 10)
        time.sleep(0.5)
        assert calls == []  # the pause holds the cleanup as well
        assert client.get(API_VERSION, "Thing", "e", namespace=ns)["metadata"][
            "deletionTimestamp"]
        merge(client, API_VERSION, "Thing", "e", ns,
              {"metadata": {"annotations": {"optk.dev/paused": None}}})
        assert wait_until(lambda: calls == ["e"])
        assert wait_until(lambda: not client.list(API_VERSION, "Thing", namespace=ns,
                                                  field_selector="metadata.name=e")["items"])
