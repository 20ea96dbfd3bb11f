"""``make demo``: the Thanos operator end to end against the embedded API server, as a check.

``python -m examples.thanos.demo [--timeout SECONDS] [--json] [--verbose] [--real]`` starts an
``EmbeddedApiServer`` (with ``--real``: a ``reconciler.envtest.ControlPlane``, the real
kube-apiserver and garbage collector, binaries from ``OPTK_KUBE_ASSETS``), starts the operator in
this process (which installs the Thanos CRD), applies two ``Thanos`` parents and then drives the
cluster through DESIGN.md section 8: the children converge; drift (a deleted Service, a hand-scaled
Deployment, a removed label) is repaired; a component is switched off and on; the ServiceMonitor CRD
appears and ServiceMonitors follow; a forced resync of every parent in the steady state writes
nothing; a deleted parent's children are garbage-collected. Each step waits, with a bound, until the
cluster holds exactly what the builders say (``objectmatcher.calculate_patch`` finds nothing to
change), and prints a timestamped line. The summary counts objects, reconciles and API writes (the
server's ``request_counts()``). The exit code is 0 only when every step converged and the
steady-state resync wrote nothing, so the demo is also a test (``tests/examples/test_demo.py``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import attrs
import yaml

from builders import Inputs, run_builders
from builders.names import INSTANCE_LABEL, MANAGED_BY_LABEL
from examples.thanos import _view
from examples.thanos import builders as thanos
from examples.thanos.crds import (
    API_VERSION,
    API_VERSION_2,
    KIND,
    SERVICE_MONITOR_CRD,
    THANOS_VERSIONED_CRD,
    THANOS_VERSIONS,
)
from examples.thanos.operator import start_operator
from objectmatcher import MERGE_PATCH, calculate_patch
from reconciler import ApiError, KubernetesClient, NotFoundError, OperatorRuntime
from reconciler.embedded import EmbeddedApiServer
from reconciler.envtest import ControlPlane
from reconciler.testing import make_workloads_available, wait_idle, wait_synced
from reconciler.webhooks import (
    WebhookCertificates,
    WebhookEndpoint,
    WebhookServer,
    with_conversion_webhook,
)

NAMESPACE = "demo"
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
"""The verbs of ``request_counts()`` that change the cluster."""

SAMPLES_FILE = Path(__file__).with_name("samples.yaml")

SAMPLES: tuple[dict[str, Any], ...] = tuple(
    doc for doc in yaml.safe_load_all(SAMPLES_FILE.read_text()) if doc
)
"""The sample parents of ``samples.yaml``: every component of ``observatory``, only Query for
``edge``."""


@attrs.frozen(kw_only=True)
class Step:
    """One step of the demo: whether the cluster converged within the bound, and how fast."""

    name: str
    converged: bool
    seconds: float
    detail: str


@attrs.frozen(kw_only=True)
class Summary:
    """What the demo did and found; ``ok`` is what its exit code reports."""

    steps: tuple[Step, ...]
    objects: int
    """Objects the server stores at the end."""
    reconciles: int
    """Parent reconciles the operator ran."""
    triggers: Mapping[str, int] = attrs.field(factory=dict)
    """What queued those reconciles, by cause (``OperatorRuntime.triggers()``)."""
    operator_writes: int
    """Writes the operator's reconciles reported (children, status, Events)."""
    api_requests: Mapping[str, int]
    """The server's ``request_counts()`` at the end (everyone's requests, by verb)."""
    steady_state_reconciles: int
    """Reconciles run by the forced resync of every parent in the steady state."""
    steady_state_writes: int
    """Writes the server saw during that resync (must be zero)."""
    seconds: float

    @property
    def api_writes(self) -> int:
        """Writes of every client (the demo's own applies and drift included)."""
        return sum(self.api_requests.get(verb, 0) for verb in WRITE_VERBS)

    @property
    def ok(self) -> bool:
        """Every step converged and the steady-state resync wrote nothing."""
        return (
            bool(self.steps)
            and all(step.converged for step in self.steps)
            and self.steady_state_reconciles > 0
            and self.steady_state_writes == 0
        )

    def to_json(self) -> dict[str, Any]:
        """The summary as a JSON-shaped dict (``--json`` prints it as the last line)."""
        return {
            "ok": self.ok,
            "steps": [attrs.asdict(step) for step in self.steps],
            "objects": self.objects,
            "reconciles": self.reconciles,
            "triggers": dict(self.triggers),
            "operator_writes": self.operator_writes,
            "api_writes": self.api_writes,
            "api_requests": dict(self.api_requests),
            "steady_state_reconciles": self.steady_state_reconciles,
            "steady_state_writes": self.steady_state_writes,
            "seconds": round(self.seconds, 3),
        }


