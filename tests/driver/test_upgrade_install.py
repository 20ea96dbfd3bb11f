"""``Operator(install=[CRD])`` applies the CRD through the matcher: a changed schema reaches the
cluster at the next start (the changed fields logged), an unchanged one costs no write."""

from __future__ import annotations

import copy
import logging
import uuid
from typing import Any

import pytest

from reconciler import KubernetesClient
from reconciler._reconcile.install import install_object
from tests.driver.conftest import make_operator, running


def _crd(group: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                      "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                "openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": properties}}}}}],
        },
    }


def _spec_properties(client: KubernetesClient, name: str) -> dict[str, Any]:
    live = client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
    schema = live["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return dict(schema["properties"]["spec"]["properties"])


def test_a_changed_crd_schema_is_patched_at_the_next_start(
    client: KubernetesClient, ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    group = f"g{uuid.uuid4().hex[:8]}.optk.dev"
    old = _crd(group, {"size": {"type": "integer"}})
    new = copy.deepcopy(old)
    new["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["color"] = {"type": "string", "enum": ["red", "blue"]}
    name = old["metadata"]["name"]
    with running(make_operator(ns, install=[old]), client):
        assert set(_spec_properties(client, name)) == {"size"}
    with caplog.at_level(logging.INFO, logger="optk"), running(
            make_operator(ns, install=[new]), client):
        assert set(_spec_properties(client, name)) == {"size", "color"}
    updates = [r.getMessage() for r in caplog.records
               if r.getMessage().startswith(f"updated CustomResourceDefinition {name}:")]
    assert len(updates) == 1
    assert "spec.versions" in updates[0]
    assert install_object(client, new).action == "unchanged"


def test_install_creates_with_the_last_applied_annotation(client: KubernetesClient) -> None:
    group = f"g{uuid.uuid4().hex[:8]}.optk.dev"
    crd = _crd(group, {"size": {"type": "integer"}})
    result = install_object(client, crd)
    assert result.action == "created"
    live = client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                      crd["metadata"]["name"])
    assert "optk.dev/last-applied" in live["metadata"]["annotations"]
    assert install_object(client, crd).action == "unchanged"
