"""Our own parents, read by ``builders.health.health_of`` on the embedded server: Current when
converged, InProgress while a child rolls out, Failed when stalled by a ``PermanentError`` (not
retried until the parent changes); conditions of one's own beside ours; and the defects of a
failing build (the parent listed as its own child, no traceback, a garbled builder name)."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import pytest

from builders import ResourceBuilder, child_name, resource_builder
from builders.health import HealthStatus, health_of
from reconciler import KubernetesClient, ParentReconciler, PermanentError, Readiness, Reporting
from reconciler._driver.workers import types_of
from tests.driver.conftest import make_operator, running, thing, wait_until
from tests.driver.sample_operator import API_VERSION, settings


@resource_builder
def _web(parent: Any) -> dict[str, Any]:
    replicas = (parent.get("spec") or {}).get("value")
    if replicas == "even":
        raise PermanentError("spec.value must be a number of replicas", reason="BadReplicas")
    name = child_name(parent["metadata"]["name"], "web")
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}


def _build(parent: Any) -> list[ResourceBuilder]:
    return [_web(parent)]


def _status(parent: Any, children: Any) -> dict[str, Any]:
    up = any((c.get("status") or {}).get("availableReplicas") for c in children)
    return {"conditions": [{"type": "Available", "status": "True" if up else "False",
                            "reason": "WebUp" if up else "WebDown", "message": ""}]}


def _parent(client: KubernetesClient, ns: str) -> dict[str, Any]:
    return client.get(API_VERSION, "Thing", "r", namespace=ns)


def _health(client: KubernetesClient, ns: str) -> HealthStatus:
    return health_of(_parent(client, ns)).status


def _make_available(client: KubernetesClient, ns: str) -> None:
    """What the Deployment controller and the kubelet would write (no controller runs here)."""
    web = client.get("apps/v1", "Deployment", "r-web", namespace=ns)
    client.patch("apps/v1", "Deployment", "r-web", {"status": {
        "observedGeneration": web["metadata"].get("generation", 1), "replicas": 1,
        "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1,
        "conditions": [{"type": "Available", "status": "True"},
                       {"type": "Progressing", "status": "True",
                        "reason": "NewReplicaSetAvailable"}]}},
        patch_type="application/merge-patch+json", namespace=ns, subresource="status")


def test_health_of_our_parent_current_in_progress_failed(
        client: KubernetesClient, ns: str, caplog: pytest.LogCaptureFixture) -> None:
    operator = make_operator(
        ns, build=_build,
        reporting=Reporting(events=False, readiness=Readiness(recheck=0.2), status=_status,
                            condition_types=("Available",)),
    )
    with running(operator, client) as runtime:
        client.create(thing(ns, "r", value="1"))
        # a child rolling out: InProgress, Reconciling True
        assert wait_until(lambda: _health(client, ns) is HealthStatus.IN_PROGRESS
                          and "Reconciling" in _conditions(client, ns))
        conditions = _conditions(client, ns)
        assert conditions["Reconciling"]["status"] == "True"
        assert conditions["Available"]["status"] == "False"
        _make_available(client, ns)
        assert wait_until(lambda: _health(client, ns) is HealthStatus.CURRENT, timeout=15)
        assert _conditions(client, ns)["Available"]["reason"] == "WebUp"

        # a permanent error: Failed, one WARNING, no retry until the parent changes
        caplog.set_level(logging.DEBUG, logger="optk.operator")
        live = _parent(client, ns)
        client.patch(API_VERSION, "Thing", "r", {"spec": {"value": "even"}},
                     patch_type="application/merge-patch+json", namespace=ns)
        assert wait_until(lambda: _health(client, ns) is HealthStatus.FAILED, timeout=15)
        stalled = _conditions(client, ns)["Stalled"]
        assert stalled["reason"] == "BadReplicas"
        assert "spec.value must be a number of replicas" in stalled["message"]
        assert stalled["observedGeneration"] == live["metadata"]["generation"] + 1
        before = runtime.stats.reconciles.copy()
        time.sleep(1.0)  # a backoff retry would have come several times by now (5 ms, 10 ms...)
        assert runtime.stats.reconciles == before
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING
                    and "stalled" in r.getMessage()]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]

        # the parent changes: reconciled again, Current
        client.patch(API_VERSION, "Thing", "r", {"spec": {"value": "1"}},
                     patch_type="application/merge-patch+json", namespace=ns)
        assert wait_until(lambda: _health(client, ns) is HealthStatus.CURRENT, timeout=15)


def _conditions(client: KubernetesClient, ns: str) -> dict[str, Any]:
    status = _parent(client, ns).get("status") or {}
    return {c["type"]: c for c in status.get("conditions") or ()}


def _build_fails(parent: Any) -> list[ResourceBuilder]:
    raise RuntimeError("cannot build")


@resource_builder
def service(parent: Any) -> dict[str, Any]:
    return {"kind": "Service"}["image"]  # type: ignore[no-any-return]  # a KeyError


_HERE = os.path.relpath(__file__)


def _line(marker: str) -> int:
    """The line of this file that holds ``marker`` (where a test builder raises)."""
    with open(__file__, encoding="utf-8") as source:
        return next(n for n, text in enumerate(source, 1)
                    if marker in text and "_line(" not in text)


def test_a_failing_build_is_not_its_own_child_and_a_failing_builder_shows_its_traceback(
        client: KubernetesClient, ns: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="reconciler._reconcile.parents")
    parent = client.create(thing(ns, "r"))
    whole = ParentReconciler(client, _build_fails, operator_name="t").reconcile(parent)
    [error] = whole.errors
    assert (error.ref.kind, error.ref.name) == ("build", "_build_fails")
    assert types_of(whole) == set()  # no informer for the parent's own kind
    assert str(error.ref) == "build _build_fails"
    message = _conditions(client, ns)["Reconciled"]["message"]
    assert "Thing" not in message
    # Said once (issue 36: it read "build build: ..."), with where it raised, without -v.
    assert f"build function _build_fails of parent {ns}/r failed: RuntimeError: cannot " \
           f"build ({_HERE}:{_line('cannot build')})" in message, message
    assert "build _build_fails:" not in message

    partly = ParentReconciler(client, lambda p: [settings(p), service(p)],
                              operator_name="t").reconcile(_parent(client, ns))
    [error] = partly.errors
    assert str(error.ref) == "builder service"
    assert types_of(partly) == {("v1", "ConfigMap")}
    message = _conditions(client, ns)["Reconciled"]["message"]
    assert f"builder service of parent {ns}/r failed: KeyError: 'image' " \
           f"({_HERE}:{_line('# a KeyError')})" in message, message
    assert message.count("builder service") == 1, message
    assert "builder. " not in message
    traced = [r for r in caplog.records if r.exc_info and "builder service" in r.getMessage()]
    assert traced, "no traceback for the failing builder"
    assert traced[0].levelno == logging.DEBUG
    assert caplog.text.count("Traceback") >= 2  # the build's and the builder's
    assert "in service" in caplog.text  # the user's frame is in it


def test_a_skipped_child_is_not_reconciled_says_what_to_do_and_is_logged_once(
        client: KubernetesClient, ns: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="reconciler._reconcile.parents")
    client.create({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "r-cfg", "namespace": ns}, "data": {"theirs": "1"}})
    parent = client.create(thing(ns, "r"))
    reconciler = ParentReconciler(client, lambda p: [settings(p)], operator_name="t")
    first = reconciler.reconcile(parent)
    assert first.ok  # nothing to retry: a change by someone clears it
    conditions = _conditions(client, ns)
    reconciled = conditions["Reconciled"]
    assert (reconciled["status"], reconciled["reason"]) == ("False", "ChildrenSkipped")
    assert "delete the object" in reconciled["message"]
    assert "annotate it with optk.dev/last-applied" in reconciled["message"]
    assert "adopt" not in reconciled["message"]
    assert health_of(_parent(client, ns)).status is HealthStatus.FAILED  # Stalled: needs a hand
    reconciler.reconcile(_parent(client, ns))  # the same again: no new status, no new line
    skipped = [r for r in caplog.records if "skipped, not ours" in r.getMessage()]
    assert len(skipped) == 1
    assert "ConfigMap.v1" in skipped[0].getMessage()
    assert client.get("v1", "ConfigMap", "r-cfg", namespace=ns)["data"] == {"theirs": "1"}


def test_a_failing_builder_is_one_warning_line_with_where_it_raised(
        client: KubernetesClient, ns: str, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 36: the running operator's WARNING line (no ``-v``) names the builder, the parent,
    the error and the user's file and line, once."""
    caplog.set_level(logging.WARNING)
    operator = make_operator(ns, build=lambda p: [settings(p), service(p)])
    with running(operator, client):
        client.create(thing(ns, "r"))
        assert wait_until(lambda: any("reconcile failed" in r.getMessage()
                                      for r in caplog.records))
    line = next(r.getMessage() for r in caplog.records if "reconcile failed" in r.getMessage())
    assert f"(builder service of parent {ns}/r failed: KeyError: 'image' " \
           f"({_HERE}:{_line('# a KeyError')}))" in line, line
    assert line.count("builder service") == 1, line
