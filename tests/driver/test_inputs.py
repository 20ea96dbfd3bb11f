"""Declared inputs in the running driver, on both servers (issue 25's acceptance).

100 Things each read their own Secret (``spec.secret``) and build a Deployment whose pod template
carries the Secret's digest (``optk.dev/inputs-digest``). Rotating one Secret reconciles that
parent once, with one PATCH (its Deployment's pod template), and nothing for the other 99;
deleting it sets ``InputMissing`` naming the Secret, with no retry; re-creating it converges at
once. A second test greps every place a value could leak for the Secret's value.

The window after the deletion is the issue's 60 s, in virtual time: the operator runs on a
``VirtualClock`` (every timer of the driver reads it: the work queue's backoff and delayed adds,
the event coalescing window, the resync timer, the heartbeat, the informers' reconnect backoff),
and :func:`_advance` moves it 60 s in steps that start at the queue's base backoff (5 ms) and
double up to 1 s, then 1 s each, letting the operator go idle after each step: a retry chain
(each retry after the last one's backoff) fires step by step as it would in real time, and the
heartbeat (every 60 s) fires inside the window and is counted. What runs on real time is only
the watch streams' server-side ``timeoutSeconds`` (300 s) and their inactivity timeout (130 s),
both past 60 s. The re-creation that follows is timed in real time.
"""

from __future__ import annotations

import base64
import gc
import io
import logging
import time
import uuid
import weakref
from pathlib import Path
from typing import Any

import pytest
import yaml

import builders as b
from builders import objects
from builders.inputs import (
    INPUTS_DIGEST_ANNOTATION,
    inputs_digest,
    kind_served,
    with_inputs_digest,
)
from reconciler import KubernetesClient, NotFoundError, Reporting
from reconciler._commands.plans import plan_command
from reconciler._driver.operators import Operator
from reconciler._driver.runtime import OperatorRuntime
from reconciler.testing import VirtualClock, wait_idle
from tests.driver.conftest import child_data, make_operator, running, thing, wait_until
from tests.driver.test_watch_path import _widget_crd

pytestmark = pytest.mark.both_servers

PARENTS = 100
WINDOW = 60.0
SECRET_VALUE = "s3cr3t-VALUE-never-logged"


def _secret_ref(parent: dict[str, Any]) -> b.ObjectRef:
    return b.ObjectRef(api_version="v1", kind="Secret", name=parent["spec"]["secret"],
                       namespace=parent["metadata"]["namespace"])


def declare(parent: dict[str, Any]) -> list[b.ObjectRef]:
    """The one input of a Thing: the Secret its spec names."""
    return [_secret_ref(parent)]


def build(parent: dict[str, Any], inputs: b.Inputs) -> list[b.ResourceBuilder]:
    """A Deployment rolled by its Secret's digest, and a ConfigMap that reads no input."""
    ref = _secret_ref(parent)
    name = parent["metadata"]["name"]

    @b.resource_builder
    def workload(parent: dict[str, Any]) -> dict[str, Any]:
        inputs.require(ref)  # InputMissing: only this child waits
        sts = objects.deployment(
            metadata={"name": f"{name}-app"}, selector_labels={"app": name},
            containers=[objects.container(name="app", image="registry.k8s.io/pause:3.9")],
            replicas=0)
        return with_inputs_digest(sts, inputs_digest(inputs, [ref]))

    @b.resource_builder
    def settings(parent: dict[str, Any]) -> dict[str, Any]:
        return objects.config_map(metadata={"name": f"{name}-cfg"}, data={"v": "1"})

    return [workload(parent), settings(parent)]


def _secret(ns: str, name: str, value: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns},
            "data": {"password": base64.b64encode(value.encode()).decode()}}


def _digest(client: KubernetesClient, ns: str, name: str) -> str | None:
    try:
        dep = client.get("apps/v1", "Deployment", f"{name}-app", namespace=ns)
    except NotFoundError:
        return None
    return str(dep["spec"]["template"]["metadata"].get("annotations", {})
               .get(INPUTS_DIGEST_ANNOTATION))


def _reconciled(client: KubernetesClient, ns: str, name: str) -> dict[str, Any]:
    status = client.get(thing(ns, name)["apiVersion"], "Thing", name, namespace=ns).get(
        "status") or {}
    return {c["type"]: c for c in status.get("conditions") or ()}.get("Reconciled") or {}


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {v: n - before.get(v, 0) for v, n in after.items() if n - before.get(v, 0)}