Server = EmbeddedApiServer | ControlPlane
"""The servers the demo runs on: the embedded one, or a real control plane (``--real``)."""


class DemoFailedError(AssertionError):
    """A step that did not converge within its bound (the demo stops there)."""


Check = Callable[[], tuple[bool, str]]


class Demo:
    """The demo's state: the server, the operator and the progress it prints."""

    def __init__(self, server: Server, *, timeout: float, out: TextIO) -> None:
        self.server = server
        self.client = KubernetesClient(server.api_client())
        self.timeout = timeout
        self.out = out
        self.started = time.monotonic()
        self.steps: list[Step] = []
        self.service_monitors = False
        self.runtime: OperatorRuntime | None = None
        self.seen_events: dict[str, int] = {}
        self.view: _view.View = _view.PlainView(out)  # run_demo picks the live one on a terminal

    # --- output and waiting ------------------------------------------------------------------

    def say(self, message: str) -> None:
        """One timestamped progress line (wall clock, then seconds since the start)."""
        now = datetime.now(UTC).strftime("%H:%M:%S.%f")[:-3]
        self.view.line(f"{now} +{time.monotonic() - self.started:6.2f}s  {message}")

    def step(self, name: str, check: Check, *, events: bool = True) -> Step:
        """Wait until ``check`` passes (or the timeout), record and print the step (and, with
        ``events``, the Events the operator recorded meanwhile)."""
        began = time.monotonic()
        self.view.step(name)
        converged, detail = check()
        while not converged and time.monotonic() - began < self.timeout:
            time.sleep(0.05)
            converged, detail = check()
        result = Step(name=name, converged=converged, seconds=round(time.monotonic() - began, 3),
                      detail=detail)
        self.steps.append(result)
        self.view.done(name, result.seconds, converged)
        mark = "ok  " if converged else "FAIL"
        self.say(f"  {mark} {name}: {detail} ({result.seconds:.2f}s)")
        if not converged:
            raise DemoFailedError(f"step {name!r} did not converge in {self.timeout}s: {detail}")
        if events:
            self.report_events()
        return result

    def report_events(self) -> None:
        """Print the Events the operator recorded on its parents since the last call."""
        if self.runtime is not None:
            wait_idle(self.runtime, 2.0, settle=0.05)  # its Events follow the children's writes
        events = self.client.list("v1", "Event", namespace=NAMESPACE).get("items", [])
        for event in sorted(events, key=lambda e: int(e["metadata"]["resourceVersion"])):
            uid, count = event["metadata"]["uid"], int(event.get("count") or 1)
            if self.seen_events.get(uid) == count:
                continue
            self.seen_events[uid] = count
            message = str(event.get("message", ""))
            self.view.event(message)
            message = message if len(message) <= 110 else message[:107] + "..."
            self.say(f"        event on {event['involvedObject']['name']}: {message}")

    # --- reading the cluster -----------------------------------------------------------------

    def live(self, api_version: str, kind: str, name: str) -> dict[str, Any] | None:
        """The live object, or None when it (or its kind) is missing."""
        try:
            return self.client.get(api_version, kind, name, namespace=NAMESPACE)
        except NotFoundError:
            return None

    def parent(self, name: str) -> dict[str, Any] | None:
        """The live parent ``name``."""
        return self.live(API_VERSION, KIND, name)

    def children(self, api_version: str, kind: str, name: str) -> list[dict[str, Any]]:
        """Objects of one kind labelled as children of parent ``name`` (none if not served)."""
        if not self.client.is_served(api_version, kind):
            return []
        selector = f"{INSTANCE_LABEL}={name},{MANAGED_BY_LABEL}={thanos.OPERATOR_NAME}"
        found = self.client.list(api_version, kind, namespace=NAMESPACE, label_selector=selector)
        return list(found.get("items", []))

    def inputs_of(self, parent: Mapping[str, Any]) -> Inputs:
        """The parent's declared inputs as the cluster holds them now (one GET each)."""
        found, missing = {}, []
        for ref in thanos.declared_inputs(parent):
            try:
                found[ref] = self.client.get(ref.api_version, ref.kind, ref.name,
                                             namespace=ref.namespace)
            except NotFoundError:
                missing.append(ref)
        return Inputs(found, missing=missing)

    def converged(self, name: str) -> Check:
        """A check: parent ``name`` is Ready for its generation and every child is as built."""

        def check() -> tuple[bool, str]:
            parent = self.parent(name)
            if parent is None:
                return False, f"{name} not found"
            self.kubelet(name)
            children = run_builders(
                thanos.build_with_inputs(parent, self.inputs_of(parent)), parent=parent
            )
            pending: list[str] = []
            present: Counter[str] = Counter()
            for desired, state in children:
                meta = desired["metadata"]
                live = self.live(desired["apiVersion"], desired["kind"], meta["name"])
                label = f"{desired['kind']} {meta['name']}"
                if state.is_absent:
                    if live is not None and not live["metadata"].get("deletionTimestamp"):
                        pending.append(f"{label} still exists")
                elif live is None:
                    pending.append(f"{label} missing")
                elif not calculate_patch(live, desired).is_empty:
                    pending.append(f"{label} differs")
                else:
                    present[desired["kind"]] += 1
            if not _ready(parent):
                pending.append(f"{name} not Ready for generation "
                               f"{parent['metadata'].get('generation')}")
            if pending:
                return False, "; ".join(pending)
            kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(present.items()))
            return True, f"{sum(present.values())} children of {name} as built ({kinds})"

        return check

    def kubelet(self, name: str) -> None:
        """No kubelet runs: the workloads of parent ``name`` are made available (see
        :func:`kubelet`)."""
        kubelet(self.client, name, namespace=NAMESPACE)

    def collected(self, name: str, kinds: Sequence[tuple[str, str]]) -> Check:
        """A check: nothing labelled as a child of parent ``name`` is left."""

        def check() -> tuple[bool, str]:
            left = [
                f"{item['kind']} {item['metadata']['name']}"
                for api_version, kind in kinds
                for item in self.children(api_version, kind, name)
            ]
            if self.parent(name) is not None:
                left.append(f"{KIND} {name}")
            if left:
                return False, f"still there: {', '.join(left)}"
            return True, f"{name} and all its children are gone"

        return check

    # --- writing (the demo's own writes, as a user or another controller would) --------------

    def merge_patch(self, api_version: str, kind: str, name: str, patch: Mapping[str, Any]) -> None:
        """A JSON merge patch, as ``kubectl patch --type merge`` sends it."""
        self.client.patch(api_version, kind, name, patch, patch_type=MERGE_PATCH,
                          namespace=NAMESPACE)


