"""Repeated identical Events are aggregated on one Event (issue 11), as client-go's recorder
does: the same failure reconciled 10 times leaves one Warning with ``count`` 10, not 10 Events.
Against the embedded server and on the real control plane."""

from __future__ import annotations

from typing import Any

import pytest

from builders import DesiredState, ResourceBuilder
from reconciler import KubernetesClient, ParentReconciler, ParentSettings
from reconciler._base.times import parse_time
from reconciler._reconcile.events import EventRecorder
from reconciler.testing import VirtualClock

PRESENT = DesiredState.PRESENT


def _events(client: KubernetesClient, namespace: str) -> list[dict[str, Any]]:
    return list(client.list("v1", "Event", namespace=namespace)["items"])


def _parent(client: KubernetesClient, namespace: str) -> dict[str, Any]:
    return client.create({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "parent", "namespace": namespace}})


@pytest.mark.both_servers
def test_the_same_event_ten_times_is_one_event_counted_ten_times(
    kube_api: Any, kube_namespace: str
) -> None:
    client = KubernetesClient(kube_api.api_client())
    clock = VirtualClock()
    recorder = EventRecorder(client, component="agg-operator", clock=clock)
    parent = _parent(client, kube_namespace)
    first = clock.time()
    for _ in range(10):
        assert recorder.record(parent, reason="Failed", message="child x refused",
                               type="Warning")
        clock.advance(30)
    assert recorder.record(parent, reason="Failed", message="child y refused", type="Warning")
    events = sorted(_events(client, kube_namespace), key=lambda e: e["message"])
    assert [(e["message"], e["count"]) for e in events] == [
        ("child x refused", 10), ("child y refused", 1),
    ]
    counted = events[0]
    assert parse_time(counted["firstTimestamp"]) == int(first)
    assert parse_time(counted["lastTimestamp"]) == int(first + 9 * 30)


def test_an_event_deleted_meanwhile_is_recorded_afresh(
    client: KubernetesClient, ns: str
) -> None:
    recorder = EventRecorder(client, component="agg-operator", clock=VirtualClock())
    parent = _parent(client, ns)
    recorder.record(parent, reason="Failed", message="m", type="Warning")
    (event,) = _events(client, ns)
    client.delete("v1", "Event", event["metadata"]["name"], namespace=ns)
    recorder.record(parent, reason="Failed", message="m", type="Warning")
    recorder.record(parent, reason="Failed", message="m", type="Warning")
    assert [e["count"] for e in _events(client, ns)] == [2]


def test_a_failure_reconciled_ten_times_leaves_one_warning_with_count_ten(
    client: KubernetesClient, ns: str
) -> None:
    def build(parent: Any) -> list[ResourceBuilder]:
        return [lambda: ({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "Bad_Name"}}, PRESENT)]  # refused: 422

    parent = _parent(client, ns)
    reconciler = ParentReconciler(
        client, build, operator_name="agg-operator", settings=ParentSettings(write_status=False),
    )
    for _ in range(10):
        assert not reconciler.reconcile(parent).ok
    warnings = [e for e in _events(client, ns) if e["type"] == "Warning"]
    assert [e["count"] for e in warnings] == [10]
    assert "Bad_Name" in warnings[0]["message"]
