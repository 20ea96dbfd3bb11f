"""The driver's Events leave the workers' path (``EventSender``): a reconcile queues them and goes
on; one thread sends them in order; a full queue drops and counts; shutdown sends what is left.
The embedded server's latency injection makes the server slower than the reconciles."""

from __future__ import annotations

import time
from typing import Any

from reconciler import KubernetesClient
from reconciler._driver.event_sender import EventSender
from reconciler._reconcile.events import EventRecorder
from reconciler.embedded import Faults
from tests.driver.conftest import wait_until

_SLOW_EVENTS = Faults(latency=0.4, verbs={"create", "patch"}, resources={"events"})


def _parent(client: KubernetesClient, ns: str, name: str) -> dict[str, Any]:
    return client.create({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": name, "namespace": ns}})


def _messages(client: KubernetesClient, ns: str, parent: str) -> list[str]:
    events = [e for e in client.list("v1", "Event", namespace=ns)["items"]
              if e["involvedObject"]["name"] == parent]
    events.sort(key=lambda e: int(e["metadata"]["resourceVersion"]))  # the order written
    return [e["message"] for e in events]


def test_a_reconcile_does_not_wait_for_its_events_and_they_arrive_in_order(
    kube_api: Any, client: KubernetesClient, ns: str
) -> None:
    parent = _parent(client, ns, "quick")
    sender = EventSender(EventRecorder(client, component="sender-test"))
    with kube_api.faults(_SLOW_EVENTS):
        started = time.monotonic()
        for index in range(3):
            assert sender.record(parent, reason="Updated", message=f"step {index}")
        queued_in = time.monotonic() - started
        assert sender.pending == 3
        # three Events take 1.2 s to send at 0.4 s each; queueing them waited for none
        assert queued_in < 0.4, queued_in
        assert wait_until(lambda: sender.pending == 0, timeout=30)
    assert sender.dropped == 0
    assert _messages(client, ns, "quick") == ["step 0", "step 1", "step 2"]
    assert sender.close(1.0)


def test_a_full_queue_drops_and_counts_and_close_sends_what_is_queued(
    kube_api: Any, client: KubernetesClient, ns: str
) -> None:
    parent = _parent(client, ns, "burst")
    sender = EventSender(EventRecorder(client, component="sender-test"), capacity=2)
    with kube_api.faults(_SLOW_EVENTS):
        results = [sender.record(parent, reason="Updated", message=f"change {index}")
                   for index in range(6)]
        # the thread holds at most one, the queue two: of six, three or four are dropped
        assert results.count(False) == sender.dropped
        assert 3 <= sender.dropped <= 4, results
        assert results[:2] == [True, True]
        assert sender.close(30.0)  # sends what was queued, then stops
    assert sender.pending == 0
    sent = _messages(client, ns, "burst")
    assert sent == [f"change {i}" for i, ok in enumerate(results) if ok]
    assert not sender.record(parent, reason="Updated", message="after close")
    assert sender.dropped == results.count(False) + 1
