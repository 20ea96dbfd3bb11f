"""The Observer operator: ``optk run examples.observer.operator:operator``.

Observers build the Thanos example operator and a ``Thanos`` resource
(``examples.observer.builders``); ``PRUNE`` lists every kind they build, so switching an
Observer's ``thanos`` block off deletes them all; the toolkit's cleanup finalizer deletes the
cluster-scoped ones (CRD, ClusterRole, ClusterRoleBinding) when the Observer is deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from builders import ResourceBuilder
from examples.observer import builders
from examples.observer.crds import API_VERSION, KIND, OBSERVER_CRD
from examples.thanos.crds import API_VERSION as THANOS_API_VERSION
from examples.thanos.crds import KIND as THANOS_KIND
from reconciler import Operator, Policies, Reporting

PRUNE = (
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("v1", "ServiceAccount"),
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    (THANOS_API_VERSION, THANOS_KIND),
)
"""Every kind an Observer builds: what is no longer built is deleted."""


def build_shared_crd(parent: Mapping[str, Any]) -> list[ResourceBuilder]:
    """``builders.build`` with the Thanos CRD declared shared by every Observer."""
    return builders.build(parent, shared_crd=True)


def make_operator(*, name: str = builders.OPERATOR_NAME, namespace: str | None = None,
                  events: bool = True, shared_crd: bool = False, **options: Any) -> Operator:
    """The Observer ``Operator`` (``name`` and ``namespace`` for tests that run several;
    ``shared_crd``: the Thanos CRD shared by the Observers, ``builders.shared``; ``options``
    go to ``Operator``)."""
    return Operator(
        api_version=API_VERSION, kind=KIND, name=name, namespace=namespace,
        build=build_shared_crd if shared_crd else builders.build, install=[OBSERVER_CRD],
        **options, policies=Policies(prune=PRUNE), reporting=Reporting(events=events),
    )


operator = make_operator()
"""The Observer operator, as ``optk run examples.observer.operator:operator`` loads it."""
