"""Helpers for testing operators built on the toolkit: a virtual clock and waits on a runtime.

``VirtualClock`` is a ``Clock`` whose time moves only when a test calls ``advance``, so periodic
behaviour (resync every 10 h, 5-minute backoff caps, 15 s leases) is tested in milliseconds and
deterministically. ``wait_synced(runtime)`` and ``wait_idle(runtime)`` block, in real time and
bounded by a timeout, until a running ``OperatorRuntime`` has synced its caches or has nothing
queued or running. ``make_available(client, obj)`` does what a kubelet would for a Deployment,
StatefulSet or DaemonSet where none runs: its Pods' status Running and Ready (a real control
plane's controllers then make the workload available), or, with no Pods (the embedded server runs
no controllers), the workload's own status, so that readiness rules and dependencies on workloads
can be exercised; ``make_workloads_available(client, namespace)`` does it for every workload of a
namespace that is not yet Current (poll it from a wait, as a kubelet keeps reporting).
``operator_machine(operator, parents=...)`` is a Hypothesis state machine over a whole operator
with random user actions, checking at each quiet point what every operator author relies on
(docs/testing-operators.md). ``KubeApiServer`` is the protocol both test servers satisfy (the
embedded server and ``reconciler.envtest.ControlPlane``; the pytest plugin's ``kube_api`` is
either). Production code never needs these. The module is over 500 lines because
the state machine's rules and checks share the waits above and one class built from its options;
a private module of its own would import this face back (a cycle the architecture tests forbid).
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import threading
import time
import typing
from collections import abc as _abc
from typing import Any as _Any

from reconciler._base import errors as _errors
from reconciler._base.errors import AlreadyExistsError as _AlreadyExistsError
from reconciler._base.errors import NotFoundError as _NotFoundError
from reconciler._client.servers import KubeApiServer

if typing.TYPE_CHECKING:
    from reconciler._client.protocol import ClusterClient
    from reconciler._driver.runtime import OperatorRuntime

__all__ = ["KubeApiServer", "VirtualClock", "make_available", "make_workloads_available",
           "operator_machine", "wait_idle", "wait_synced"]

_WORKLOADS = (("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("apps/v1", "DaemonSet"))


def make_available(client: ClusterClient, obj: _abc.Mapping[str, _Any]) -> dict[str, _Any]:
    """Make a Deployment, StatefulSet or DaemonSet (``obj`` names it) available as a kubelet
    would where none runs; returns the workload as read before.

    With workload controllers running (a real control plane), its Pods exist: each one's status
    is patched Running and Ready, and the controllers make the workload available. Without Pods
    (the embedded server runs no controllers) the workload's own status is patched fully
    available for its current generation."""
    meta = obj.get("metadata") or {}
    api_version, kind = str(obj.get("apiVersion")), str(obj.get("kind"))
    namespace = meta.get("namespace")
    if kind not in ("Deployment", "StatefulSet", "DaemonSet"):
        raise _errors.ReconcilerUsageError(
            f"make_available: {kind} {meta.get('name')} is not a Deployment, StatefulSet or "
            f"DaemonSet")
    live = client.get(api_version, kind, meta["name"], namespace=namespace)
    labels = ((live.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    selector = ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
    pods = client.list("v1", "Pod", namespace=namespace, label_selector=selector)["items"]
    for pod in pods:
        client.patch("v1", "Pod", pod["metadata"]["name"], {"status": _ready_pod(pod)},
                     patch_type="application/merge-patch+json", namespace=namespace,
                     subresource="status")
    if pods:
        return dict(live)
    replicas = (live.get("spec") or {}).get("replicas", 1)
    status: dict[str, _Any] = {"observedGeneration": live["metadata"].get("generation", 1)}
    if kind == "DaemonSet":
        status.update(desiredNumberScheduled=replicas, currentNumberScheduled=replicas,
                      numberReady=replicas, numberAvailable=replicas,
                      updatedNumberScheduled=replicas)
    else:
        status.update(replicas=replicas, readyReplicas=replicas, availableReplicas=replicas,
                      updatedReplicas=replicas)
        if kind == "StatefulSet":
            status["currentReplicas"] = replicas
        else:
            # as the deployment controller reports a finished rollout (kstatus reads both)
            status["conditions"] = [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]
    client.patch(api_version, kind, meta["name"], {"status": status},
                 patch_type="application/merge-patch+json", namespace=namespace,
                 subresource="status")
    return dict(live)


def make_workloads_available(
    client: ClusterClient, namespace: str, *, label_selector: str | None = None
) -> list[str]:
    """Every Deployment, StatefulSet and DaemonSet of ``namespace`` (matching ``label_selector``)
    whose health is not ``Current`` made available with :func:`make_available`; their
    ``Kind name`` in the order done (empty when every workload already is).

    One call is one look, as one kubelet status report: a workload created or rolled later
    needs another call, so call it from the condition a test waits on."""
    from builders.health import health_of  # the kstatus verdict the readiness rules use

    done = []
    for api_version, kind in _WORKLOADS:
        items = client.list(api_version, kind, namespace=namespace,
                            label_selector=label_selector)["items"]
        for item in items:
            if not health_of(item).current:
                make_available(client, {"apiVersion": api_version, "kind": kind,
                                        "metadata": item["metadata"]})
                done.append(f"{kind} {item['metadata']['name']}")
    return done


def _ready_pod(pod: _abc.Mapping[str, _Any]) -> dict[str, _Any]:
    """A Pod's status as a kubelet reports it once every container runs and is ready."""
    containers = ((pod.get("spec") or {}).get("containers")) or ()
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "phase": "Running", "startTime": now, "podIP": "10.0.0.1", "hostIP": "10.0.0.2",
        "conditions": [{"type": kind, "status": "True", "lastTransitionTime": now}
                       for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
        "containerStatuses": [
            {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True,
             "started": True, "restartCount": 0, "state": {"running": {"startedAt": now}}}
            for c in containers],
    }


