"""One protocol both test servers satisfy: ``reconciler.testing.KubeApiServer``.

The embedded server and the real control plane are started, connected to and counted alike, so
a test (and the pytest plugin's ``kube_api``) takes either; mypy checks both classes against the
protocol (``reconciler.pytest_plugin``), this checks the running servers behave as it says.
"""

from __future__ import annotations

import kubernetes.client
import pytest

from reconciler.testing import KubeApiServer


@pytest.mark.both_servers
def test_either_server_is_a_kube_api_server_and_answers_as_the_protocol_says(
    kube_api: KubeApiServer, kube_api_name: str
) -> None:
    assert isinstance(kube_api, KubeApiServer)
    assert kube_api.url.startswith("https://127.0.0.1:")
    assert kube_api.kubeconfig_path.is_file()
    assert kube_api.ca_cert_path.is_file()
    assert kube_api.token
    if kube_api_name == "embedded":
        assert kube_api.has_controller_manager is False
    assert isinstance(kube_api.has_controller_manager, bool)
    with kube_api.api_client() as client:
        names = kubernetes.client.CoreV1Api(client).list_namespace().items
    assert any(n.metadata.name == "default" for n in names)
    assert kube_api.configuration().host == kube_api.url
    assert kube_api.request_counts().get("list", 0) >= 1
