"""Who wrote what (issue 11): every request carries ``User-Agent: optk/<version> (<operator>)``
and every write ``fieldManager=<operator>``, so the audit log and ``managedFields`` name the
operator instead of ``OpenAPI-Generator``. Run on both servers; the audit log is the real
control plane's."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from reconciler import KubernetesClient, Reporting
from reconciler._client.kubernetes import toolkit_version, user_agent
from reconciler._driver.operators import Operator


def _configmap(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": {"a": "1"}}


def _audit_lines(plane: Any) -> list[str]:
    """The real control plane's audit log (beside its kubeconfig in its work directory)."""
    return (plane.kubeconfig_path.parent / "audit.log").read_text().splitlines()


def _managers(obj: dict[str, Any]) -> set[str]:
    return {entry.get("manager") for entry in obj["metadata"].get("managedFields") or ()}


def test_the_user_agent_names_the_toolkit_version_and_the_operator() -> None:
    assert toolkit_version() != "0+unknown"  # the package is installed: its metadata is read
    assert user_agent("thanos-operator") == f"optk/{toolkit_version()} (thanos-operator)"
    assert user_agent() == f"optk/{toolkit_version()}"


@pytest.mark.both_servers
def test_writes_carry_the_operator_as_field_manager_and_user_agent(
    kube_api: Any, kube_namespace: str
) -> None:
    name = f"ua-{uuid.uuid4().hex[:8]}"
    client = KubernetesClient(kube_api.api_client(), operator_name=name)
    # a server-side apply is refused (422) without a fieldManager, on both servers
    applied = client.patch("v1", "ConfigMap", "applied", _configmap("applied", kube_namespace),
                           patch_type="application/apply-patch+yaml", namespace=kube_namespace)
    assert _managers(applied) == {name}
    created = client.create(_configmap("created", kube_namespace))
    patched = client.patch("v1", "ConfigMap", "created", {"data": {"b": "2"}},
                           patch_type="application/merge-patch+json", namespace=kube_namespace)
    if not hasattr(kube_api, "request_breakdown"):  # real: it records update managers too
        assert _managers(created) == {name}
        assert _managers(patched) == {name}
        agents = {
            event.get("userAgent")
            for event in map(json.loads, _audit_lines(kube_api))
            if (event.get("objectRef") or {}).get("namespace") == kube_namespace
            and (event.get("objectRef") or {}).get("resource") == "configmaps"
        }
        assert agents == {f"optk/{toolkit_version()} ({name})"}


def test_the_runtime_speaks_as_its_operator(kube_api: Any, kube_namespace: str) -> None:
    operator = Operator(
        api_version="v1", kind="ConfigMap", build=lambda parent: [], name="named-operator",
        namespace=kube_namespace, reporting=Reporting(events=False),
    )
    runtime = operator.start(KubernetesClient(kube_api.api_client()))
    try:
        inner = runtime.client.inner
        assert isinstance(inner, KubernetesClient)
        assert inner.user_agent == f"optk/{toolkit_version()} (named-operator)"
        assert inner.field_manager == "named-operator"
    finally:
        runtime.stop(5)
