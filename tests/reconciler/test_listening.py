"""The operator's one HTTP listener (``reconciler._base.listening``): the health/metrics server
and the webhook server bind alike: ``0.0.0.0`` is both families, and neither asks DNS for its
own name at bind time (``HTTPServer`` calls ``socket.getfqdn``, which hangs where DNS is
unreachable)."""

from __future__ import annotations

import json
import socket
import ssl
import urllib.request
from typing import Any

import pytest

from examples.thanos.crds import THANOS_VERSIONS
from reconciler._base.metrics import HealthServer, OperatorMetrics
from reconciler._webhooks.server import WebhookServer
from reconciler.webhooks import WebhookCertificates


def _ipv6() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


def _no_name_lookup(*args: Any) -> str:
    raise AssertionError("the listener asked DNS for its own name")


def _post(url: str, ca: ssl.SSLContext) -> int:
    review = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
              "request": {"uid": "1", "desiredAPIVersion": "x/v1", "objects": []}}
    request = urllib.request.Request(url, data=json.dumps(review).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10, context=ca) as reply:
        return int(reply.status)


def test_both_servers_bind_every_interface_of_both_families_without_a_name_lookup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(socket, "getfqdn", _no_name_lookup)
    certificates = WebhookCertificates.generate(["127.0.0.1", "::1", "localhost"])
    ca = ssl.create_default_context(cadata=certificates.ca_pem.decode())
    hosts = ["127.0.0.1", "[::1]"] if _ipv6() else ["127.0.0.1"]
    with HealthServer(OperatorMetrics("listen"), ready=lambda: True, host="0.0.0.0") as health, \
            WebhookServer([THANOS_VERSIONS], certificates=certificates, host="0.0.0.0") as hooks:
        for host in hosts:
            with urllib.request.urlopen(f"http://{host}:{health.port}/healthz",
                                        timeout=10) as reply:
                assert reply.status == 200
            assert _post(f"https://{host}:{hooks.port}/convert", ca) == 200
    assert hooks.counts() == {"convert": len(hosts)}
