"""A small operator for the commands' tests of placed children (issue 41): a ``Site`` parent
builds a ConfigMap at home and a Namespace and a ConfigMap in the cluster ``spec.cluster``
names (``edge-1`` by default), the clusters declared by Secrets in ``fleet-commands``."""

from __future__ import annotations

from typing import Any

from builders import DesiredState, ResourceBuilder, placed
from reconciler import Applying, ClusterSecrets
from reconciler._driver.operators import Operator

FLEET_NAMESPACE = "fleet-commands"


def build(parent: Any) -> list[ResourceBuilder]:
    """A home ConfigMap, and in the chosen cluster a Namespace and a ConfigMap in it."""
    name = parent["metadata"]["name"]
    spec = parent.get("spec") or {}
    cluster = str(spec.get("cluster", "edge-1"))
    home = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-home"},
            "data": {"cluster": cluster}}
    space = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"site-{name}"}}
    remote = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "settings", "namespace": f"site-{name}"},
              "data": {"size": str(spec.get("size", 1))}}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "site-reader", "namespace": f"site-{name}"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                       "verbs": ["get", "list"]}]}
    return [
        lambda: (home, DesiredState.PRESENT),
        placed(lambda: (space, DesiredState.PRESENT), cluster=cluster),
        placed(lambda: (remote, DesiredState.PRESENT), cluster=cluster),
        placed(lambda: (role, DesiredState.PRESENT), cluster=cluster),
    ]


operator = Operator(api_version="sites.optk.dev/v1", kind="Site", build=build,
                    name="site-operator",
                    applying=Applying(clusters=ClusterSecrets(namespace=FLEET_NAMESPACE)))