def wait_synced(runtime: OperatorRuntime, timeout: float = 30.0) -> bool:
    """Block (real time) until ``runtime.ready``; whether it became ready within ``timeout``."""
    deadline = time.monotonic() + timeout
    while not runtime.ready:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


def wait_idle(runtime: OperatorRuntime, timeout: float = 30.0, *, settle: float = 0.05) -> bool:
    """Block (real time) until nothing is queued or running for ``settle`` seconds; whether
    that happened within ``timeout``."""
    deadline = time.monotonic() + timeout
    quiet_since: float | None = None
    while time.monotonic() < deadline:
        if not runtime.idle:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= settle:
            return True
        time.sleep(0.002)
    return False


class VirtualClock:
    """A clock that moves only when a test calls ``advance``; waits end when their deadline passes.

    Waiting threads register their condition; ``advance`` notifies every registered condition so
    its waiter re-checks its deadline against the new time. ``wait_for_waiters`` lets a test block
    (in real time) until the threads it started have reached their waits, so that an ``advance``
    is observed by all of them.
    """

    def __init__(self, *, start: float = 1_700_000_000.0) -> None:
        self._lock = threading.Condition()
        self._now = 0.0
        self._epoch = start
        self._waiting: dict[int, threading.Condition] = {}
        self._next_id = 0

    def monotonic(self) -> float:
        """Virtual seconds since the clock was made."""
        with self._lock:
            return self._now

    def time(self) -> float:
        """The virtual wall clock (``start`` plus the virtual seconds elapsed)."""
        with self._lock:
            return self._epoch + self._now

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every waiter so it re-checks its deadline."""
        if seconds < 0:
            raise _errors.ReconcilerUsageError(
                f"a clock cannot go backwards (advance by {seconds})"
            )
        with self._lock:
            self._now += seconds
            waiters = list(self._waiting.values())
            self._lock.notify_all()
        for condition in waiters:
            with condition:
                condition.notify_all()

    @property
    def waiters(self) -> int:
        """How many threads are currently blocked in ``sleep`` or ``wait``."""
        with self._lock:
            return len(self._waiting)

    def wait_for_waiters(self, count: int, *, timeout: float = 5.0) -> bool:
        """Block (real time) until at least ``count`` threads wait on this clock."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self._waiting) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._lock.wait(min(remaining, 0.01))
        return True

    def sleep(self, seconds: float) -> None:
        """Block until virtual time has moved ``seconds`` forward."""
        condition = threading.Condition()
        with condition:
            deadline = self.monotonic() + seconds
            while self.monotonic() < deadline:
                self._wait_registered(condition)

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        """Wait on ``condition`` until notified, or until virtual time passes the deadline."""
        deadline = None if timeout is None else self.monotonic() + timeout
        if deadline is not None and self.monotonic() >= deadline:
            return
        self._wait_registered(condition)

    def _wait_registered(self, condition: threading.Condition) -> None:
        with self._lock:
            token = self._next_id
            self._next_id += 1
            self._waiting[token] = condition
            self._lock.notify_all()
        try:
            # A real-time cap guards against a notify lost between registration and waiting.
            condition.wait(0.05)
        finally:
            with self._lock:
                del self._waiting[token]


