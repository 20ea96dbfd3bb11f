"""Values people write reach only places that bound them (issue 35, item 5), on both servers.

- ``optk.dev/ignore-fields`` naming the identity the toolkit keeps (``/metadata/ownerReferences``,
  ``/*``) is refused: the parent says so (``Stalled``, reason ``InvalidAnnotation``, naming the
  pointer), the child's owner reference is repaired all the same, and its other pointers are
  honoured; before, the child lost its owner reference while the parent said Ready.
- A malformed pointer is a permanent error naming the annotation and the pointer: ``Stalled``,
  one WARNING line, no retry in the next 60 s (before: the bare message ``'kind'``, retried 12
  times in 15 s).
- A 200 KB ``optk.dev/paused`` or ``optk.dev/policy`` value is quoted bounded: the parent's
  status, its Events and every log line stay within ``reconciler._base.text``'s limits (before:
  a 200 KB status and a 200,000-character log line).
- An ``Operator(inputs=fn)`` declaring an ``ObjectRef`` without a name stalls the parent
  (reason ``InvalidInputs``), said once, not retried (before: 12 WARNING lines in 11 s, then
  every 5 min).

The retry windows are virtual (the operator runs on a ``VirtualClock``, stepped as in
``tests/driver/test_inputs.py``).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

import builders as b
from reconciler import KubernetesClient, Reporting
from reconciler._driver.runtime import OperatorRuntime
from reconciler.testing import VirtualClock, wait_idle
from tests.driver.conftest import child_data, make_operator, running, thing, wait_until
from tests.driver.sample_operator import API_VERSION
from tests.driver.test_inputs import _advance

pytestmark = pytest.mark.both_servers

MERGE = "application/merge-patch+json"
WINDOW = 60.0
HUGE = "x" * 200_000
MESSAGE_LIMIT = 4096  # reconciler._base.text: a condition's or an Event's message
QUOTE_LIMIT = 256  # and a value quoted in one
LOG_LIMIT = MESSAGE_LIMIT + 512  # a bounded message and the line's own words


def _conditions(client: KubernetesClient, ns: str, name: str) -> dict[str, dict[str, Any]]:
    parent = client.get(API_VERSION, "Thing", name, namespace=ns)
    return {c["type"]: c for c in (parent.get("status") or {}).get("conditions") or ()}


def _annotate(client: KubernetesClient, ns: str, kind: str, name: str, key: str,
              value: str | None) -> None:
    api_version = "v1" if kind == "ConfigMap" else API_VERSION
    client.patch(api_version, kind, name, {"metadata": {"annotations": {key: value}}},
                 patch_type=MERGE, namespace=ns)


def _owners(client: KubernetesClient, ns: str, name: str) -> list[str]:
    meta = client.get("v1", "ConfigMap", name, namespace=ns)["metadata"]
    return [ref["name"] for ref in meta.get("ownerReferences") or ()]


def _stepped(clock: VirtualClock, runtime: OperatorRuntime, predicate: Any) -> bool:
    """Step ``clock`` (the queue's coalescing and backoff delays) until ``predicate`` holds:
    at most 15 virtual seconds."""
    for _ in range(150):
        if predicate():
            return True
        _advance(clock, runtime, 0.1, first=0.1)
    return bool(predicate())


def _stalled_not_retried(client: KubernetesClient, ns: str, name: str, clock: VirtualClock,
                         runtime: OperatorRuntime) -> dict[str, Any]:
    """Parent ``name``'s ``Stalled`` condition once it is True and the parent was not
    reconciled again in the next ``WINDOW`` virtual seconds."""
    assert _stepped(clock, runtime, lambda: _conditions(client, ns, name).get(
        "Stalled", {}).get("status") == "True"), _conditions(client, ns, name)
    _advance(clock, runtime, 1.0)  # the echo of the status write has come and gone
    reconciles = runtime.stats.reconciles[(ns, name)]
    _advance(clock, runtime, WINDOW)
    assert runtime.stats.reconciles[(ns, name)] == reconciles, "retried"
    return _conditions(client, ns, name)["Stalled"]


def _warnings(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.WARNING and f"/{name}]" in r.getMessage()]


def test_an_ignore_fields_pointer_into_the_identity_is_refused_and_the_identity_repaired(
        client: KubernetesClient, ns: str) -> None:
    with running(make_operator(ns), client):
        client.create(thing(ns, "own"))
        assert wait_until(lambda: child_data(client, ns, "own") == {"value": "1"})
        _annotate(client, ns, "ConfigMap", "own-cfg", "optk.dev/ignore-fields",
                  "/data/value,/metadata/ownerReferences")
        assert wait_until(lambda: _conditions(client, ns, "own").get("Stalled", {}).get(
            "status") == "True")
        client.patch("v1", "ConfigMap", "own-cfg",
                     {"metadata": {"ownerReferences": None}, "data": {"value": "by-hand"}},
                     patch_type=MERGE, namespace=ns)
        # The owner reference comes back; the field the other pointer names stays as edited.
        assert wait_until(lambda: _owners(client, ns, "own-cfg") == ["own"], 15), \
            _owners(client, ns, "own-cfg")
        assert child_data(client, ns, "own") == {"value": "by-hand"}
        conditions = _conditions(client, ns, "own")
        for type_ in ("Reconciled", "Ready", "Stalled"):
            assert conditions[type_]["reason"] == "InvalidAnnotation", conditions[type_]
            message = conditions[type_]["message"]
            assert "optk.dev/ignore-fields" in message, message
            assert "'/metadata/ownerReferences'" in message, message
            assert "owner references" in message, message
        assert conditions["Ready"]["status"] == "False"

        _annotate(client, ns, "ConfigMap", "own-cfg", "optk.dev/ignore-fields", None)
        assert wait_until(lambda: child_data(client, ns, "own") == {"value": "1"}, 15)
        assert wait_until(lambda: _conditions(client, ns, "own").get("Ready", {}).get(
            "status") == "True")
        assert _conditions(client, ns, "own")["Stalled"]["status"] == "False"


@pytest.mark.parametrize(("pointers", "named"), [
    ("/*", "'/*'"),  # reaches the identity: refused, the rest is repaired
    ("/data/value,/data/", "'/data/'"),  # malformed: nothing is written to it
    ("data/value", "'data/value'"),
    ("/data/~2", "'/data/~2'"),
])
def test_a_bad_ignore_fields_pointer_stalls_the_parent_said_once_not_retried(
        client: KubernetesClient, ns: str, caplog: pytest.LogCaptureFixture,
        pointers: str, named: str) -> None:
    caplog.set_level(logging.INFO)
    clock = VirtualClock()
    with running(make_operator(ns), client, clock=clock) as runtime:
        client.create(thing(ns, "bad"))
        assert _stepped(clock, runtime, lambda: child_data(client, ns, "bad") == {"value": "1"})
        _annotate(client, ns, "ConfigMap", "bad-cfg", "optk.dev/ignore-fields", pointers)
        stalled = _stalled_not_retried(client, ns, "bad", clock, runtime)
        assert stalled["reason"] == "InvalidAnnotation", stalled
        assert "optk.dev/ignore-fields" in stalled["message"], stalled
        assert named in stalled["message"], stalled
        warned = _warnings(caplog, "bad")
        assert len(warned) == 1, warned
        assert named in warned[0], warned


def test_a_200kb_annotation_is_quoted_bounded_in_status_events_and_logs(
        client: KubernetesClient, ns: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    operator = make_operator(ns, reporting=Reporting(events=True))
    with running(operator, client) as runtime:
        client.create(thing(ns, "paused"))
        client.create(thing(ns, "policy"))
        assert wait_until(lambda: child_data(client, ns, "paused") is not None
                          and child_data(client, ns, "policy") is not None)
        _annotate(client, ns, "Thing", "paused", "optk.dev/paused", HUGE)
        _annotate(client, ns, "ConfigMap", "policy-cfg", "optk.dev/policy", HUGE)
        assert wait_until(lambda: _conditions(client, ns, "paused").get("Reconciled", {}).get(
            "reason") == "ReconcilePaused", 15)
        assert wait_until(lambda: _conditions(client, ns, "policy").get("Stalled", {}).get(
            "status") == "True", 15), _conditions(client, ns, "policy")
        assert wait_idle(runtime, 10)
        for name, annotation in (("paused", "optk.dev/paused"), ("policy", "optk.dev/policy")):
            status = client.get(API_VERSION, "Thing", name, namespace=ns)["status"]
            assert len(json.dumps(status)) < 4 * MESSAGE_LIMIT, len(json.dumps(status))
            for condition in status["conditions"]:
                assert len(condition["message"]) <= MESSAGE_LIMIT
            message = _conditions(client, ns, name)["Reconciled"]["message"]
            assert annotation in message, message[:300]
            assert "more characters" in message, message[:300]
        assert wait_until(lambda: any(e.get("reason") == "InvalidAnnotation" for e in client.list(
            "v1", "Event", namespace=ns)["items"]), 15)
        for event in client.list("v1", "Event", namespace=ns)["items"]:
            assert len(event.get("message") or "") <= MESSAGE_LIMIT, event["reason"]
    lines = [r.getMessage() for r in caplog.records]
    assert max(len(line) for line in lines) <= LOG_LIMIT, max(len(line) for line in lines)
    assert sum(1 for line in lines if "x" * (QUOTE_LIMIT + 1) in line) == 0


def test_an_input_declared_without_a_name_stalls_the_parent_said_once_not_retried(
        client: KubernetesClient, ns: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)

    def declare(parent: dict[str, Any]) -> list[b.ObjectRef]:
        return [b.ObjectRef(api_version="v1", kind="Secret", name="", namespace=ns)]

    def build(parent: dict[str, Any], inputs: b.Inputs) -> list[b.ResourceBuilder]:
        return []

    clock = VirtualClock()
    with running(make_operator(ns, build=build, inputs=declare), client,
                 clock=clock) as runtime:
        client.create(thing(ns, "inputs"))
        stalled = _stalled_not_retried(client, ns, "inputs", clock, runtime)
        assert stalled["reason"] == "InvalidInputs", stalled
        assert "ObjectRef with a kind and a name" in stalled["message"], stalled
        warned = _warnings(caplog, "inputs")
        assert len(warned) == 1, warned
