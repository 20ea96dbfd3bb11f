"""A Service's ClusterIP is set once: the embedded server refuses a change of it as a real one
does, whichever of the two fields (``clusterIP``, ``clusterIPs``) the client sends.

Before session 15 the embedded server accepted a patch of ``spec.clusterIP`` alone (the field
builders and older clients set, headless ``None`` included) and stored it beside the old
``clusterIPs``; a real server carries the change over to ``clusterIPs`` and refuses it. An
operator that turned a Service headless passed its tests and failed in a cluster. The
expected answers were taken from kube-apiserver 1.25 (the real tier runs them again).
"""

from __future__ import annotations

from typing import Any

import pytest

from reconciler import KubernetesClient
from reconciler._base.errors import InvalidError

_MERGE = "application/merge-patch+json"


def _service(client: KubernetesClient, namespace: str, name: str) -> dict[str, Any]:
    return client.create({"apiVersion": "v1", "kind": "Service",
                          "metadata": {"name": name, "namespace": namespace},
                          "spec": {"ports": [{"port": 80}]}})


def _other(ip: str) -> str:
    """Another address of the same /24 (never the one allocated)."""
    head, last = ip.rsplit(".", 1)
    return f"{head}.{250 if last != '250' else 251}"


@pytest.mark.both_servers
@pytest.mark.parametrize(("change", "field", "detail"), [
    ("clusterIP", "spec.clusterIPs[0]", "may not change once set"),
    ("headless", "spec.clusterIPs[0]", "may not change once set"),
    ("both", "spec.clusterIPs[0]", "may not change once set"),
    ("clusterIPs", "spec.clusterIPs", "first value must match `clusterIP`"),
    ("cleared and clusterIPs", "spec.clusterIPs", "first value must match `clusterIP`"),
])
def test_a_change_of_the_cluster_ip_is_refused_naming_the_field(
    kube_api: Any, kube_namespace: str, change: str, field: str, detail: str,
) -> None:
    client = KubernetesClient(kube_api.api_client())
    created = _service(client, kube_namespace, "s")
    ip = created["spec"]["clusterIP"]
    other = _other(ip)
    patch = {"clusterIP": {"clusterIP": other}, "headless": {"clusterIP": "None"},
             "both": {"clusterIP": other, "clusterIPs": [other]},
             "clusterIPs": {"clusterIPs": [other]},
             "cleared and clusterIPs": {"clusterIP": "", "clusterIPs": [other]}}[change]
    sent = patch.get("clusterIPs") or [patch["clusterIP"]]
    with pytest.raises(InvalidError) as caught:
        client.patch("v1", "Service", "s", {"spec": patch}, patch_type=_MERGE,
                     namespace=kube_namespace)
    assert f'{field}: Invalid value: []string{{"{sent[0]}"}}: {detail}' in str(caught.value)
    stored = client.get("v1", "Service", "s", namespace=kube_namespace)["spec"]
    assert (stored["clusterIP"], stored["clusterIPs"]) == (ip, [ip])


@pytest.mark.both_servers
@pytest.mark.parametrize("patch", [
    {"clusterIP": None}, {"clusterIPs": None}, {"clusterIP": None, "clusterIPs": None},
    {"clusterIP": ""}, {"type": "ClusterIP"},
])
def test_an_update_leaving_the_cluster_ip_out_keeps_it(
    kube_api: Any, kube_namespace: str, patch: dict[str, Any],
) -> None:
    client = KubernetesClient(kube_api.api_client())
    ip = _service(client, kube_namespace, "s")["spec"]["clusterIP"]
    spec = client.patch("v1", "Service", "s", {"spec": patch}, patch_type=_MERGE,
                        namespace=kube_namespace)["spec"]
    assert (spec["clusterIP"], spec["clusterIPs"]) == (ip, [ip])
