"""A parent whose CRD prunes the toolkit's status fields is not rewritten at rest
(``reconciler._reconcile.memo.StatusMemo``).

client-go's ``sample-controller`` Foo keeps only ``status.availableReplicas``: the server drops
``conditions``, ``observedGeneration`` and ``lastReconcileTime`` from every status write, so the
status always looks out of date. Without the memo every resync wrote it again (100 Foos, a 30 s
resync: 400 status writes in two minutes at rest, and one more per spec change); with it the
status is written when a field the server keeps changes, or someone else changed the status.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from builders import DesiredState
from reconciler import KubernetesClient, ParentReconciler, ParentSettings
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


@pytest.mark.both_servers
def test_a_status_the_server_prunes_is_written_only_when_what_it_keeps_changes(
    client: KubernetesClient, ns: str, requests: Callable[[], Requests]
) -> None:
    api_version = f"{GROUP}/v1"
    if not client.is_served(api_version, "Prune"):
        _pruning_crd(client)
    parent = client.create({"apiVersion": api_version, "kind": "Prune",
                            "metadata": {"name": "p", "namespace": ns}, "spec": {"n": 1}})
    available = {"replicas": 1}
    pr = ParentReconciler(
        client,
        lambda p: builders_of((cm("pruned-child"),
                                                        DesiredState.PRESENT)),
        operator_name="memo-operator",
        settings=ParentSettings(
            events=False, status=lambda p, c: {"availableReplicas": available["replicas"]}),
    )
    pr.reconcile(parent)
    live = client.get(api_version, "Prune", "p", namespace=ns)
    assert live["status"] == {"availableReplicas": 1}  # the toolkit's fields were pruned
    for _ in range(3):  # resyncs of the parent as the cache holds it: nothing written
        with requests() as r:
            pr.reconcile(live)
        assert r.writes == 0, r.delta
        live = client.get(api_version, "Prune", "p", namespace=ns)

    # A spec change moves observedGeneration, which the server drops: still nothing written.
    changed = client.patch(api_version, "Prune", "p", {"spec": {"n": 2}},
                           patch_type="application/merge-patch+json", namespace=ns)
    with requests() as r:
        pr.reconcile(changed)
    assert r.writes == 0, r.delta

    # A field the server keeps changes: written once, then quiet again.
    available["replicas"] = 3
    with requests() as r:
        pr.reconcile(changed)
    assert r.count("patch") == 1, r.delta
    live = client.get(api_version, "Prune", "p", namespace=ns)
    assert live["status"] == {"availableReplicas": 3}
    with requests() as r:
        pr.reconcile(live)
    assert r.writes == 0, r.delta

    # Someone else writes the status: ours is written again.
    client.patch(api_version, "Prune", "p", {"status": {"availableReplicas": 9}},
                 patch_type="application/merge-patch+json", namespace=ns, subresource="status")
    with requests() as r:
        pr.reconcile(client.get(api_version, "Prune", "p", namespace=ns))
    assert r.count("patch") == 1, r.delta
    assert client.get(api_version, "Prune", "p", namespace=ns)["status"] == {
        "availableReplicas": 3}


def _patch(**status: Any) -> dict[str, Any]:
    return {"status": {"lastReconcileTime": "t", "observedGeneration": 1,
                       "conditions": [{"type": "Ready", "status": "True",
                                       "lastTransitionTime": "t"}], **status}}


def test_the_memo_skips_only_what_the_server_dropped_or_kept_unchanged() -> None:
    memo = StatusMemo(size=2)
    parent = {"metadata": {"uid": "u", "resourceVersion": "7"}, "status": {"x": 1}}
    assert not memo.taken(parent, _patch(x=1))  # nothing written yet
    memo.remember(parent, _patch(x=1))  # the server kept x only
    later = _patch(x=1)
    later["status"].update(lastReconcileTime="t2", observedGeneration=2)
    assert memo.taken(parent, later)  # dropped fields and an unchanged kept one
    assert not memo.taken(parent, _patch(x=2))  # a kept field changes
    assert not memo.taken(parent, _patch(x=1, y=1))  # a field never sent: may be kept
    assert not memo.taken({**parent, "status": {"x": 5}}, _patch(x=1))  # status moved
    assert not memo.taken({"metadata": {"uid": "other"}, "status": {"x": 1}}, _patch(x=1))

    keeps_all = {"metadata": {"uid": "k"}, "status": _patch(x=1)["status"]}
    memo.remember(keeps_all, _patch(x=1))  # a schema that keeps every field
    assert not memo.taken(keeps_all, later)  # lastReconcileTime, observedGeneration differ
    times_only = _patch(x=1)
    times_only["status"]["conditions"][0]["lastTransitionTime"] = "t3"
    assert memo.taken(keeps_all, times_only)
    flipped = _patch(x=1)
    flipped["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    assert not memo.taken(keeps_all, flipped)