_make_workloads_available = make_workloads_available
_WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})
_MACHINE_AGENT = "optk-operator-machine"


def _walk_leaves(value: _Any, path: tuple[_Any, ...] = ()) -> list[tuple[_Any, ...]]:
    if isinstance(value, _abc.Mapping):
        return [p for k, v in value.items() for p in _walk_leaves(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _walk_leaves(v, (*path, i))]
    return [path] if isinstance(value, str) else []


def _set_path(obj: _Any, path: tuple[_Any, ...], value: _Any) -> bool:
    for step in path[:-1]:
        try:
            obj = obj[step]
        except (KeyError, IndexError, TypeError):
            return False
    try:
        obj[path[-1]] = value
    except (KeyError, IndexError, TypeError):
        return False
    return True


def operator_machine(
    operator: _Any, *, parents: _Any, namespace: str = "machine",
    create_parents: bool = True, change_spec: bool = True, delete_parents: bool = True,
    delete_children: bool = True, edit_children: bool = True, pause: bool = True,
    restart: bool = True, make_available: bool = True, check_resync: bool = True,
    idle_timeout: float = 20.0, max_reconciles_per_step: int = 50,
) -> _Any:
    """A Hypothesis ``RuleBasedStateMachine`` class that runs ``operator`` against its own
    in-process ``EmbeddedApiServer`` (one per run) with random user actions; run it with
    ``hypothesis.stateful.run_state_machine_as_test(machine, settings=...)`` or its ``.TestCase``.

    ``parents`` is a strategy of parent objects (dicts; their name and namespace are replaced:
    the machine names them ``p0``, ``p1``, ... in ``namespace``). Rules, each on by default and
    switched off by its option: ``create_parents`` (create a drawn parent), ``change_spec``
    (replace a parent's spec by a new draw), ``delete_parents``, ``delete_children`` (delete one
    of a parent's declared children), ``edit_children`` (drift: set a string field its builder
    sets to another value), ``pause`` (set or remove ``optk.dev/paused: "true"``), ``restart``
    (stop the operator cleanly and start it again), ``make_available`` (workloads of
    ``namespace`` made available as a kubelet would, ``make_workloads_available``).

    After every step the operator must be idle within ``idle_timeout`` seconds, then: every live
    unpaused parent's PRESENT children exist and match what its builders build
    (``objectmatcher.calculate_patch`` is empty: server defaults ignored), its ABSENT children are
    gone and no builder fails; deleted parents and their children are gone; the operator wrote
    no child of a paused parent since the last step; at most ``max_reconciles_per_step``
    reconciles ran in the step; and (``check_resync``) a forced ``resync_all()`` makes no write.
    A failure shows Hypothesis' shrunk steps as a script (``p0 = state.create_parent(...)``).
    Needs the ``testing`` and ``embedded`` extras."""
    from hypothesis import strategies as st
    from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule

    from reconciler._client.kubernetes import KubernetesClient
    from reconciler._reconcile.policies import PAUSED_ANNOTATION
    from reconciler.embedded import EmbeddedApiServer

    class OperatorMachine(RuleBasedStateMachine):
        parent_names = Bundle("parents")

        def __init__(self) -> None:
            super().__init__()
            self.server = EmbeddedApiServer().start()
            api = self.server.api_client()
            api.user_agent = _MACHINE_AGENT
            self.client = KubernetesClient(api)
            self.server.enable_request_log()
            with contextlib.suppress(_AlreadyExistsError):
                self.client.create({"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": namespace}})
            self.runtime = operator.start(KubernetesClient(self.server.api_client()))
            assert wait_synced(self.runtime, idle_timeout), "the operator never synced"
            self.names = itertools.count()
            self.live: dict[str, _Any] = {}       # parents the machine created and not deleted
            self.paused: set[str] = set()
            self.deleted: dict[str, list[_Any]] = {}  # deleted parent -> its children's refs
            self.mark = 0
            self.reconciles_mark = 0

        def teardown(self) -> None:
            with contextlib.suppress(Exception):
                self.runtime.stop(5)
            self.server.stop()

        # -- helpers -----------------------------------------------------------------------

        def _api_version_kind(self) -> tuple[str, str]:
            return operator.api_version, operator.kind

        def _get_parent(self, name: str) -> dict[str, _Any] | None:
            api_version, kind = self._api_version_kind()
            try:
                return self.client.get(api_version, kind, name, namespace=namespace)
            except _NotFoundError:
                return None

        def _declared(self, parent: _Any) -> _Any:
            return self.runtime.reconciler.declared(parent)

        def _operator_writes(self) -> list[_Any]:
            log = self.server.request_log()[self.mark:]
            return [r for r in log if r.verb in _WRITES and r.user_agent != _MACHINE_AGENT]

        # -- rules -------------------------------------------------------------------------

        if create_parents:
            @rule(target=parent_names, parent=parents)
            def create_parent(self, parent: _Any) -> str:
                obj = copy.deepcopy(dict(parent))
                name = f"p{next(self.names)}"
                obj["metadata"] = {**(obj.get("metadata") or {}), "name": name,
                                   "namespace": namespace}
                obj.setdefault("apiVersion", operator.api_version)
                obj.setdefault("kind", operator.kind)
                self.client.create(obj)
                self.live[name] = obj
                return name

        if change_spec:
            @rule(name=parent_names, parent=parents)
            def change_parent_spec(self, name: str, parent: _Any) -> None:
                live = self._get_parent(name)
                if live is None:
                    return
                live["spec"] = copy.deepcopy(dict(parent).get("spec"))
                self.client.replace(live)

        if delete_parents:
            @rule(name=consumes(parent_names))
            def delete_parent(self, name: str) -> None:
                live = self._get_parent(name)
                if live is None:
                    return
                refs = [c.ref for c in self._declared(live).children]
                api_version, kind = self._api_version_kind()
                self.client.delete(api_version, kind, name, namespace=namespace)
                self.live.pop(name, None)
                self.paused.discard(name)
                self.deleted[name] = refs

        if delete_children:
            @rule(name=parent_names, which=st.integers(0, 20))
            def delete_child(self, name: str, which: int) -> None:
                live = self._get_parent(name)
                if live is None:
                    return
                children = self._declared(live).children
                if not children:
                    return
                ref = children[which % len(children)].ref
                with contextlib.suppress(_NotFoundError):
                    self.client.delete(ref.api_version, ref.kind, ref.name,
                                       namespace=ref.namespace)

        if edit_children:
            @rule(name=parent_names, which=st.integers(0, 20), field=st.integers(0, 50))
            def drift_child(self, name: str, which: int, field: int) -> None:
                live = self._get_parent(name)
                if live is None:
                    return
                present = [c for c in self._declared(live).children
                           if str(c.state).upper().endswith("PRESENT")]
                if not present:
                    return
                child = present[which % len(present)]
                paths = [p for p in _walk_leaves(child.obj)
                         if p[0] not in ("apiVersion", "kind", "metadata", "status")]
                if not paths:
                    return
                ref = child.ref
                try:
                    obj = self.client.get(ref.api_version, ref.kind, ref.name,
                                          namespace=ref.namespace)
                except _NotFoundError:
                    return
                if _set_path(obj, paths[field % len(paths)], "drifted-by-machine"):
                    with contextlib.suppress(Exception):
                        self.client.replace(obj)

        if pause:
            @rule(name=parent_names, paused=st.booleans())
            def set_paused(self, name: str, paused: bool) -> None:
                live = self._get_parent(name)
                if live is None:
                    return
                value = "true" if paused else None
                api_version, kind = self._api_version_kind()
                self.client.patch(api_version, kind, name,
                                  {"metadata": {"annotations": {PAUSED_ANNOTATION: value}}},
                                  patch_type="application/merge-patch+json",
                                  namespace=namespace)
                if paused:
                    self.paused.add(name)
                else:
                    self.paused.discard(name)

        if restart:
            @rule()
            def restart_operator(self) -> None:
                assert self.runtime.stop(10), "the operator did not stop cleanly"
                self.runtime = operator.start(KubernetesClient(self.server.api_client()))
                self.reconciles_mark = 0
                assert wait_synced(self.runtime, idle_timeout), "the operator never synced"

        if make_available:
            @rule()
            def make_workloads_available(self) -> None:
                _make_workloads_available(self.client, namespace)

        # -- invariants --------------------------------------------------------------------

        @invariant()
        def converged(self) -> None:
            assert wait_idle(self.runtime, idle_timeout), (
                f"the operator was not idle within {idle_timeout}s (a reconcile loop?)")
            reconciles = sum(self.runtime.stats.reconciles.values())
            assert reconciles - self.reconciles_mark <= max_reconciles_per_step, (
                f"{reconciles - self.reconciles_mark} reconciles in one step")
            self.reconciles_mark = reconciles
            self._check_paused()
            self._check_children()
            self._check_deleted()
            if check_resync:
                self._check_resync()
            self.mark = len(self.server.request_log())

        def _check_paused(self) -> None:
            if not self.paused:
                return
            touched = {(r.namespace, r.name) for r in self._operator_writes()}
            for name in self.paused:
                live = self._get_parent(name)
                if live is None:
                    continue
                for child in self._declared(live).children:
                    ref = child.ref
                    assert (ref.namespace, ref.name) not in touched, (
                        f"paused parent {name}: the operator wrote its child {ref}")

        def _check_children(self) -> None:
            from objectmatcher import calculate_patch
            for name in self.live:
                if name in self.paused:
                    continue
                live = self._get_parent(name)
                assert live is not None, f"parent {name} vanished"
                declared = self._declared(live)
                assert not declared.failures, f"parent {name}: builders failed {declared}"
                for child in declared.children:
                    ref = child.ref
                    try:
                        obj = self.client.get(ref.api_version, ref.kind, ref.name,
                                              namespace=ref.namespace)
                    except _NotFoundError:
                        obj = None
                    if str(child.state).upper().endswith("ABSENT"):
                        assert obj is None, f"parent {name}: ABSENT child {ref} exists"
                        continue
                    assert obj is not None, f"parent {name}: PRESENT child {ref} is missing"
                    result = calculate_patch(obj, child.obj)
                    assert result.is_empty, (
                        f"parent {name}: child {ref} differs from its build:\n"
                        f"{result.explain()}")

        def _check_deleted(self) -> None:
            for name, refs in self.deleted.items():
                assert self._get_parent(name) is None, (
                    f"deleted parent {name} still exists (cleanup stuck?)")
                for ref in refs:
                    with contextlib.suppress(_NotFoundError):
                        self.client.get(ref.api_version, ref.kind, ref.name,
                                        namespace=ref.namespace)
                        raise AssertionError(f"deleted parent {name}: its child {ref} remains")

        def _check_resync(self) -> None:
            self.mark = len(self.server.request_log())
            self.runtime.resync_all()
            assert wait_idle(self.runtime, idle_timeout), "not idle after a resync"
            writes = self._operator_writes()
            assert not writes, (
                "a forced resync wrote: " + ", ".join(
                    f"{r.verb} {r.resource} {r.namespace}/{r.name}" for r in writes))
            self.reconciles_mark = sum(self.runtime.stats.reconciles.values())

    OperatorMachine.__name__ = OperatorMachine.__qualname__ = (
        f"{operator.kind}OperatorMachine")
    return OperatorMachine