def _settle(runtime: OperatorRuntime) -> None:
    time.sleep(0.3)
    assert wait_idle(runtime, 30, settle=0.3)


def _advance(clock: VirtualClock, runtime: OperatorRuntime, seconds: float, *,
             first: float = 0.005) -> int:
    """Move ``clock`` ``seconds`` forward in steps (``first``, doubling up to 1 s, then 1 s),
    the operator idle after each; how many steps."""
    step, moved, steps = first, 0.0, 0
    while moved < seconds and steps < 200:
        step = min(step, seconds - moved)
        clock.advance(step)
        moved, steps = moved + step, steps + 1
        time.sleep(0.01)  # the threads the advance woke look at their deadlines
        assert wait_idle(runtime, 30, settle=0.02), (moved, runtime.stats)
        step = min(step * 2, 1.0)
    return steps


def test_one_rotated_secret_among_100_reconciles_one_parent_with_one_patch(
    client: KubernetesClient, kube_api: Any, kube_api_name: str, ns: str
) -> None:
    operator = make_operator(ns, build=build, inputs=declare)
    for i in range(PARENTS):
        client.create(_secret(ns, f"s{i}", f"{SECRET_VALUE}-{i}"))
    clock = VirtualClock()
    with running(operator, client, clock=clock) as runtime:
        for i in range(PARENTS):
            client.create(thing(ns, f"p{i}") | {
                "spec": {"value": "1", "secret": f"s{i}"}})
        assert wait_until(lambda: len(runtime.stats.reconciles) >= PARENTS, 60), (
            runtime.stats.reconciles)
        assert wait_until(lambda: all(_reconciled(client, ns, f"p{i}").get("status") == "True"
                                      for i in range(PARENTS)), 60), _reconciled(client, ns, "p0")
        _settle(runtime)
        assert runtime.inputs is not None
        assert runtime.inputs.scopes == [("v1", "Secret", ns, "")]
        old = _digest(client, ns, "p7")
        reconciles = dict(runtime.stats.reconciles)
        before = kube_api.request_counts()

        # Rotate p7's Secret: one reconcile of p7, one PATCH (and the test's own PATCH).
        client.patch("v1", "Secret", "s7", {"stringData": {"password": "rotated"}},
                     patch_type="application/merge-patch+json", namespace=ns)
        # (no read of the test's own while the requests are counted: waits on the runtime)
        assert wait_until(lambda: runtime.stats.reconciles[(ns, "p7")] > reconciles[(ns, "p7")])
        _settle(runtime)
        spent = _delta(before, kube_api.request_counts())
        assert spent == {"patch": 2}, spent  # the test's rotation and the Deployment's patch
        assert _digest(client, ns, "p7") != old
        changed = {k: n - reconciles.get(k, 0) for k, n in runtime.stats.reconciles.items()
                   if n != reconciles.get(k, 0)}
        assert changed == {(ns, "p7"): 1}, changed
        assert runtime.stats.triggers["input"] >= 1

        # A Secret nobody reads triggers nothing.
        triggered = runtime.inputs.triggered
        client.create(_secret(ns, "unread", "x"))
        time.sleep(0.5)
        assert runtime.inputs.triggered == triggered

        # Delete it: InputMissing naming the Secret, and no retry in the next 60 s (virtual).
        before = kube_api.request_counts()
        count = runtime.stats.reconciles[(ns, "p7")]
        beats = runtime.stats.heartbeats
        client.delete("v1", "Secret", "s7", namespace=ns)
        assert wait_until(lambda: runtime.stats.reconciles[(ns, "p7")] == count + 1)
        started = clock.monotonic()
        _advance(clock, runtime, WINDOW)
        assert clock.monotonic() - started >= WINDOW
        _settle(runtime)
        spent = _delta(before, kube_api.request_counts())
        assert sum(spent.values()) <= 1 + 3, spent  # the test's DELETE, then at most 3
        assert runtime.stats.reconciles[(ns, "p7")] == count + 1  # once, not retried
        assert runtime.stats.heartbeats > beats  # the window held the 60 s timers
        condition = _reconciled(client, ns, "p7")
        assert condition.get("reason") == "InputMissing", condition
        assert "Secret.v1 " + f"{ns}/s7" in condition["message"], condition
        assert _digest(client, ns, "p7") is not None  # the Deployment was left as it was
        assert client.get("v1", "ConfigMap", "p7-cfg", namespace=ns)  # the rest converged

        # Re-create it: converged within a second.
        started = time.monotonic()
        client.create(_secret(ns, "s7", "again"))
        assert wait_until(lambda: _reconciled(client, ns, "p7").get("status") == "True", 10)
        took = time.monotonic() - started
        assert took < 1.0, (kube_api_name, took)