def _ready(parent: Mapping[str, Any]) -> bool:
    generation = parent["metadata"].get("generation")
    for condition in (parent.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return bool(
                condition.get("status") == "True"
                and condition.get("observedGeneration", generation) == generation
            )
    return False


def kubelet(client: KubernetesClient, name: str, *, namespace: str) -> list[str]:
    """No kubelet runs: the workloads of parent ``name`` in ``namespace`` that are not available
    for their generation are made so by status patches, as a kubelet would (the query frontend
    waits for the query Deployment to be Available); returns the ones patched."""
    selector = f"{INSTANCE_LABEL}={name},{MANAGED_BY_LABEL}={thanos.OPERATOR_NAME}"
    return make_workloads_available(client, namespace, label_selector=selector)

CHILD_KINDS = (
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("v1", "Service"),
    ("networking.k8s.io/v1", "Ingress"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
)


def _script(demo: Demo) -> tuple[int, int]:
    """The demo's steps; returns the steady-state resync's reconciles and writes."""
    client = demo.client
    runtime = demo.runtime
    assert runtime is not None
    demo.say("1. apply the sample parents")
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    for sample in SAMPLES:
        secret = thanos.object_storage(sample)  # the store gateway's declared input
        if secret is not None:
            client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {
                "name": secret.name, "namespace": NAMESPACE},
                "stringData": {"objstore.yml": "type: FILESYSTEM"}})
            demo.say(f"   created Secret {NAMESPACE}/{secret.name} (the store gateway's input)")
        client.create(sample)
        demo.say(f"   created {KIND} {NAMESPACE}/{sample['metadata']['name']} "
                 f"with {', '.join(k for k in sample['spec'] if k in _BLOCKS)}")
    for sample in SAMPLES:
        name = sample["metadata"]["name"]
        demo.step(f"converge {name}", demo.converged(name))
        live = demo.parent(name) or sample
        demo.say(f"   {name}: " + ", ".join(
            f"{obj['kind']} {obj['metadata']['name']}"
            for obj, state in run_builders(thanos.build(live), parent=live)
            if state.is_present
        ))

    demo.say("   optk trace thanos/edge (its children, their health, what it waits for):")
    for line in _view.trace_lines("edge", namespace=NAMESPACE,
                                  kubeconfig=str(demo.server.kubeconfig_path)):
        demo.say(f"     {line}")

    demo.say("2. drift: someone else changes the children")
    service = demo.live("v1", "Service", "observatory-query")
    assert service is not None
    client.delete("v1", "Service", "observatory-query", namespace=NAMESPACE)
    demo.say("   deleted Service observatory-query")
    demo.step("recreate the deleted Service", _all(
        demo.converged("observatory"),
        _changed_uid(demo, "v1", "Service", "observatory-query", service["metadata"]["uid"]),
    ))
    demo.merge_patch("apps/v1", "Deployment", "observatory-query", {"spec": {"replicas": 5}})
    demo.say("   scaled Deployment observatory-query to 5 replicas by hand")
    demo.step("scale the Deployment back to 2", demo.converged("observatory"))
    demo.merge_patch("apps/v1", "StatefulSet", "observatory-store-gateway",
                     {"metadata": {"labels": {"app.kubernetes.io/component": None}}})
    demo.say("   removed label app.kubernetes.io/component of StatefulSet "
             "observatory-store-gateway")
    demo.step("restore the label", demo.converged("observatory"))

    demo.say("3. switch the ruler off and on again")
    live = demo.parent("observatory") or {}
    changed = {**live, "spec": {k: v for k, v in (live.get("spec") or {}).items() if k != "rule"}}
    demo.say("   optk plan for observatory without spec.rule (before applying it):")
    for line in _view.plan_lines(changed, kubeconfig=str(demo.server.kubeconfig_path)):
        demo.say(f"     {line}")
    demo.merge_patch(API_VERSION, KIND, "observatory", {"spec": {"rule": None}})
    demo.say("   removed spec.rule of observatory")
    demo.step("delete the ruler's children", demo.converged("observatory"))
    demo.merge_patch(API_VERSION, KIND, "observatory", {"spec": {"rule": {"replicas": 1}}})
    demo.say("   set spec.rule of observatory")
    demo.step("create the ruler's children", demo.converged("observatory"))

    demo.say("4. the ServiceMonitor CRD appears")
    client.create(SERVICE_MONITOR_CRD)
    demo.service_monitors = True
    demo.say(f"   created CustomResourceDefinition {SERVICE_MONITOR_CRD['metadata']['name']}")
    if isinstance(demo.server, ControlPlane) and demo.server.has_controller_manager:
        # the real garbage collector learns new kinds (Thanos, ServiceMonitor) only at start
        # and on a ~30 s rescan: a restart makes step 6's collection prompt
        demo.server.restart_controller_manager()
        demo.say("   restarted kube-controller-manager: its garbage collector knows the new kinds")
    elif isinstance(demo.server, ControlPlane):
        demo.say("   no kube-controller-manager in the kube assets: no garbage collector, so "
                 "step 6 cannot converge (docs/envtest.md)")
    for sample in SAMPLES:
        demo.step(f"add ServiceMonitors to {sample['metadata']['name']}",
                  demo.converged(sample["metadata"]["name"]))

    demo.say("5. steady state: resync every parent and count writes")
    if not wait_idle(runtime, demo.timeout, settle=0.3):
        raise DemoFailedError("the operator did not go idle before the steady-state resync")
    before_reconciles = runtime.stats.total
    before_beats = runtime.stats.heartbeats
    before = demo.server.request_counts()
    queued = runtime.resync_all()
    demo.step("resync every parent", _resynced(runtime, before_reconciles + queued, queued),
              events=False)
    after = demo.server.request_counts()
    # the operator's heartbeat (one PUT of its Lease a minute) is a sign of life, not a reconcile
    beats = runtime.stats.heartbeats - before_beats
    writes = sum(after.get(v, 0) - before.get(v, 0) for v in WRITE_VERBS) - beats
    reconciles = runtime.stats.total - before_reconciles
    demo.say(f"   {reconciles} reconciles, {writes} writes "
             f"(reads: {after.get('get', 0) - before.get('get', 0)} get, "
             f"{after.get('list', 0) - before.get('list', 0)} list)")

    demo.say("6. delete a parent: its children are garbage-collected")
    client.delete(API_VERSION, KIND, "observatory", namespace=NAMESPACE)
    demo.say(f"   deleted {KIND} {NAMESPACE}/observatory")
    demo.step("collect observatory's children", demo.collected("observatory", CHILD_KINDS))
    demo.step("edge is untouched", demo.converged("edge"))
    _second_version(demo)
    return reconciles, writes


