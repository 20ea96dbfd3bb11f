"""Bad input: each case meets a clear error or condition, and the rest of the fleet is unaffected.

The example operator runs as a process (its output captured): a parent the CRD schema rejects,
an unowned object at a child's
name (never written), corrupted, truncated, deeply nested and huge last-applied annotations on a
child that also drifted (repaired from desired), a child edited out of shape (owner reference
dropped, container renamed), and a fleet with hundreds of children. The ``Blob`` operator of
``data_operator`` covers a parent its builder refuses, a ConfigMap near the 1 MiB limit and
Secret values, which must never
appear in the operator's output, Events, parent status or any annotation.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Callable
from typing import Any

import pytest

from objectmatcher import LAST_APPLIED_ANNOTATION, MERGE_PATCH
from reconciler import ApiError, InvalidError, KubernetesClient
from reconciler.embedded import EmbeddedApiServer
from tests.reliability import _counts
from tests.reliability._harness import SOAK, Fleet, OperatorProcess, eventually
from tests.reliability.data_operator import API_VERSION as BLOB_API
from tests.reliability.data_operator import KIND as BLOB
from tests.reliability.data_operator import secret_value

THANOS_API, THANOS = "monitoring.optk.dev/v1alpha1", "Thanos"
MANY_PARENTS = 700 if SOAK else 90  # about 3 children each: 2,100 or 270


def _condition(obj: dict[str, Any] | None, kind: str = "Ready") -> dict[str, Any]:
    for condition in ((obj or {}).get("status") or {}).get("conditions") or ():
        if condition.get("type") == kind:
            return dict(condition)
    return {}


def _poisoned(prefix: str) -> dict[str, str]:
    def encoded(text: str) -> str:
        return prefix + base64.b64encode(zlib.compress(text.encode(), 9)).decode()

    return {
        "corrupted": prefix + "not base64 at all !!!",
        "garbage": "\x00\xff{{{[[[",
        "deeply nested": encoded('{"a":' * 5000 + "{}" + "}" * 5000),
        "huge": encoded('{"spec":{"x":"' + "y" * 60_000_000 + '"}}'),
    }


def test_bad_parents_children_and_annotations_are_contained(
    server: EmbeddedApiServer, client: KubernetesClient,
    operators: Callable[..., OperatorProcess],
) -> None:
    replica = operators(server.kubeconfig_path).start()
    eventually(lambda: client.is_served(THANOS_API, THANOS), "the Thanos CRD", 60)
    fleet = Fleet(client, "bad")
    fleet.create_namespace()
    seeds = fleet.seed_unowned(3)
    fleet.create_parents(4)
    tried = 0

    # A parent the schema rejects: refused at the door, naming the field.
    with pytest.raises(InvalidError) as refused:
        client.create({"apiVersion": THANOS_API, "kind": THANOS,
                       "metadata": {"name": "too-many", "namespace": "bad"},
                       "spec": {"query": {"replicas": 99}}})
    assert refused.value.code == 422
    assert "spec.query.replicas" in str(refused.value)
    tried += 1

    # An unowned object at a child's name: reported, never written.
    taken = client.create({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "taken-query", "namespace": "bad"},
        "spec": {"selector": {"matchLabels": {"app": "mine"}}, "template": {
            "metadata": {"labels": {"app": "mine"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
    })
    client.create({"apiVersion": THANOS_API, "kind": THANOS,
                   "metadata": {"name": "taken", "namespace": "bad"}, "spec": {"query": {}}})
    eventually(lambda: "taken-query" in _condition(fleet.parent("taken")).get("message", ""),
               "a condition naming the unowned Deployment", 30)
    live = fleet.live("apps/v1", "Deployment", "taken-query")
    assert live is not None
    assert live["metadata"]["resourceVersion"] == taken["metadata"]["resourceVersion"]
    tried += 1

    fleet.wait_converged(60)
    # Poisoned last-applied annotations on a child that also drifted: repaired from desired.
    child = fleet.live("apps/v1", "Deployment", "p0-query")
    assert child is not None
    text = child["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
    prefix = text[: text.index(":") + 1]
    for what, poison in {**_poisoned(prefix), "truncated": text[: len(text) // 2]}.items():
        client.patch("apps/v1", "Deployment", "p0-query", {
            "metadata": {"annotations": {LAST_APPLIED_ANNOTATION: poison}},
            "spec": {"replicas": 42}}, patch_type=MERGE_PATCH, namespace="bad")
        fleet.patch_parent("p0", {"spec": {"query": {"logLevel": "warn" if tried % 2 else "info"}}})
        eventually(lambda: fleet.pending("p0") == [], f"p0 repaired after a {what} annotation",
                   30)
        tried += 1

    # A child edited out of shape: owner reference dropped, container renamed.
    client.patch("apps/v1", "Deployment", "p1-query", {
        "metadata": {"ownerReferences": None},
        "spec": {"template": {"spec": {"containers": [{"name": "renamed", "image": "x"}]}}}},
        patch_type=MERGE_PATCH, namespace="bad")
    eventually(lambda: fleet.pending("p1") == [], "p1-query repaired", 30)
    tried += 1

    fleet.wait_converged(60)
    assert fleet.census() == (0, 0)
    assert fleet.written_seeds(seeds) == []
    assert replica.alive(), replica.output()[-3000:]

    # Hundreds of children.
    many = Fleet(client, "many")
    many.create_namespace()
    many.create_parents(MANY_PARENTS)
    seconds = many.wait_converged(300 if SOAK else 120)
    children = sum(len(client.list(api, kind, namespace="many").get("items", []))
                   for api, kind in (("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"),
                                     ("v1", "Service")))
    assert many.census() == (0, 0)
    assert children >= 2 * MANY_PARENTS
    _counts.add("bad_input", {"bad_inputs.tried": tried, "many.children": children})
    _counts.figure(f"many.converge_seconds_{children}_children", round(seconds, 2))


def test_large_configmap_and_secret_values_never_leak(
    server: EmbeddedApiServer, client: KubernetesClient,
    operators: Callable[..., OperatorProcess],
) -> None:
    replica = operators(server.kubeconfig_path,
                        target="tests.reliability.data_operator:operator").start()
    eventually(lambda: client.is_served(BLOB_API, BLOB), "the Blob CRD", 60)
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "data"}})
    sizes = {"small": 100, "large": 900_000, "over": 1_100_000}
    for name, size in sizes.items():
        client.create({"apiVersion": BLOB_API, "kind": BLOB,
                       "metadata": {"name": name, "namespace": "data"}, "spec": {"size": size}})
    client.create({"apiVersion": BLOB_API, "kind": BLOB,  # its builder refuses it
                   "metadata": {"name": "refused", "namespace": "data"},
                   "spec": {"encoding": "rot13"}})

    def blob(name: str) -> dict[str, Any]:
        return client.get(BLOB_API, BLOB, name, namespace="data")

    def payload(name: str) -> dict[str, Any] | None:
        try:
            return client.get("v1", "ConfigMap", f"{name}-payload", namespace="data")
        except ApiError:
            return None

    # Within the limit: built as asked; past it: refused with a condition naming the child.
    for name in ("small", "large"):
        eventually(lambda name=name: payload(name) is not None, f"{name}-payload", 60)
        assert len((payload(name) or {})["data"]["blob"]) == sizes[name]
    eventually(lambda: "over-payload" in _condition(blob("over")).get("message", ""),
               "a condition naming over-payload", 60)
    assert payload("over") is None
    eventually(lambda: "spec.encoding" in json.dumps(blob("refused").get("status")),
               "a condition naming spec.encoding", 30)
    assert payload("refused") is None

    # A user edits the Secret; the operator repairs it (a diff, a patch, an Event).
    client.patch("v1", "Secret", "small-credentials", {"stringData": {"password": "hunter2"}},
                 patch_type=MERGE_PATCH, namespace="data")
    expected = base64.b64encode(secret_value(blob("small")).encode()).decode()
    eventually(lambda: client.get("v1", "Secret", "small-credentials", namespace="data")
               ["data"]["password"] == expected, "the Secret repaired", 30)
    values = [secret_value(blob(name)) for name in sizes]
    haystacks = {
        "operator output": replica.output(),
        "events": json.dumps(client.list("v1", "Event", namespace="data")),
        "parent status": json.dumps([blob(name).get("status") for name in sizes]),
        "annotations": json.dumps([
            item["metadata"].get("annotations") for kind in ("Secret", "ConfigMap")
            for item in client.list("v1", kind, namespace="data").get("items", [])]
            + [blob(name)["metadata"].get("annotations") for name in sizes]),
    }
    for where, text in haystacks.items():
        for value in [*values, expected]:
            assert value not in text, f"a Secret value in the {where}"
    assert replica.alive()
    _counts.add("bad_input:data", {"bad_inputs.tried": 3, "secrets.leaked": 0,
                                   "secrets.places_searched": len(haystacks)})
