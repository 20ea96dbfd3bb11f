"""The Foo operator of client-go's ``sample-controller``, written with the toolkit.

What the Go controller does (``controller.go`` of ``k8s.io/sample-controller``), as an author
writes it from docs/tutorial.md and docs/driver.md: each ``Foo`` owns a Deployment named
``spec.deploymentName``, labelled ``app: nginx, controller: <foo>``, of ``spec.replicas``
``nginx:latest`` pods; ``status.availableReplicas`` is the Deployment's. The toolkit adds what
the Go controller leaves out: a changed container image (or anything else it set) is repaired,
and nothing is written at rest. ``optk run benchmarks.peers.client_go.operator:operator`` runs
it; the CRD is the Go peer's (``foo-crd.yaml``), installed by the benchmark, not here, so both
operators start on the same cluster state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import builders as b
from builders import objects
from reconciler import Applying, Operator, Reporting, ResyncPolicy

API_VERSION = "samplecontroller.k8s.io/v1alpha1"
KIND = "Foo"
OPERATOR = "foo-operator"
IMAGE = "nginx:latest"
RESYNC_SECONDS = 30.0
"""The Go controller's informer resync period, so both resync alike in the benchmark."""


@b.resource_builder
def deployment(parent: Mapping[str, Any]) -> dict[str, Any]:
    """The Foo's Deployment, as ``newDeployment`` of the Go controller builds it."""
    spec = parent.get("spec") or {}
    name = str(parent["metadata"]["name"])
    selector = {"app": "nginx", "controller": name}
    return objects.deployment(
        metadata=b.child_meta(parent, component="nginx", managed_by=OPERATOR,
                              name=str(spec["deploymentName"]), labels=selector),
        selector_labels=selector,
        replicas=int(spec.get("replicas", 1)),
        containers=[objects.container(name="nginx", image=IMAGE)],
    )


def build(parent: Mapping[str, Any]) -> list[b.ResourceBuilder]:
    """A Foo's one child."""
    return [deployment(parent)]


def status(parent: Mapping[str, Any], children: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``status.availableReplicas``: the Deployment's, as the Go controller writes it."""
    available = sum(int((c.get("status") or {}).get("availableReplicas") or 0)
                    for c in children if c.get("kind") == "Deployment")
    return {"availableReplicas": available}


operator = Operator(
    api_version=API_VERSION, kind=KIND, build=build, name=OPERATOR,
    resync=ResyncPolicy(interval=RESYNC_SECONDS, min_interval=RESYNC_SECONDS),
    reporting=Reporting(status=status), applying=Applying(reuse_builds=True),
)
