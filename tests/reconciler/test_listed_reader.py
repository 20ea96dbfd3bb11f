"""``ListedReader``: one LIST per kind and scope, every later read from memory."""

from __future__ import annotations

from typing import Any

from builders.names import MANAGED_BY_LABEL, OWNER_UID_LABEL
from reconciler import KubernetesClient
from reconciler._cache.listed import ListedReader
from tests.reconciler.conftest import Requests

RBAC = "rbac.authorization.k8s.io/v1"


def labelled(kind: str, name: str, namespace: str | None, owner: str,
             api_version: str = "v1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {MANAGED_BY_LABEL: "lister",
                                                    OWNER_UID_LABEL: owner}}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


def test_one_list_per_kind_and_scope(kube_api: Any, client: KubernetesClient, ns: str) -> None:
    other = f"{ns}-b"
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    role = labelled("ClusterRole", f"{ns}-role", None, "u1", RBAC)
    try:
        for name, owner in (("a", "u1"), ("b", "u1"), ("c", "u2")):
            client.create(labelled("ConfigMap", name, ns, owner))
        client.create({"apiVersion": "v1", "kind": "ConfigMap",  # not the operator's
                       "metadata": {"name": "foreign", "namespace": ns}})
        client.create(labelled("ConfigMap", "x", other, "u1"))
        client.create(role)
        reader = ListedReader(client, namespace=ns, label_selector=f"{MANAGED_BY_LABEL}=lister")
        with Requests(kube_api) as requests:
            owned = reader.list("v1", "ConfigMap", namespace=ns,
                                label_selector=f"{OWNER_UID_LABEL}=u1")
            assert sorted(o["metadata"]["name"] for o in owned) == ["a", "b"]
            assert reader.get("v1", "ConfigMap", "c", namespace=ns) is not None
            assert reader.get("v1", "ConfigMap", "foreign", namespace=ns) is None
            assert reader.list("v1", "ConfigMap", namespace=ns,
                               label_selector=f"{OWNER_UID_LABEL}!=u1")[0]["metadata"][
                                   "name"] == "c"
        assert requests.count("list") == 1  # every read above: one list
        with Requests(kube_api) as requests:
            # outside the scope: that namespace's own list; cluster-scoped: cluster-wide
            assert reader.get("v1", "ConfigMap", "x", namespace=other) is not None
            assert reader.get(RBAC, "ClusterRole", f"{ns}-role") is not None
            assert reader.list("v1", "Secret", namespace=ns) == []
            assert reader.get("example.invalid/v1", "Nothing", "n", namespace=ns) is None
        assert requests.count("list") == 3  # an unserved kind: no request
        assert reader.lists == 5
        assert requests.count("get") == 0
    finally:
        client.delete(RBAC, "ClusterRole", role["metadata"]["name"])
        client.delete("v1", "Namespace", other)
