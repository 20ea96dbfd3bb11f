"""``Webhooks``, the on_start hook: certificates kept in a Secret and rotated, the CA injected.

On an embedded API server of its own (the hook rewrites the Thanos CRD, which other tests of the
session's server use): the hook makes the Secret, serves, writes the conversion stanza with its
CA into the CRD, so an object created at v1alpha1 reads back at v1alpha2; with the injected clock
moved past two thirds of the certificate's validity it makes new certificates, serves them and
injects the new CA, and reads still convert.
"""

from __future__ import annotations

import base64
import time
from typing import Any

from examples.thanos.crds import (
    API_VERSION,
    API_VERSION_2,
    KIND,
    THANOS_VERSIONED_CRD,
    THANOS_VERSIONS,
)
from reconciler import ApiError, KubernetesClient
from reconciler.embedded import EmbeddedApiServer
from reconciler.testing import VirtualClock
from reconciler.webhooks import WebhookCertificates, Webhooks

_CRD = "thanoses.monitoring.optk.dev"


def _until(what: str, check: Any, *, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {timeout} s")


def _ca_bundle(client: KubernetesClient) -> bytes:
    crd = client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", _CRD)
    config = crd["spec"]["conversion"]["webhook"]["clientConfig"]
    return base64.b64decode(config["caBundle"])


def _read_at_v2(server: EmbeddedApiServer) -> dict[str, Any] | None:
    try:
        return KubernetesClient(server.api_client()).get(
            API_VERSION_2, KIND, "t", namespace="ops")
    except (ApiError, LookupError):
        return None


def test_the_hook_keeps_certificates_in_a_secret_injects_the_ca_and_rotates() -> None:
    clock = VirtualClock(start=time.time())
    hooks = Webhooks(versions=[THANOS_VERSIONS], crds=[THANOS_VERSIONED_CRD], name="thanos-hooks",
                     namespace="ops", host="127.0.0.1", port=0, local=True, check_interval=3600)
    with EmbeddedApiServer() as server:
        client = KubernetesClient(server.api_client())
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops"}})
        stop = hooks.start(client, clock=clock)
        try:
            secret = client.get("v1", "Secret", "thanos-hooks-tls", namespace="ops")
            assert secret["type"] == "kubernetes.io/tls"
            first = WebhookCertificates.from_secret(secret)
            assert _ca_bundle(client) == first.ca_pem
            client.create({"apiVersion": API_VERSION, "kind": KIND,
                           "metadata": {"name": "t", "namespace": "ops"},
                           "spec": {"objectStorageSecret": "s"}})
            read = _until("a read at v1alpha2", lambda: _read_at_v2(server))
            assert read["spec"] == {"objectStorage": {"secretName": "s"}}

            # Not yet due: an hour on, the same certificates.
            assert clock.wait_for_waiters(1)
            clock.advance(3600)
            time.sleep(0.3)
            assert WebhookCertificates.from_secret(client.get(
                "v1", "Secret", "thanos-hooks-tls", namespace="ops")) == first
            # Five days on (of seven): rotated, served and injected.
            clock.advance(5 * 24 * 3600)
            rotated = _until("the rotated CA injected", lambda: (
                _ca_bundle(client) != first.ca_pem and _ca_bundle(client)))
            second = WebhookCertificates.from_secret(client.get(
                "v1", "Secret", "thanos-hooks-tls", namespace="ops"))
            assert rotated == second.ca_pem
            assert second.cert_pem != first.cert_pem
            read = _until("a read through the new certificate", lambda: _read_at_v2(server))
            assert read["spec"] == {"objectStorage": {"secretName": "s"}}
        finally:
            stop()
