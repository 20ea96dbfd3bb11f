"""``optk manifests`` for an operator with a ``Webhooks`` hook: Service, configurations, RBAC.

Pure: the stream for the example's ``versioned_operator``. Applied to a real control plane (the
webhooks served with the CA the operator injects) in
``tests/webhooks/test_webhooks_servers.py``.
"""

from __future__ import annotations

from typing import Any

import yaml

from examples.thanos.operator import operator, samples, versioned_operator
from reconciler._commands.manifests import ManifestOptions, manifests
from reconciler._commands.rbac import operator_facts


def _stream(op: Any) -> list[dict[str, Any]]:
    options = ManifestOptions(target="examples.thanos.operator:x", namespace="thanos-system",
                              image="optk-thanos:test")
    parents = [d for d in yaml.safe_load_all(samples.read_text()) if d]
    return [obj for obj, _ in manifests(operator_facts(op), options, parents=parents)]


def _one(stream: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in stream if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name, [o["kind"] for o in stream])
    return found[0]


def test_the_webhook_service_configurations_crd_and_port() -> None:
    stream = _stream(versioned_operator)
    service = _one(stream, "Service", "thanos-webhooks")
    assert service["metadata"]["namespace"] == "thanos-system"
    assert service["spec"]["ports"] == [{"name": "webhooks", "port": 443,
                                         "targetPort": "webhooks", "protocol": "TCP"}]
    reference = {"name": "thanos-webhooks", "namespace": "thanos-system", "port": 443}
    validating = _one(stream, "ValidatingWebhookConfiguration", "thanos-webhooks")
    assert validating["webhooks"][0]["clientConfig"] == {
        "service": {**reference, "path": "/validate"}}
    mutating = _one(stream, "MutatingWebhookConfiguration", "thanos-webhooks")
    assert mutating["webhooks"][0]["clientConfig"] == {
        "service": {**reference, "path": "/mutate"}}
    crd = _one(stream, "CustomResourceDefinition", "thanoses.monitoring.optk.dev")
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1", "v1alpha2"]
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"] == {
        "service": {**reference, "path": "/convert"}}  # no caBundle: the operator injects it
    deployment = _one(stream, "Deployment", "thanos-operator")
    ports = deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert {"name": "webhooks", "containerPort": 9443, "protocol": "TCP"} in ports


def test_the_rules_the_webhooks_need_and_nothing_without_them() -> None:
    stream = _stream(versioned_operator)
    role = _one(stream, "Role", "thanos-operator")
    assert {"apiGroups": [""], "resources": ["secrets"],
            "resourceNames": ["thanos-webhooks-tls"], "verbs": ["get", "update"]} in role["rules"]
    cluster = _one(stream, "ClusterRole", "thanos-operator")
    assert {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
            "resourceNames": ["thanoses.monitoring.optk.dev"],
            "verbs": ["get", "update"]} in cluster["rules"]
    plain = _stream(operator)
    assert not [o for o in plain if "Webhook" in o["kind"]
                or o["metadata"]["name"] == "thanos-webhooks"]