PLAN_OPERATOR = Operator(api_version=thing("", "")["apiVersion"], kind="Thing", build=build,
                         inputs=declare, name="inputs-plan")
"""What ``optk plan`` loads (``tests.driver.test_inputs:PLAN_OPERATOR``)."""


def test_the_secret_value_appears_nowhere(
    client: KubernetesClient, kube_api: Any, ns: str, caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    caplog.set_level(logging.DEBUG)
    operator = make_operator(ns, build=build, inputs=declare, reporting=Reporting(events=True))
    client.create(_secret(ns, "s", SECRET_VALUE))
    with running(operator, client) as runtime:
        client.create(thing(ns, "p") | {"spec": {"value": "1", "secret": "s"}})
        assert wait_until(lambda: _reconciled(client, ns, "p").get("status") == "True", 20)
        client.delete("v1", "Secret", "s", namespace=ns)
        assert wait_until(lambda: _reconciled(client, ns, "p").get("reason") == "InputMissing")
        _settle(runtime)
        encoded = base64.b64encode(SECRET_VALUE.encode()).decode()
        parent = client.get(thing(ns, "p")["apiVersion"], "Thing", "p", namespace=ns)
        events = client.list("v1", "Event", namespace=ns).get("items") or []
        children = [client.get("apps/v1", "Deployment", "p-app", namespace=ns),
                    client.get("v1", "ConfigMap", "p-cfg", namespace=ns)]
        assert events, "the operator recorded no Event to look at"
    # The operator stopped, the Secret comes back with another value: the plan of p patches
    # its Deployment's digest (shown with -v), and nothing of the value.
    client.create(_secret(ns, "s", SECRET_VALUE + "-2"))
    parent_file = tmp_path / "p.yaml"
    parent_file.write_text(yaml.safe_dump(thing(ns, "p") | {"spec": {"value": "1", "secret": "s"}}))
    plan = io.StringIO()
    plan_command("tests.driver.test_inputs:PLAN_OPERATOR", files=[str(parent_file)],
                 kubeconfig=str(kube_api.kubeconfig_path), show_unchanged=True, out=plan)
    assert "inputs-digest" in plan.getvalue(), plan.getvalue()
    for where, text in [("logs", caplog.text), ("optk plan -v", plan.getvalue()),
                        ("status", repr(parent.get("status"))),
                        ("parent annotations", repr(parent["metadata"].get("annotations"))),
                        ("events", repr(events)), ("children", repr(children))]:
        assert SECRET_VALUE not in text, where
        assert encoded not in text, where


def test_a_kind_served_input_reconciles_its_readers_when_the_crd_comes_and_goes(
    client: KubernetesClient, ns: str
) -> None:
    group = f"w{uuid.uuid4().hex[:8]}.optk.dev"
    served = kind_served(f"{group}/v1", plural="widgets")

    def build_served(parent: dict[str, Any], inputs: b.Inputs) -> list[b.ResourceBuilder]:
        @b.resource_builder
        def cfg(parent: dict[str, Any]) -> dict[str, Any]:
            return objects.config_map(metadata={"name": f"{parent['metadata']['name']}-cfg"},
                                      data={"served": str(inputs.established(served))})
        return [cfg(parent)]

    operator = make_operator(ns, build=build_served, inputs=lambda parent: [served])
    with running(operator, client) as runtime:
        client.create(thing(ns, "a"))
        assert wait_until(lambda: child_data(client, ns, "a") == {"served": "False"})
        try:
            client.create(_widget_crd(group))  # no on_start hook, no resync_all: the input
            assert wait_until(lambda: child_data(client, ns, "a") == {"served": "True"}, 15)
            # One informer for that CRD by name: the others (the Things' at least) not cached.
            crds = ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", served.name)
            assert runtime.inputs is not None
            assert runtime.inputs.scopes == [crds]
            informer = runtime.inputs.informer(*crds)
            assert informer is not None
            assert informer.cache.keys() == [("", served.name)]
        finally:
            client.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                          f"widgets.{group}")
        assert wait_until(lambda: child_data(client, ns, "a") == {"served": "False"}, 15)
        assert runtime.stats.triggers["input"] >= 2


