"""A poisoned last-applied annotation on a child (issue 12, defect 2, the reconciler's part):
the matcher reports it ``unreadable`` (``PatchResult.original_status``); the parent still
converges (the child is patched from the desired object and the annotation rewritten) and gets
one Warning naming the child, counted on one Event when it happens again."""

from __future__ import annotations

import base64
import zlib
from typing import Any

import pytest

from builders import DesiredState, ResourceBuilder
from objectmatcher import LAST_APPLIED_ANNOTATION, get_last_applied
from reconciler import KubernetesClient, ParentReconciler, ParentSettings

MERGE = "application/merge-patch+json"


def _record(data: bytes) -> str:
    return "optk1:" + base64.b64encode(zlib.compress(data, 9)).decode()


POISONS = {
    "deeply-nested": _record(b"[" * 5000 + b"]" * 5000),
    "huge": _record(b'{"a": "' + b"x" * (8 * 1024 * 1024) + b'"}'),  # 8 MiB, compresses small
    "foreign": _record(b'{"apiVersion": "v1", "kind": "ConfigMap", '
                       b'"metadata": {"name": "someone-else"}}'),
}


def _build(parent: Any) -> list[ResourceBuilder]:
    child = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "child"},
             "data": {"value": "desired"}}
    return [lambda: (child, DesiredState.PRESENT)]


def _warnings(client: KubernetesClient, namespace: str) -> list[dict[str, Any]]:
    return [e for e in client.list("v1", "Event", namespace=namespace)["items"]
            if e["type"] == "Warning"]


@pytest.mark.parametrize("poison", sorted(POISONS))
def test_a_poisoned_annotation_is_replaced_and_reported_once_on_the_parent(
    client: KubernetesClient, ns: str, poison: str
) -> None:
    parent = client.create({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "parent", "namespace": ns}})
    reconciler = ParentReconciler(
        client, _build, operator_name="poison-operator",
        settings=ParentSettings(write_status=False),
    )
    assert reconciler.reconcile(parent).ok
    text = POISONS[poison]
    assert (get_last_applied({"metadata": {"annotations": {LAST_APPLIED_ANNOTATION: text}}})
            is None) == (poison != "foreign")
    for attempt in (1, 2):
        client.patch("v1", "ConfigMap", "child", {
            "metadata": {"annotations": {LAST_APPLIED_ANNOTATION: text}},
            "data": {"value": "drifted"},
        }, patch_type=MERGE, namespace=ns)
        result = reconciler.reconcile(parent)
        assert result.ok, result.errors
        (child,) = result.children
        assert child.original_status == ("foreign" if poison == "foreign" else "unreadable")
        live = client.get("v1", "ConfigMap", "child", namespace=ns)
        assert live["data"] == {"value": "desired"}
        original = get_last_applied(live)
        assert original is not None
        assert original["metadata"]["name"] == "child"
        (warning,) = _warnings(client, ns)
        assert "ConfigMap.v1" in warning["message"]
        assert "child" in warning["message"]
        assert warning["reason"] == "LastAppliedUnreadable"
        assert warning["count"] == attempt
    assert reconciler.reconcile(parent).writes == 0  # repaired: a steady state again


def test_an_unreadable_annotation_alone_is_rewritten(client: KubernetesClient, ns: str) -> None:
    parent = client.create({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "parent", "namespace": ns}})
    reconciler = ParentReconciler(
        client, _build, operator_name="poison-operator",
        settings=ParentSettings(write_status=False),
    )
    assert reconciler.reconcile(parent).ok
    client.patch("v1", "ConfigMap", "child", {
        "metadata": {"annotations": {LAST_APPLIED_ANNOTATION: POISONS["deeply-nested"]}},
    }, patch_type=MERGE, namespace=ns)
    result = reconciler.reconcile(parent)
    assert result.ok
    assert result.writes >= 1
    live = client.get("v1", "ConfigMap", "child", namespace=ns)
    assert get_last_applied(live) is not None
    assert reconciler.reconcile(parent).writes == 0
