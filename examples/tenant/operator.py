"""The Tenant operator: ``optk run examples.tenant.operator:operator``.

Tenants place their children in the clusters declared by the Secrets of ``CLUSTERS_NAMESPACE``
(``reconciler.ClusterSecrets``); pruning, teardown in those clusters and the summary per cluster
are the toolkit's (docs/clusters.md).
"""

from __future__ import annotations

from typing import Any

from examples.tenant import builders
from examples.tenant.crds import API_VERSION, KIND, TENANT_CRD
from reconciler import ClusterSecrets, Operator, Reporting

CLUSTERS_NAMESPACE = "optk-clusters"
"""Where the cluster Secrets live by default (one Secret with a ``kubeconfig`` key each)."""


def make_operator(*, name: str = builders.OPERATOR_NAME, namespace: str | None = None,
                  clusters: ClusterSecrets | None = None, events: bool = True,
                  **options: Any) -> Operator:
    """The Tenant ``Operator`` (``name``, ``namespace`` and ``clusters`` for tests that run
    several; ``options`` go to ``Operator``)."""
    return Operator(
        api_version=API_VERSION, kind=KIND, name=name, namespace=namespace,
        build=builders.build, inputs=builders.declare, install=[TENANT_CRD],
        clusters=clusters or ClusterSecrets(namespace=CLUSTERS_NAMESPACE),
        reporting=Reporting(events=events), **options,
    )


operator = make_operator()
"""The Tenant operator, as ``optk run examples.tenant.operator:operator`` loads it."""