def _declare_kind(parent: dict[str, Any]) -> list[b.ObjectRef]:
    """The one input of a Thing: ``spec.input`` of kind ``spec.kind``."""
    spec = parent["spec"]
    return [b.ObjectRef(api_version="v1", kind=spec["kind"], name=spec["input"],
                        namespace=parent["metadata"]["namespace"])]


def _build_found(parent: dict[str, Any], inputs: b.Inputs) -> list[b.ResourceBuilder]:
    found = str(len(inputs))

    @b.resource_builder
    def cfg(parent: dict[str, Any]) -> dict[str, Any]:
        return objects.config_map(metadata={"name": f"{parent['metadata']['name']}-cfg"},
                                  data={"found": found, "kind": parent["spec"]["kind"]})

    return [cfg(parent)]


def test_an_input_informer_stops_when_no_parent_reads_its_kind_and_namespace(
    client: KubernetesClient, kube_api: Any, ns: str
) -> None:
    client.create(_secret(ns, "s", "x"))
    client.create({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "c", "namespace": ns}, "data": {}})
    operator = make_operator(ns, build=_build_found, inputs=_declare_kind)
    watches = getattr(kube_api, "active_watches", None)  # the embedded server counts streams
    with running(operator, client) as runtime:
        inputs = runtime.inputs
        assert inputs is not None
        for name in ("p", "q"):
            client.create(thing(ns, name) | {"spec": {"kind": "Secret", "input": "s"}})
        assert wait_until(lambda: all(
            child_data(client, ns, n) == {"found": "1", "kind": "Secret"} for n in ("p", "q")))
        secrets = inputs.informer("v1", "Secret", ns)
        assert secrets is not None
        assert inputs.scopes == [("v1", "Secret", ns, "")]

        # p reads a ConfigMap now: the Secret informer stays for q.
        client.patch(thing(ns, "p")["apiVersion"], "Thing", "p",
                     {"spec": {"kind": "ConfigMap", "input": "c"}},
                     patch_type="application/merge-patch+json", namespace=ns)
        assert wait_until(lambda: child_data(client, ns, "p") == {"found": "1",
                                                                  "kind": "ConfigMap"})
        _settle(runtime)
        assert inputs.scopes == [("v1", "ConfigMap", ns, ""), ("v1", "Secret", ns, "")]
        open_before = watches() if watches is not None else 0

        # q goes: nobody reads Secrets; their informer stops, its watch closes, it is freed.
        client.delete(thing(ns, "q")["apiVersion"], "Thing", "q", namespace=ns)
        assert wait_until(lambda: inputs.scopes == [("v1", "ConfigMap", ns, "")]), (
            inputs.scopes)
        assert inputs.released == 1
        assert secrets.stopped
        if watches is not None:
            assert wait_until(lambda: watches() == open_before - 1), (watches(), open_before)
        freed = weakref.ref(secrets)
        del secrets
        assert wait_until(lambda: gc.collect() >= 0 and freed() is None), gc.get_referrers(
            freed())

        # p's references change to a Secret again: a new informer; then p goes too.
        client.patch(thing(ns, "p")["apiVersion"], "Thing", "p",
                     {"spec": {"kind": "Secret", "input": "s"}},
                     patch_type="application/merge-patch+json", namespace=ns)
        assert wait_until(lambda: inputs.scopes == [("v1", "Secret", ns, "")]), inputs.scopes
        assert inputs.released == 2  # the ConfigMap informer
        client.delete(thing(ns, "p")["apiVersion"], "Thing", "p", namespace=ns)
        assert wait_until(lambda: inputs.scopes == []), inputs.scopes
        assert inputs.released == 3
        _settle(runtime)
        assert runtime.stats.triggers["input"] == 0  # nothing read changed meanwhile
