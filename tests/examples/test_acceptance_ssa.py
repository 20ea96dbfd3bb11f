"""Issue 27's acceptance points: the Thanos operator with ``ServerSideApply()``, on both servers.

One test walks them in order on one converged operator (a convergence costs seconds on the real
control plane): it converges; a 60 s steady state (on the real control plane, counted from its
audit log; a few seconds on the embedded server, whose counts are the same code's) and a forced
resync make no request; a hand edit of a field we own is repaired by one apply (one more
``generation`` of the Deployment, and the field back); a field another apply manager took is
reported (the parent's ``Ready`` condition and a ``FieldConflict`` Warning Event name it and
the manager) and not written; a field
removed from the builders is removed from the live object.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest

from builders import Inputs, ResourceBuilder, run_builders
from examples.thanos import builders as thanos
from examples.thanos.crds import API_VERSION, KIND
from examples.thanos.demo import kubelet
from examples.thanos.operator import make_operator
from objectmatcher import LAST_APPLIED_ANNOTATION, MERGE_PATCH, calculate_patch
from reconciler import Applying, KubernetesClient, ServerSideApply
from reconciler.envtest import ControlPlane
from reconciler.testing import wait_idle, wait_synced
from tests.examples.test_acceptance import BOUND, Thanos, eventually, install_crds

APPLY = "application/apply-patch+yaml"
DROPPED_LABEL = "optk.dev/acceptance"
STEADY_REAL = 60.0
STEADY_EMBEDDED = 3.0


class _Builds:
    """The Thanos builders, with one label on every child that the test can drop."""

    def __init__(self) -> None:
        self.drop = False

    def build(self, parent: Any, inputs: Inputs) -> list[ResourceBuilder]:
        return [self._labelled(b) for b in thanos.build_with_inputs(parent, inputs)]

    def _labelled(self, builder: ResourceBuilder) -> ResourceBuilder:
        def build() -> tuple[Any, Any]:
            obj, state = builder()
            if not self.drop:
                meta = dict(obj["metadata"])
                meta["labels"] = {**(meta.get("labels") or {}), DROPPED_LABEL: "yes"}
                obj = {**obj, "metadata": meta}
            return obj, state
        return build


def _drifted(live: dict[str, Any], desired: dict[str, Any]) -> bool:
    patch = calculate_patch(live, desired).patch
    annotations = {k: v for k, v in ((patch.get("metadata") or {}).get("annotations")
                                     or {}).items() if k != LAST_APPLIED_ANNOTATION}
    meta = {k: v for k, v in (patch.get("metadata") or {}).items() if k != "annotations"}
    return bool(annotations or meta or {k for k in patch if k != "metadata"})


def _converged(operator: Thanos, builds: _Builds, name: str) -> Callable[[], tuple[bool, str]]:
    def check() -> tuple[bool, str]:
        parent = operator.live(API_VERSION, KIND, name)
        if parent is None:
            return False, f"{name} not found"
        kubelet(operator.client, name, namespace=operator.namespace)  # the frontend waits
        pending = []
        for desired, state in run_builders(builds.build(parent, operator.inputs_of(parent)),
                                           parent=parent):
            live = operator.live(desired["apiVersion"], desired["kind"],
                                 desired["metadata"]["name"])
            label = f"{desired['kind']} {desired['metadata']['name']}"
            if state.is_absent:
                continue
            if live is None:
                pending.append(f"{label} missing")
            elif _drifted(live, desired):
                pending.append(f"{label} differs")
            elif LAST_APPLIED_ANNOTATION in live["metadata"].get("annotations", {}):
                pending.append(f"{label} written by the three-way merge")
        return not pending, "; ".join(pending) or f"{name} converged"
    return check


@pytest.fixture
def ssa_operator(kube_api: Any, kube_namespace: str) -> Iterator[tuple[Thanos, _Builds]]:
    client = install_crds(kube_api)
    builds = _Builds()
    runtime = attrs.evolve(make_operator(), build=builds.build,
                           namespace=kube_namespace, install=[],
                           applying=Applying(strategy=ServerSideApply())).start(client)
    try:
        assert wait_synced(runtime, BOUND)
        yield Thanos(client, runtime, kube_namespace), builds
    finally:
        runtime.stop(timeout=5.0)


def _spent(kube_api: Any, before: dict[str, int]) -> dict[str, int]:
    after = kube_api.request_counts()
    return {verb: after.get(verb, 0) - before.get(verb, 0) for verb in after}


def _requests(spent: dict[str, int], beats: int) -> int:
    """Requests besides watches and the heartbeat's Lease writes (a sign of life, once a
    minute, not a write of the reconciles)."""
    return sum(n for verb, n in spent.items() if verb != "watch") - beats


@pytest.mark.both_servers
def test_server_side_apply_acceptance(
    ssa_operator: tuple[Thanos, _Builds], kube_api: Any
) -> None:
    operator, builds = ssa_operator
    runtime = operator.runtime
    names = operator.apply_samples()
    for name in names:
        eventually(_converged(operator, builds, name))
    assert wait_idle(runtime, BOUND, settle=0.3)
    operator.resync_every_parent()  # warms the CRD schema cache (one LIST of CRDs)
    assert wait_idle(runtime, BOUND, settle=0.3)

    # steady state, then a forced resync: no request at all
    beats, before = runtime.stats.heartbeats, kube_api.request_counts()
    time.sleep(STEADY_REAL if isinstance(kube_api, ControlPlane) else STEADY_EMBEDDED)
    assert operator.resync_every_parent() == len(names)
    spent = _spent(kube_api, before)
    assert _requests(spent, runtime.stats.heartbeats - beats) == 0, spent

    # a hand edit of a field we own: one apply takes it back
    query = "observatory-query"
    generation = operator.live("apps/v1", "Deployment", query)["metadata"]["generation"]
    operator.client.patch("apps/v1", "Deployment", query, {"spec": {"replicas": 5}},
                          patch_type=MERGE_PATCH, namespace=operator.namespace)
    eventually(lambda: (operator.live("apps/v1", "Deployment", query)["spec"]["replicas"]
                        == 2, "scaled back to 2"))
    assert wait_idle(runtime, BOUND, settle=0.5)
    live = operator.live("apps/v1", "Deployment", query)
    assert live["metadata"]["generation"] == generation + 2  # the edit, and one apply
    assert any(e["manager"] == thanos.OPERATOR_NAME and e["operation"] == "Apply"
               for e in live["metadata"]["managedFields"])

    # a field another apply manager owns: reported, not written
    other = KubernetesClient(operator.client.api_client, operator_name="other-controller")
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": query,
               "labels": {DROPPED_LABEL: "theirs"}}}
    other.patch("v1", "Service", query, service, patch_type=APPLY,
                namespace=operator.namespace, force=True)

    def reported() -> tuple[bool, str]:
        parent = operator.live(API_VERSION, KIND, "observatory") or {}
        ready = [c for c in (parent.get("status") or {}).get("conditions") or ()
                 if c.get("type") == "Ready"]
        message = ready[0].get("message", "") if ready else ""
        return (f".metadata.labels.{DROPPED_LABEL}" in message
                and "other-controller" in message, message)

    eventually(reported)

    def warned() -> tuple[bool, str]:
        events = operator.client.list("v1", "Event", namespace=operator.namespace)["items"]
        found = [e for e in events if e.get("reason") == "FieldConflict"
                 and e.get("type") == "Warning" and "other-controller" in e.get("message", "")]
        return bool(found), f"{len(events)} events, none a FieldConflict Warning"

    eventually(warned)
    assert wait_idle(runtime, BOUND, settle=0.5)
    labels = operator.live("v1", "Service", query)["metadata"]["labels"]
    assert labels[DROPPED_LABEL] == "theirs"

    # a field removed from the builders is removed from the live objects (the Service's
    # label is the other controller's now: it stays)
    builds.drop = True
    operator.resync_every_parent()

    def removed() -> tuple[bool, str]:
        left = [f"{kind} {name}" for kind, version, name in (
            ("Deployment", "apps/v1", query),
            ("StatefulSet", "apps/v1", "observatory-store-gateway"))
            if DROPPED_LABEL in (operator.live(version, kind, name) or {})
            .get("metadata", {}).get("labels", {})]
        return not left, f"still labelled: {left}"

    eventually(removed)
    labels = operator.live("v1", "Service", query)["metadata"]["labels"]
    assert labels[DROPPED_LABEL] == "theirs"
