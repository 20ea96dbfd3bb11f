"""A parent whose CRD prunes the toolkit's status fields is not rewritten at rest
(``reconciler._reconcile.memo.StatusMemo``).

client-go's ``sample-controller`` Foo keeps only ``status.availableReplicas``: the server drops
``conditions``, ``observedGeneration`` and ``lastReconcileTime`` from every status write, so the
status always looks out of date. Without the memo every resync wrote it again (100 Foos, a 30 s
resync: 400 status writes in two minutes at rest); with it a reconcile of the parent at the
version our write returned writes nothing, and any change to the parent writes once more.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from builders import DesiredState
from reconciler import KubernetesClient, ParentReconciler
from reconciler._reconcile.memo import StatusMemo
from tests.reconciler.conftest import Requests, wait_for
from tests.reconciler.test_parents import builders_of, cm

GROUP = "statusmemo.optk.dev"


def _pruning_crd(client: KubernetesClient) -> str:
    """A Foo-like CRD: its status schema keeps ``availableReplicas`` only."""
    client.create({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"prunes.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"kind": "Prune", "plural": "prunes"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                   "spec": {"type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True},
                                   "status": {"type": "object", "properties": {
                                       "availableReplicas": {"type": "integer"}}}}}}}]},
    })
    wait_for(lambda: client.is_served(f"{GROUP}/v1", "Prune"))
    return f"{GROUP}/v1"


def _status(parent: Mapping[str, Any], children: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"availableReplicas": len(children)}




@pytest.mark.both_servers
def test_a_status_the_server_prunes_is_written_once_per_parent_version(
    client: KubernetesClient, ns: str, requests: Callable[[], Requests]
) -> None:
    api_version = f"{GROUP}/v1"
    if not client.is_served(api_version, "Prune"):
        _pruning_crd(client)
    parent = client.create({"apiVersion": api_version, "kind": "Prune",
                            "metadata": {"name": "p", "namespace": ns}, "spec": {"n": 1}})
    pr = ParentReconciler(client, lambda p: builders_of((cm("pruned-child"),
                                                        DesiredState.PRESENT)),
                          operator_name="memo-operator", events=False, status=_status)
    pr.reconcile(parent)
    live = client.get(api_version, "Prune", "p", namespace=ns)
    assert live["status"] == {"availableReplicas": 1}  # the toolkit's fields were pruned
    for _ in range(3):  # resyncs of the parent as the cache holds it: nothing written
        with requests() as r:
            pr.reconcile(live)
        assert r.writes == 0, r.delta
        live = client.get(api_version, "Prune", "p", namespace=ns)

    changed = client.patch(api_version, "Prune", "p", {"spec": {"n": 2}},
                           patch_type="application/merge-patch+json", namespace=ns)
    with requests() as r:
        pr.reconcile(changed)  # a new version of the parent: its status is written again
    assert r.count("patch") == 1, r.delta
    again = client.get(api_version, "Prune", "p", namespace=ns)
    with requests() as r:
        pr.reconcile(again)
    assert r.writes == 0, r.delta


def test_the_memo_ignores_times_and_needs_the_same_version_and_status() -> None:
    memo = StatusMemo(size=2)
    patch = {"status": {"x": 1, "lastReconcileTime": "t1",
                        "conditions": [{"type": "Ready", "status": "True",
                                        "lastTransitionTime": "t1"}]}}
    later = {"status": {"x": 1, "lastReconcileTime": "t2",
                        "conditions": [{"type": "Ready", "status": "True",
                                        "lastTransitionTime": "t2"}]}}
    written = {"metadata": {"uid": "u", "resourceVersion": "7"}, "status": {"x": 1}}
    assert not memo.taken(written, patch)
    memo.remember(written, patch)
    assert memo.taken(written, later)
    assert not memo.taken({"metadata": {"uid": "u", "resourceVersion": "8"}}, later)
    assert not memo.taken(written, {"status": {**later["status"], "x": 2}})
    flipped = {"status": {**later["status"], "conditions": [{"type": "Ready", "status": "False"}]}}
    assert not memo.taken(written, flipped)
    assert not memo.taken({"metadata": {"uid": "u"}}, patch)  # no version: never taken
