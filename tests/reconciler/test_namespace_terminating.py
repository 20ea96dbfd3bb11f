"""A namespace being deleted is final for its parents (issue 11): a create refused with 403
``NamespaceTerminating`` is not retried, records no Warning Event per attempt, and the parent is
left alone until it goes with its namespace. On both servers (the embedded one empties a
namespace over time and refuses creates in it as a real one does)."""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from builders import DesiredState, ResourceBuilder
from reconciler import (
    AlreadyExistsError,
    KubernetesClient,
    NotFoundError,
    ParentReconciler,
    Reporting,
)
from reconciler._base.errors import ForbiddenError, NamespaceTerminatingError, api_error_from_status
from reconciler._driver.operators import Operator
from reconciler.testing import wait_idle, wait_synced
from tests.driver.sample_operator import THING_CRD, build

GROUP = "terminating.optk.dev"
API_VERSION = f"{GROUP}/v1"
CRD: dict[str, Any] = {**THING_CRD, "metadata": {"name": f"things.{GROUP}"},
                       "spec": {**THING_CRD["spec"], "group": GROUP}}
"""The driver tests' Thing under a group of this module's own (both may install theirs)."""

HOLD = "optk.dev/test-hold"


def _wait(predicate: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


def _gone(client: KubernetesClient, namespace: str) -> bool:
    try:
        client.get("v1", "Namespace", namespace)
    except NotFoundError:
        return True
    return False


@pytest.fixture
def kube(kube_api: Any) -> KubernetesClient:
    """A client on this test's server, with the Thing CRD served."""
    client = KubernetesClient(kube_api.api_client())
    if not client.is_served(API_VERSION, "Thing"):
        with contextlib.suppress(AlreadyExistsError):  # another module's, not yet discovered
            client.create(CRD)
        assert _wait(lambda: client.is_served(API_VERSION, "Thing"), 30)
    return client


@pytest.fixture
def doomed(kube: KubernetesClient) -> Iterator[str]:
    """A namespace of this test's own (the test deletes it); any hold is released after."""
    name = f"doomed-{uuid.uuid4().hex[:8]}"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    with contextlib.suppress(NotFoundError):
        kube.patch("v1", "ConfigMap", "hold", {"metadata": {"finalizers": None}},
                   patch_type="application/merge-patch+json", namespace=name)
    with contextlib.suppress(NotFoundError):
        kube.delete("v1", "Namespace", name)


def test_a_403_with_the_namespace_terminating_cause_is_its_own_error() -> None:
    status = {"kind": "Status", "code": 403, "reason": "Forbidden", "details": {
        "causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace"}]}}
    assert type(api_error_from_status(403, status)) is NamespaceTerminatingError
    assert type(api_error_from_status(403, {"reason": "Forbidden"})) is ForbiddenError


@pytest.mark.both_servers
def test_a_parent_in_a_terminating_namespace_is_left_alone_after_one_refusal(
    kube: KubernetesClient, doomed: str
) -> None:
    kube.create({"apiVersion": "v1", "kind": "ConfigMap",  # keeps the namespace terminating
                 "metadata": {"name": "hold", "namespace": doomed, "finalizers": [HOLD]}})
    parent = kube.create({"apiVersion": API_VERSION, "kind": "Thing",
                          "metadata": {"name": "p", "namespace": doomed},
                          "spec": {"value": "x"}})
    kube.delete("v1", "Namespace", doomed)

    def cm(name: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}

    def children(_: Any) -> list[ResourceBuilder]:
        return [lambda: (cm("p-one"), DesiredState.PRESENT),
                lambda: (cm("p-two"), DesiredState.PRESENT)]

    reconciler = ParentReconciler(kube, children, operator_name="doomed-operator")
    first = reconciler.reconcile(parent)  # the parent as last seen, deleted or not by now
    assert first.namespace_terminating
    assert not first.ok
    assert first.errors == ()  # not a failure to report
    assert [call.verb for call in first.api_calls if call.verb != "list"] == ["create"]
    again = reconciler.reconcile(parent)
    assert again.namespace_terminating
    assert again.api_calls == ()
    events = kube.list("v1", "Event", namespace=doomed)["items"]
    assert not [e for e in events if e["involvedObject"].get("name") == "p"]