def _second_version(demo: Demo) -> None:
    """Step 7: the CRD gains v1alpha2 (the new storage version), converted by the operator's
    webhook on 127.0.0.1; the same parent is read at both versions."""
    demo.say("7. a second API version: v1alpha2, through the operator's conversion webhook")
    certificates = WebhookCertificates.generate(["127.0.0.1"])
    with WebhookServer([THANOS_VERSIONS], certificates=certificates) as hooks:
        crd = with_conversion_webhook(
            THANOS_VERSIONED_CRD, WebhookEndpoint(ca_pem=certificates.ca_pem, url=hooks.url))
        name = crd["metadata"]["name"]
        live = demo.client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
        crd["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
        demo.client.replace(crd)
        demo.say(f"   replaced CRD {name}: v1alpha1 and v1alpha2 served, v1alpha2 stored, "
                 f"conversion webhook at {hooks.url}/convert")
        demo.merge_patch(API_VERSION, KIND, "edge", {"spec": {"objectStorageSecret": "objstore"}})
        demo.say("   set spec.objectStorageSecret of edge (v1alpha1; objectStorage.secretName in "
                 "v1alpha2)")
        seen: dict[str, dict[str, Any]] = {}

        def both_versions() -> tuple[bool, str]:
            client = KubernetesClient(demo.server.api_client())  # discovery as it is now
            try:
                for api_version in (API_VERSION, API_VERSION_2):
                    seen[api_version] = client.get(api_version, KIND, "edge",
                                                   namespace=NAMESPACE)
            except (ApiError, LookupError) as error:
                return False, f"not yet: {error}"
            same = len({o["metadata"]["uid"] for o in seen.values()}) == 1
            moved = (seen[API_VERSION_2]["spec"].get("objectStorage") or {}).get("secretName")
            done = same and moved == "objstore"
            return done, "one object at both versions" if done else "not converted yet"

        demo.step("read edge at v1alpha1 and v1alpha2", both_versions, events=False)
        for api_version, obj in seen.items():
            demo.say(f"   kubectl get thanoses.{api_version.partition('/')[2]}."
                     f"{api_version.partition('/')[0]} edge -o jsonpath='{{.spec}}': "
                     f"{json.dumps(obj['spec'], sort_keys=True)}")
        demo.say(f"   conversion webhook calls: {hooks.counts().get('convert', 0)}")


_BLOCKS = tuple(kind.key for kind in thanos.COMPONENTS)


def _all(*checks: Check) -> Check:
    def check() -> tuple[bool, str]:
        results = [c() for c in checks]
        failed = [detail for ok, detail in results if not ok]
        return (not failed, "; ".join(failed) if failed else results[0][1])

    return check


def _changed_uid(demo: Demo, api_version: str, kind: str, name: str, uid: str) -> Check:
    def check() -> tuple[bool, str]:
        live = demo.live(api_version, kind, name)
        if live is None or live["metadata"]["uid"] == uid:
            return False, f"{kind} {name} not recreated yet"
        return True, f"{kind} {name} recreated"

    return check


def _resynced(runtime: OperatorRuntime, target: int, queued: int) -> Check:
    def check() -> tuple[bool, str]:
        done = runtime.stats.total >= target and wait_idle(runtime, 0.5, settle=0.2)
        return done, f"{queued} parents queued, {runtime.stats.total} reconciles in all"

    return check


def _object_count(demo: Demo) -> int:
    """Objects the server stores: all of them on the embedded server; on a real control plane
    (which holds its own system objects) those of the demo's kinds in its namespace."""
    if isinstance(demo.server, EmbeddedApiServer):
        return demo.server.object_count()
    kinds = (*CHILD_KINDS, (API_VERSION, KIND), ("v1", "Secret"), ("v1", "Event"))
    return sum(len(demo.client.list(api_version, kind, namespace=NAMESPACE).get("items", []))
               for api_version, kind in kinds if demo.client.is_served(api_version, kind))


def run_demo(*, timeout: float = 20.0, out: TextIO | None = None, real: bool = False,
             assets: str | None = None, keep_running: bool = False) -> Summary:
    """Run the whole demo; returns its summary (``ok`` False if a step failed to converge).

    ``real`` runs it on a ``reconciler.envtest.ControlPlane`` (binaries from ``assets``, else
    ``OPTK_KUBE_ASSETS``, else ``KUBEBUILDER_ASSETS``) instead of an ``EmbeddedApiServer``: the
    same steps and bounds (step 6 needs kube-controller-manager's garbage collector).
    ``keep_running`` leaves the server and the operator up at the end until Ctrl-C/SIGTERM."""
    out = sys.stdout if out is None else out
    started = time.monotonic()
    server: Server = ControlPlane(assets) if real else EmbeddedApiServer()
    with server:
        demo = Demo(server, timeout=timeout, out=out)
        demo.view = _view.make_view(out, _view.tree_snapshot(
            demo, [sample["metadata"]["name"] for sample in SAMPLES]))
        what = "real control plane" if real else "embedded API server"
        demo.say(f"{what} at {server.url} (kubeconfig {server.kubeconfig_path})")
        runtime = start_operator(demo.client)
        demo.runtime = runtime
        steady: tuple[int, int] = (0, -1)
        try:
            if not wait_synced(runtime, timeout):
                raise DemoFailedError("the operator's caches did not sync")
            demo.say(f"operator {runtime.operator.name} started; {KIND} CRD installed")
            steady = _script(demo)
            if keep_running:
                demo.view.close()
                demo.view = _view.PlainView(out)
                _view.keep_running(demo.say, url=server.url,
                                   kubeconfig=str(server.kubeconfig_path), namespace=NAMESPACE)
        except (DemoFailedError, ApiError) as error:
            demo.say(f"demo failed: {type(error).__name__}: {error}")
        finally:
            demo.view.close()
            runtime.stop(timeout=5.0)
        summary = Summary(
            steps=tuple(demo.steps),
            objects=_object_count(demo),
            reconciles=runtime.stats.total,
            triggers=runtime.triggers(),
            operator_writes=runtime.stats.writes,
            api_requests=server.request_counts(),
            steady_state_reconciles=steady[0],
            steady_state_writes=steady[1],
            seconds=time.monotonic() - started,
        )
    _print_summary(summary, out)
    return summary


def _print_summary(summary: Summary, out: TextIO) -> None:
    requests = summary.api_requests
    converged = sum(step.converged for step in summary.steps)
    lines = [
        "",
        "summary",
        f"  steps converged       {converged}/{len(summary.steps)}",
        f"  objects in the server {summary.objects}",
        f"  parent reconciles     {summary.reconciles} (queued by: "
        + ", ".join(f"{cause} {n}" for cause, n in sorted(summary.triggers.items())
                    if cause != "own-echo")
        + f"; echoes of its own writes ignored: {summary.triggers.get('own-echo', 0)})",
        f"  API writes            {summary.api_writes} ("
        + ", ".join(f"{requests.get(v, 0)} {v}" for v in WRITE_VERBS) + "); "
        f"{summary.operator_writes} by the operator",
        f"  API reads             {requests.get('get', 0)} get, {requests.get('list', 0)} list",
        f"  steady-state resync   {summary.steady_state_reconciles} reconciles, "
        f"{summary.steady_state_writes} writes",
        f"  result                {'OK' if summary.ok else 'FAILED'} in {summary.seconds:.1f}s",
    ]
    print("\n".join(part for line in lines for part in _view.fit(line)), file=out, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m examples.thanos.demo``: 0 when everything converged, 1 otherwise."""
    parser = argparse.ArgumentParser(prog="python -m examples.thanos.demo",
                                     description="the Thanos example operator end to end")
    parser.add_argument("--timeout", type=float, default=20.0,
                        help="seconds each step may take to converge (default 20)")
    parser.add_argument("--json", action="store_true",
                        help="print the summary as one JSON object on the last line")
    parser.add_argument("--verbose", action="store_true", help="show the operator's own log")
    parser.add_argument("--real", action="store_true",
                        help="run on a real control plane (kube-apiserver, etcd, "
                             "kube-controller-manager from $OPTK_KUBE_ASSETS or "
                             "$KUBEBUILDER_ASSETS)")
    parser.add_argument("--keep-running", action="store_true",
                        help="leave the API server and the operator up at the end (Ctrl-C stops)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    summary = run_demo(timeout=args.timeout, real=args.real, keep_running=args.keep_running)
    if args.json:
        print(json.dumps(summary.to_json()))
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