def _refused_and_event_creates(kube_api: Any, namespace: str) -> tuple[int, int]:
    """403 answers and Event creates in ``namespace`` so far (real: the audit log; embedded:
    its breakdown, whose 403s and Event creates here are this test's)."""
    if not hasattr(kube_api, "request_breakdown"):
        kube_api.request_counts()  # flushes the audit log up to now
        refused = events = 0
        for line in (kube_api.kubeconfig_path.parent / "audit.log").read_text().splitlines():
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            if ref.get("namespace") != namespace or event.get("stage") != "ResponseComplete":
                continue
            if event.get("user", {}).get("username", "").startswith("system:"):
                continue
            refused += (event.get("responseStatus") or {}).get("code") == 403
            events += ref.get("resource") == "events" and event.get("verb") == "create"
        return refused, events
    breakdown = kube_api.request_breakdown()
    return (sum(n for key, n in breakdown.items() if key.code == 403),
            sum(n for key, n in breakdown.items()
                if key.resource == "events" and key.verb == "create"))


@pytest.mark.needs_controller_manager
@pytest.mark.both_servers
def test_deleting_a_namespace_under_a_running_operator_costs_few_refusals_and_no_warnings(
    kube: KubernetesClient, doomed: str, kube_api: Any, caplog: pytest.LogCaptureFixture
) -> None:
    parents = 5
    operator = Operator(
        api_version=API_VERSION, kind="Thing", namespace=doomed, build=build,
        name=f"doomed-{uuid.uuid4().hex[:6]}", reporting=Reporting(events=True),
    )
    runtime = operator.start(kube)
    try:
        assert wait_synced(runtime, 30)
        for index in range(parents):
            kube.create({"apiVersion": API_VERSION, "kind": "Thing",
                         "metadata": {"name": f"p{index}", "namespace": doomed},
                         "spec": {"value": str(index)}})
        assert _wait(lambda: len(kube.list("v1", "ConfigMap", namespace=doomed,
                                           label_selector="optk.dev/owner-uid")["items"])
                     == parents, 30)
        assert wait_idle(runtime, 10, settle=0.2)
        refused_before, events_before = _refused_and_event_creates(kube_api, doomed)
        caplog.set_level(logging.WARNING)
        kube.delete("v1", "Namespace", doomed)
        assert _wait(lambda: _gone(kube, doomed), 120)
        assert wait_idle(runtime, 10, settle=0.3)
        refused, events = _refused_and_event_creates(kube_api, doomed)
        # at most one refused create per parent, never a retry, never a Warning Event
        assert refused - refused_before <= parents
        assert events - events_before == 0
        assert sum(runtime.stats.failures.values()) == 0
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING
                    and r.name.startswith(("optk", "reconciler"))]
        assert len(warnings) <= parents, [r.getMessage() for r in warnings]
    finally:
        runtime.stop(5)


@pytest.mark.both_servers
def test_a_parent_whose_namespace_is_already_gone_is_left_alone(kube: KubernetesClient) -> None:
    gone = f"gone-{uuid.uuid4().hex[:8]}"  # never created: as after the deletion finished
    parent = {"apiVersion": API_VERSION, "kind": "Thing", "spec": {"value": "x"},
              "metadata": {"name": "p", "namespace": gone, "uid": str(uuid.uuid4())}}
    reconciler = ParentReconciler(kube, build, operator_name="gone-operator")
    result = reconciler.reconcile(parent)
    assert result.namespace_terminating
    assert result.errors == ()
    assert [call.verb for call in result.api_calls if call.verb != "list"] == ["create"]
