"""The operator state machine: Hypothesis drives a whole operator against the embedded API
server with random user actions and server faults, and checks at each quiet point what every
operator author relies on (docs/testing-operators.md, issue 38).

One class is built per call from its options (which rules exist, which checks run), so the
rules and the checks share the machine's state; the helpers they use are
``reconciler._testing.observations``. The module is over 500 lines because that class is one
machine: its rules and its checks share one running operator, one server and the record of
what each step wrote (each rule and check is a short method).

Boundary: the machine and its checks; starting the operator is the runtime's
(``Operator.start``), serving is the embedded server's. Public through
``reconciler.testing.operator_machine``.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import copy
import inspect
import itertools
import math
import time
import typing
from collections import abc as _abc
from typing import Any as _Any

from reconciler._base import errors as _errors
from reconciler._base.errors import AlreadyExistsError as _AlreadyExistsError
from reconciler._base.errors import NotFoundError as _NotFoundError
from reconciler._testing.observations import (
    _BOOKKEEPING,
    _CONTENDER,
    _CONTESTED,
    _FAULTS,
    _FORBIDDEN,
    _FOREIGN_LABEL,
    _GATED,
    _HANGING_WEBHOOK,
    _LABEL,
    _MACHINE_AGENT,
    _NOTE,
    _POLICIES,
    _REPLICA,
    _SECRET_MIN,
    _UNCOMPARED,
    _WRITES,
    _changeable,
    _conditions,
    _get_path,
    _HangingEndpoint,
    _held_by_other,
    _key,
    _LogCapture,
    _newer_or_same,
    _owned_by,
    _pointer,
    _Ref,
    _resource_of,
    _said,
    _secret_values,
    _set_path,
    _Tracked,
    _waits_for_gate,
    _waits_on_input,
    _walk_leaves,
)
from reconciler._testing.waits import wait_idle, wait_synced
from reconciler._testing.workloads import _WORKLOADS
from reconciler._testing.workloads import make_workloads_available as _make_workloads_available

__all__ = ["operator_machine"]

_SCRIPT_STEPS = 100
"""The steps a failure's script shows at most (the last ones)."""


def operator_machine(
    operator: _Any, *, parents: _Any, namespace: str = "machine",
    create_parents: bool = True, change_spec: bool = True, relabel_parents: bool = True,
    delete_parents: bool = True, delete_children: bool = True, edit_children: bool = True,
    scale_children: bool = True, foreign_objects: bool = True, inputs: bool = True,
    pause: bool = True,
    restart: bool = True, crash: bool = True, make_available: bool = True,
    faults: bool = True, contend: bool = True, policies: bool = True, webhooks: bool = True,
    check_resync: bool = True, check_conditions: bool = True,
    check_secrets: bool = True, idle_timeout: float = 20.0, max_reconciles_per_step: int = 50,
    retry_window: float = 2.0, fault_seconds: float = 0.3, request_log_lines: int = 40,
    contend_seconds: float = 1.0, repair_timeout: float = 30.0, replicas: int = 1,
    hang_seconds: int = 10, hang_read_bound: float = 3.0,
) -> _Any:
    """A Hypothesis ``RuleBasedStateMachine`` class that runs ``operator`` against its own
    in-process ``EmbeddedApiServer`` (one per run) with random user actions; run it with
    ``hypothesis.stateful.run_state_machine_as_test(machine, settings=...)`` or its ``.TestCase``.

    ``parents`` is a strategy of parent objects (dicts; their name and namespace are replaced:
    the machine names them ``p0``, ``p1``, ... in ``namespace``). Rules, each on by default and
    switched off by its option: ``create_parents`` (create a drawn parent), ``change_spec``
    (replace a parent's spec by a new draw), ``relabel_parents`` (set or remove a label and an
    annotation of a parent), ``delete_parents``, ``delete_children`` (delete one of a parent's
    declared children), ``edit_children`` (drift: set a string field its builder sets to
    another value), ``scale_children`` (another actor sets a workload child's
    ``spec.replicas``), ``foreign_objects`` (create an object of someone else where a new
    parent's child will go, then create that parent; later delete the object or hand it over
    with the ``optk.dev/last-applied`` annotation), ``inputs`` (where the operator declares
    inputs: create, change or delete one of a parent's declared Secret or ConfigMap inputs,
    ``data: {value: ...}``), ``pause`` (set or remove
    ``optk.dev/paused: "true"``), ``restart`` (stop the operator cleanly and start it again),
    ``crash`` (change a parent's spec and stop the operator at once, mid-work: no wait for its
    reconciles, the Lease left to expire, then start it again), ``make_available`` (workloads
    of ``namespace`` made available as a kubelet would, ``make_workloads_available``),
    ``faults`` (change a parent's spec while the server answers 500 to half the requests,
    carries out half the writes and loses their answers, or cuts every watch after one event,
    for ``fault_seconds`` real seconds), ``contend`` (a
    second writer, another field manager, sets a string field of a child back to its own value
    whenever it sees another, by a patch or a whole update, for ``contend_seconds``: the
    operator's writes to it are bounded by its ``Contention`` settings, its parent says
    ``Contested=True``, and once the writer stops the child is repaired within
    ``repair_timeout`` seconds), ``policies`` (set or remove ``optk.dev/policy`` on a child:
    ``ignore``, ``create-only``, ``no-prune`` or ``observe``; from the step on, the operator
    sends no write the policy forbids, an observed child that differs from its build is
    reported by ``Drifted=True``, and a child whose policy holds writes back is not compared),
    ``webhooks`` (a validating admission webhook on the operator's objects of one child's API
    group whose endpoint accepts connections and never answers, ``timeoutSeconds``
    ``hang_seconds``, ``failurePolicy`` Fail or Ignore; that child is deleted, and while the
    operator's create of it waits on the webhook the server answers another client's read
    within ``hang_read_bound`` seconds; then the webhook is removed and its connections reset:
    the operator's write is refused or let through, and the quiet point finds the child back).

    ``contend_seconds`` is how long the second writer writes; ``repair_timeout`` bounds the
    repair after it stops. ``replicas`` (an operator with ``sharding``) runs that many replicas
    in the process (shard ids ``r0``, ``r1``, ...; ``restart`` restarts them all, ``crash``
    the first), and checks at each quiet point that every parent is assigned to one replica
    and cached by it alone, that a step's writes to a parent's children came from one replica
    (but in a step that restarted them), and the checks above across them.

    After every step the operator must be quiet within ``idle_timeout`` seconds (its informers
    have seen the step's writes, it is idle, and a retry or held repair due within
    ``retry_window`` seconds is waited for, ``retry_window`` at most in all), then: every live
    unpaused parent's PRESENT children exist and match what its builders build
    (``objectmatcher.calculate_patch`` is empty: server defaults ignored), except where a
    foreign object sits or that waits for its component's dependencies (``DependencyNotReady``,
    ``DependencyNotBuilt`` or ``DependentsNotGone`` names it); its ABSENT children are gone (a
    shared one another parent builds is kept) and no builder fails (but for a missing declared
    input: then ``Reconciled`` is False with reason ``InputMissing``);
    deleted parents are gone (no finalizer left: no cleanup stuck) and so are their children,
    foreign objects kept; the operator wrote no child of a paused parent (but a shared one a
    parent not paused builds too) and no foreign object
    (a write the server refused, e.g. a 409 create or apply, changes nothing) since the last
    step; no child was created or updated in the step while its component waits for its
    dependencies (the reconcile's ``ChildGates`` over the builders as written and the live
    objects); at most ``max_reconciles_per_step`` reconciles ran in the step;
    (``check_resync``) a forced ``resync_all()`` makes no accepted write (the resync
    heartbeat's Lease and Events aside; a create refused 409 where a foreign object sits changes
    nothing); (``check_conditions``) each parent's conditions say what is true: ``Reconciled``
    True for its generation only when converged, False with reason ``ChildrenSkipped`` (and
    ``Ready`` not True) while a foreign object holds the place of a child it builds PRESENT
    (where the child is ABSENT or no longer built, the parent has no such child: what it
    declares holds), ``ReconcilePaused`` while paused; (``check_secrets``) no value of a
    Secret child or of a Secret input the machine wrote appears in a log line, an Event or
    an annotation of a parent or child.
    A failure shows Hypothesis' shrunk steps as a script (``p0 = state.create_parent(...)``)
    and the failed check's message ends with the server's request log of the step (its last
    ``request_log_lines`` requests), the parents' conditions and the example's steps as run
    (a script too, the last 100 steps: what a failure Hypothesis cannot replay, a
    ``FlakyFailure``, still shows). The class's ``stats`` (a
    ``Counter``) counts each rule run and each quiet point checked (``checks``) over all its
    runs (and ``fights``: contests in which the second writer changed the child; ``policy
    ignore``, ...: policies set). Needs the ``testing`` and ``embedded`` extras."""
    from hypothesis import strategies as st
    from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

    from builders.names import MANAGED_BY_LABEL, OWNER_UID_LABEL
    from objectmatcher import LAST_APPLIED_ANNOTATION
    from reconciler._client.kubernetes import KubernetesClient
    from reconciler._reconcile.ordering import ChildGates
    from reconciler._reconcile.policies import PAUSED_ANNOTATION, POLICY_ANNOTATION
    from reconciler._sharding.decisions import DRAIN_LABEL, SHARD_LABEL
    from reconciler.embedded import EmbeddedApiServer, Faults

    sharded = getattr(operator, "sharding", None) is not None
    if replicas < 1 or (replicas > 1 and not sharded):
        raise _errors.ReconcilerUsageError(
            f"operator_machine: replicas={replicas} needs an operator with sharding "
            "(Operator(sharding=Sharding(...))) and at least 1")

    class OperatorMachine(RuleBasedStateMachine):
        parent_names = Bundle("parents")
        #: over every run of this class: each rule's count, ``checks`` (quiet points checked)
        stats: typing.ClassVar[collections.Counter[str]] = collections.Counter()

        def __init__(self) -> None:
            super().__init__()
            self.logs = _LogCapture() if check_secrets else None
            self.server = EmbeddedApiServer().start()
            client = KubernetesClient(self.server.api_client())
            client.user_agent = _MACHINE_AGENT  # its requests are not the operator's
            self.client: _Any = _Tracked(client)
            self.server.enable_request_log()
            self.steps: list[str] = []  # this example's steps as run, for a failure's script
            with contextlib.suppress(_AlreadyExistsError):
                self.client.create({"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": namespace}})
            self.runtimes = [self._start(i) for i in range(replicas)]
            self.moved = False  # the step restarted replicas: parents may change hands
            self.names = itertools.count()
            self.live: dict[str, _Any] = {}       # parents the machine created and not deleted
            self.paused: set[str] = set()
            self.deleted: dict[str, list[_Any]] = {}  # deleted parent -> its children's refs
            self.deleted_uids: dict[str, str] = {}  # deleted parent -> its uid
            self.deleted_at: dict[str, int] = {}  # deleted parent -> the request log then
            self.foreign: dict[tuple[_Any, ...], str] = {}  # a foreign object -> whose place
            # foreign objects handed over: one whose immutable fields differ from the build
            # cannot be repaired without a recreate the operator may not allow
            self.handed: set[tuple[_Any, ...]] = set()
            self.input_secrets: set[str] = set()  # values the machine put in input Secrets
            #: a child's key -> (its optk.dev/policy, its parent, the request log's index from
            #: which the operator has seen it)
            self.policies: dict[tuple[_Any, ...], tuple[str, str, int]] = {}
            self.existed: set[tuple[_Any, ...]] = set()  # children at the last quiet point
            self.mark = self.next_mark = 0  # the request log's start of the step (and the next)
            self.reconciles_mark = 0

        def teardown(self) -> None:
            for runtime in self.runtimes:
                with contextlib.suppress(Exception):
                    runtime.stop(5)
            self.server.stop()
            if self.logs is not None:
                self.logs.close()

        # -- helpers -----------------------------------------------------------------------

        @property
        def runtime(self) -> _Any:
            """The first replica (the only one unless ``replicas``)."""
            return self.runtimes[0]

        def _start(self, index: int) -> _Any:
            client = KubernetesClient(self.server.api_client(), operator_name=operator.name)
            if not sharded:
                runtime = operator.start(client)
            else:  # a user agent per replica: the request log tells them apart
                client.user_agent = f"{client.user_agent} {_REPLICA}r{index}"
                runtime = operator.start(client, identity=f"r{index}",
                                         environ={"OPTK_SHARD_ID": f"r{index}"})
            assert wait_synced(runtime, idle_timeout), "the operator never synced"
            return runtime

        def _reconciles(self) -> int:
            return sum(sum(r.stats.reconciles.values()) for r in self.runtimes)

        def _owner(self, parent: _abc.Mapping[str, _Any] | None) -> _Any:
            """The replica a parent is assigned to (by its shard label), else the first."""
            if sharded and parent is not None:
                shard = ((parent.get("metadata") or {}).get("labels") or {}).get(SHARD_LABEL)
                for index, runtime in enumerate(self.runtimes):
                    if shard == f"r{index}":
                        return runtime
            return self.runtime

        def _api_version_kind(self) -> tuple[str, str]:
            return operator.api_version, operator.kind

        def _get_parent(self, name: str) -> dict[str, _Any] | None:
            api_version, kind = self._api_version_kind()
            try:
                return dict(self.client.get(api_version, kind, name, namespace=namespace))
            except _NotFoundError:
                return None

        def _get(self, ref: _Any) -> dict[str, _Any] | None:
            try:
                return dict(self.client.get(ref.api_version, ref.kind, ref.name,
                                            namespace=ref.namespace))
            except _NotFoundError:
                return None

        def _immutable(self, ref: _Any, reconciled: _abc.Mapping[str, _Any]) -> bool:
            """Whether ``ref`` is an object the machine handed over whose change the server
            refuses (an immutable field differs from the build) and the parent says so
            (``Reconciled`` False, ``ImmutableFieldChanged`` naming it, or ``ChildrenFailed``
            among other failures, a missing input's, say): the operator may not recreate it,
            and that refusal, not a repair, is what is true."""
            message = str(reconciled.get("message") or "")
            return (_key(ref) in self.handed and f"{ref}:" in message
                    and (reconciled.get("reason") == "ImmutableFieldChanged"
                         or (reconciled.get("reason") == "ChildrenFailed"
                             and f"{ref}: the change of " in message)))

        def _declared(self, parent: _Any) -> _Any:
            return self._owner(parent).reconciler.declared(parent)

        def _children(self, name: str, *, present: bool = False) -> list[_Any]:
            """A live parent's declared children (PRESENT ones only with ``present``), not
            those whose place a foreign object holds."""
            live = self._get_parent(name)
            if live is None:
                return []
            return [c for c in self._declared(live).children
                    if _key(c.ref) not in self.foreign
                    and (not present or str(c.state).upper().endswith("PRESENT"))]

        def _operator_writes(self) -> list[_Any]:
            log = self.server.request_log()[self.mark:]
            return [r for r in log if r.verb in _WRITES and r.user_agent != _MACHINE_AGENT]

        def _create(self, parent: _Any) -> tuple[str, dict[str, _Any]]:
            obj = copy.deepcopy(dict(parent))
            name = f"p{next(self.names)}"
            obj["metadata"] = {**(obj.get("metadata") or {}), "name": name,
                               "namespace": namespace}
            obj.setdefault("apiVersion", operator.api_version)
            obj.setdefault("kind", operator.kind)
            return name, obj

        def _change_spec(self, name: str, parent: _Any) -> bool:
            for _ in range(10):  # the operator writes the parent too (status, shard labels)
                live = self._get_parent(name)
                if live is None:
                    return False
                live["spec"] = copy.deepcopy(dict(parent).get("spec"))
                try:
                    self.client.replace(live)
                except _errors.ConflictError:
                    continue
                except _errors.InvalidError:
                    # the CRD's rules refuse this change of the spec (a transition rule: a
                    # field that may not change once set): a user's kubectl apply fails too,
                    # and the parent keeps its spec
                    self.stats["spec change refused"] += 1
                    return False
                return True
            raise AssertionError(f"parent {name}: its spec could not be replaced (conflicts)")


        def _contend(self, name: str, ref: _Any, path: tuple[_Any, ...], built: _Any,
                     writer: str) -> None:
            """A second writer sets ``path`` of the child to its own value whenever it sees
            another, for ``contend_seconds``; then the operator's contention handling is
            judged (see ``contend`` in the docstring)."""
            other = KubernetesClient(self.server.api_client(), operator_name=_CONTENDER)
            other.user_agent = _MACHINE_AGENT  # not the operator's requests
            start = len(self.server.request_log())
            reconciles = self._reconciles()
            changes, contested = 0, False
            deadline = time.monotonic() + contend_seconds
            while time.monotonic() < deadline:
                live = self._get(ref)
                if live is None:
                    return  # gone (its parent went): nothing to fight over
                if _get_path(live, path) != _CONTESTED:
                    try:
                        if writer == "update":
                            _set_path(live, path, _CONTESTED)
                            other.replace(live)
                        else:
                            other.patch(ref.api_version, ref.kind, ref.name,
                                        [{"op": "replace", "path": _pointer(path),
                                          "value": _CONTESTED}],
                                        patch_type="application/json-patch+json",
                                        namespace=ref.namespace)
                        changes += 1
                    except _errors.ConflictError:
                        pass  # the operator wrote in between: the next look writes again
                    except _errors.ApiError:
                        if changes == 0:
                            return  # the server refuses this value here: no fight
                contested = contested or (_conditions(self._get_parent(name)).get(
                    "Contested") or {}).get("status") == "True"
                time.sleep(0.02)
            self.stats["fights"] += changes > 0
            stopped = len(self.server.request_log())
            undone = [r for r in self.server.request_log()[start:stopped]
                      if r.user_agent != _MACHINE_AGENT and r.verb in ("update", "patch")
                      and r.code < 400 and r.namespace == ref.namespace and r.name == ref.name
                      and _resource_of(r.resource, ref.kind)]
            settings = operator.policies.contention
            if settings is not None:
                tries = math.ceil(math.log2(1 + contend_seconds / settings.backoff))
                bound = settings.threshold + tries + 1
                assert len(undone) <= bound, (
                    f"contended child {ref} ({_pointer(path)}, {changes} changes by "
                    f"{_CONTENDER}): the operator wrote it {len(undone)} times in "
                    f"{contend_seconds}s, more than its Contention allows ({bound}: threshold "
                    f"{settings.threshold}, backoff {settings.backoff}s)")
                if changes >= settings.threshold and len(undone) >= settings.threshold - 1:
                    wait = time.monotonic() + 2.0
                    while not contested and time.monotonic() < wait:
                        contested = (_conditions(self._get_parent(name)).get(
                            "Contested") or {}).get("status") == "True"
                        time.sleep(0.02)
                    assert contested, (
                        f"contended child {ref} ({_pointer(path)}): changed back "
                        f"{changes} times by {_CONTENDER} and undone {len(undone)} times, but "
                        f"parent {name} never said Contested=True")
            spent = self._reconciles() - reconciles
            assert spent <= 4 * changes + 10, (
                f"contended child {ref}: {spent} reconciles for {changes} changes by "
                f"{_CONTENDER} (a hot loop?)")
            deadline = time.monotonic() + repair_timeout
            while _get_path(self._get(ref) or {}, path) != built:
                assert time.monotonic() < deadline, (
                    f"contended child {ref} ({_pointer(path)}) not repaired within "
                    f"{repair_timeout}s after {_CONTENDER} stopped")
                time.sleep(0.05)
            while (_conditions(self._get_parent(name)).get("Contested") or {}).get(
                    "status") == "True":  # ends once the repair held for the quiet window
                assert time.monotonic() < deadline, (
                    f"parent {name} still says Contested=True {repair_timeout}s after "
                    f"{_CONTENDER} stopped, its child {ref} repaired")
                time.sleep(0.05)

        # -- rules -------------------------------------------------------------------------

        if create_parents:
            @rule(target=parent_names, parent=parents)
            def create_parent(self, parent: _Any) -> str:
                self._did("create_parent", locals())
                name, obj = self._create(parent)
                self.steps[-1] = f"{name} = {self.steps[-1]}"
                self.client.create(obj)
                self.live[name] = obj
                return name

        if foreign_objects:
            @rule(target=parent_names, parent=parents, which=st.integers(0, 20))
            def create_parent_over_foreign(self, parent: _Any, which: int) -> str:
                self._did("create_parent_over_foreign", locals())
                name, obj = self._create(parent)
                self.steps[-1] = f"{name} = {self.steps[-1]}"
                planned = copy.deepcopy(obj)  # declared before it exists: a stand-in uid
                planned["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
                present = [c for c in self._declared(planned).children
                           if str(c.state).upper().endswith("PRESENT")]
                if present:
                    child = present[which % len(present)]
                    foreign = copy.deepcopy(child.obj)
                    meta = foreign.get("metadata") or {}
                    labels = {k: v for k, v in (meta.get("labels") or {}).items()
                              if k not in (OWNER_UID_LABEL, SHARD_LABEL)}
                    foreign["metadata"] = {
                        "name": meta.get("name"), "labels": {**labels, _FOREIGN_LABEL: "true"},
                        **({"namespace": meta["namespace"]} if meta.get("namespace") else {})}
                    foreign.pop("status", None)
                    leaves = [p for p in _walk_leaves(foreign)
                              if p[0] not in ("apiVersion", "kind", "metadata")]
                    if leaves and which % 2 == 0:  # someone else's, not what the builder builds
                        _set_path(foreign, leaves[which // 2 % len(leaves)],
                                  "made-by-someone-else")  # odd: the same values, still not ours
                    try:
                        self.client.create(foreign)
                        self.foreign[_key(child.ref)] = name
                    except _errors.ApiError:
                        pass  # the server refuses it as built without its parent: no place taken
                self.client.create(obj)
                self.live[name] = obj
                return name

            @rule(which=st.integers(0, 20), hand_over=st.booleans())
            def release_foreign(self, which: int, hand_over: bool) -> None:
                self._did("release_foreign", locals())
                if not self.foreign:
                    return
                key = sorted(self.foreign, key=repr)[which % len(self.foreign)]
                del self.foreign[key]
                api_version, kind, ns, name = key
                with contextlib.suppress(_NotFoundError):
                    if hand_over:
                        self.handed.add(key)
                        self.client.patch(
                            api_version, kind, name,
                            {"metadata": {"annotations": {LAST_APPLIED_ANNOTATION: "handed-over"}}},
                            patch_type="application/merge-patch+json", namespace=ns)
                    else:
                        self.client.delete(api_version, kind, name, namespace=ns)

        if change_spec:
            @rule(name=parent_names, parent=parents)
            def change_parent_spec(self, name: str, parent: _Any) -> None:
                self._did("change_parent_spec", locals())
                self._change_spec(name, parent)

        if inputs and operator.inputs is not None:
            @rule(name=parent_names, which=st.integers(0, 20),
                  value=st.sampled_from(["input-value-one", "input-value-two", None]))
            def set_input(self, name: str, which: int, value: str | None) -> None:
                self._did("set_input", locals())
                live = self._get_parent(name)
                if live is None:
                    return
                refs = [r for r in operator.inputs(live) if getattr(r, "name", None)
                        and (r.api_version, r.kind) in (("v1", "Secret"), ("v1", "ConfigMap"))]
                if not refs:
                    return
                ref = refs[which % len(refs)]
                if value is None:
                    with contextlib.suppress(_NotFoundError):
                        self.client.delete(ref.api_version, ref.kind, ref.name,
                                           namespace=ref.namespace)
                    return
                data = ({"value": base64.b64encode(value.encode()).decode()}
                        if ref.kind == "Secret" else {"value": value})
                obj = {"apiVersion": ref.api_version, "kind": ref.kind, "data": data,
                       "metadata": {"name": ref.name, "namespace": ref.namespace}}
                try:
                    self.client.create(obj)
                except _AlreadyExistsError:
                    self.client.patch(ref.api_version, ref.kind, ref.name, {"data": data},
                                      patch_type="application/merge-patch+json",
                                      namespace=ref.namespace)
                if ref.kind == "Secret":
                    self.input_secrets.add(value)

        if relabel_parents:
            @rule(name=parent_names, label=st.sampled_from(["a", "b", None]),
                  note=st.sampled_from(["x", "y", None]))
            def relabel_parent(self, name: str, label: str | None, note: str | None) -> None:
                self._did("relabel_parent", locals())
                if self._get_parent(name) is None:
                    return
                api_version, kind = self._api_version_kind()
                self.client.patch(api_version, kind, name,
                                  {"metadata": {"labels": {_LABEL: label},
                                                "annotations": {_NOTE: note}}},
                                  patch_type="application/merge-patch+json",
                                  namespace=namespace)

        if delete_parents:
            @rule(name=parent_names)
            def delete_parent(self, name: str) -> None:
                self._did("delete_parent", locals())
                live = self._get_parent(name)
                if live is None or name in self.deleted:
                    return
                refs = [c.ref for c in self._declared(live).children
                        if _key(c.ref) not in self.foreign
                        and self.policies.pop(_key(c.ref), None) is None]  # may be kept
                api_version, kind = self._api_version_kind()
                self.client.delete(api_version, kind, name, namespace=namespace)
                self.live.pop(name, None)
                self.deleted[name] = refs  # a paused one waits for its unpause (it stays)
                self.deleted_uids[name] = str(live["metadata"].get("uid"))
                self.deleted_at[name] = len(self.server.request_log())

        if delete_children:
            @rule(name=parent_names, which=st.integers(0, 20))
            def delete_child(self, name: str, which: int) -> None:
                self._did("delete_child", locals())
                children = self._children(name)
                if not children:
                    return
                ref = children[which % len(children)].ref
                self.policies.pop(_key(ref), None)  # its policy goes with it
                with contextlib.suppress(_NotFoundError):
                    self.client.delete(ref.api_version, ref.kind, ref.name,
                                       namespace=ref.namespace)

        if edit_children:
            @rule(name=parent_names, which=st.integers(0, 20), field=st.integers(0, 50))
            def drift_child(self, name: str, which: int, field: int) -> None:
                self._did("drift_child", locals())
                present = self._children(name, present=True)
                if not present:
                    return
                child = present[which % len(present)]
                paths = [p for p in _walk_leaves(child.obj) if _changeable(p)]
                obj = self._get(child.ref)
                if not paths or obj is None:
                    return
                if _set_path(obj, paths[field % len(paths)], "drifted-by-machine"):
                    with contextlib.suppress(_errors.ApiError):
                        self.client.replace(obj)

        if scale_children:
            @rule(name=parent_names, which=st.integers(0, 20), replicas=st.integers(0, 5))
            def scale_child(self, name: str, which: int, replicas: int) -> None:
                self._did("scale_child", locals())
                workloads = [c for c in self._children(name, present=True)
                             if (c.ref.api_version, c.ref.kind) in _WORKLOADS]
                if not workloads:
                    return
                ref = workloads[which % len(workloads)].ref
                with contextlib.suppress(_NotFoundError):
                    self.client.patch(ref.api_version, ref.kind, ref.name,
                                      {"spec": {"replicas": replicas}},
                                      patch_type="application/merge-patch+json",
                                      namespace=ref.namespace)

        if pause:
            @rule(name=parent_names, paused=st.booleans())
            def set_paused(self, name: str, paused: bool) -> None:
                self._did("set_paused", locals())
                if self._get_parent(name) is None:
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
                self._did("restart_operator", locals())
                for index, runtime in enumerate(self.runtimes):
                    assert runtime.stop(10), "the operator did not stop cleanly"
                    self.runtimes[index] = self._start(index)
                self.reconciles_mark = 0
                self.moved = True

        if crash:
            @rule(name=parent_names, parent=parents)
            def crash_operator(self, name: str, parent: _Any) -> None:
                self._did("crash_operator", locals())
                self._change_spec(name, parent)
                # no clean stop: in-flight reconciles are not waited for, the Lease not released
                self.runtime.stop(0, release_lease=False)
                self.runtimes[0] = self._start(0)
                self.reconciles_mark = self._reconciles()
                self.moved = True

        if make_available:
            @rule()
            def make_workloads_available(self) -> None:
                self._did("make_workloads_available", locals())
                _make_workloads_available(self.client, namespace)


        if contend:
            @rule(name=parent_names, which=st.integers(0, 20), field=st.integers(0, 50),
                  writer=st.sampled_from(("patch", "update")))
            def contend_child(self, name: str, which: int, field: int, writer: str) -> None:
                self._did("contend_child", locals())
                present = [c for c in self._children(name, present=True)
                           if _key(c.ref) not in self.policies]
                if not present or name in self.paused:
                    return
                child = present[which % len(present)]
                paths = [p for p in _walk_leaves(child.obj) if _changeable(p)]
                obj = self._get(child.ref)
                if not paths or obj is None:
                    return
                reconciled = _conditions(self._get_parent(name) or {}).get("Reconciled") or {}
                if _waits_for_gate(child.ref, str(reconciled.get("message") or "")):
                    return  # held back by its dependencies (one handed over): not written now
                path = paths[field % len(paths)]
                built = _get_path(child.obj, path)
                if _get_path(obj, path) != built:
                    return  # not as built yet (it waits on something): no field to fight over
                self.mark = len(self.server.request_log())  # a failure shows the fight
                try:
                    self._contend(name, child.ref, path, built, writer)
                except AssertionError as failure:
                    raise AssertionError(f"{failure}\n{self._request_log()}") from None

        if policies:
            @rule(name=parent_names, which=st.integers(0, 20),
                  policy=st.sampled_from((*_POLICIES, None)))
            def set_policy(self, name: str, which: int, policy: str | None) -> None:
                self._did("set_policy", locals())
                children = self._children(name)
                if not children or name in self.paused:
                    return
                ref = children[which % len(children)].ref
                try:
                    self.client.patch(
                        ref.api_version, ref.kind, ref.name,
                        {"metadata": {"annotations": {POLICY_ANNOTATION: policy}}},
                        patch_type="application/merge-patch+json", namespace=ref.namespace)
                except _NotFoundError:
                    return  # a missing child carries no policy: it is created as usual
                self.policies.pop(_key(ref), None)
                self._caught_up()  # judged from when the operator's cache holds it
                if policy is not None:
                    self.policies[_key(ref)] = (policy, name, len(self.server.request_log()))
                    self.stats[f"policy {policy}"] += 1

        if faults:
            @rule(name=parent_names, parent=parents, fault=st.sampled_from(_FAULTS))
            def server_fault(self, name: str, parent: _Any, fault: str) -> None:
                self._did("server_fault", locals())
                if not self._change_spec(name, parent):
                    return
                injected = {"error-500": Faults(error_rate=0.5, seed=next(self.names)),
                            "lost-answer": Faults(lose_rate=0.5, seed=next(self.names)),
                            }.get(fault, Faults(watch_max_events=1))
                with self.server.faults(injected):
                    time.sleep(fault_seconds)

        if webhooks:
            @rule(name=parent_names, which=st.integers(0, 20), ignore=st.booleans())
            def hang_webhook(self, name: str, which: int, ignore: bool) -> None:
                self._did("hang_webhook", locals())
                present = [c for c in self._children(name, present=True)
                           if _key(c.ref) not in self.policies]
                if not present or name in self.paused:
                    return
                child = present[which % len(present)]
                group, _, version = child.ref.api_version.rpartition("/")
                endpoint = _HangingEndpoint()
                raw = self.client._client  # the machine's own objects: nothing to catch up on
                config = {
                    "apiVersion": "admissionregistration.k8s.io/v1",
                    "kind": "ValidatingWebhookConfiguration",
                    "metadata": {"name": _HANGING_WEBHOOK},
                    "webhooks": [{
                        "name": "hang.machine.optk.dev", "admissionReviewVersions": ["v1"],
                        "sideEffects": "None", "timeoutSeconds": hang_seconds,
                        "failurePolicy": "Ignore" if ignore else "Fail",
                        "clientConfig": {"url": f"https://127.0.0.1:{endpoint.port}/hang"},
                        "rules": [{"apiGroups": [group], "apiVersions": [version],
                                   "resources": ["*"], "operations": ["CREATE", "UPDATE"]}],
                        "objectSelector": {"matchLabels": {MANAGED_BY_LABEL: operator.name}},
                    }]}
                try:
                    raw.create(config)
                    with contextlib.suppress(_NotFoundError):
                        self.client.delete(child.ref.api_version, child.ref.kind,
                                           child.ref.name, namespace=child.ref.namespace)
                    if endpoint.accepted.wait(3.0):  # the operator's create waits on it now
                        self.stats["webhook hung"] += 1
                        started = time.monotonic()
                        self._get_parent(name)
                        took = time.monotonic() - started
                        assert took < hang_read_bound, (
                            f"while an admission webhook hung (the operator's create of "
                            f"{child.ref} waiting on it), the server took {took:.1f} s to "
                            f"answer another client's read (bound {hang_read_bound} s)")
                finally:
                    with contextlib.suppress(_errors.ApiError):
                        raw.delete("admissionregistration.k8s.io/v1",
                                   "ValidatingWebhookConfiguration", _HANGING_WEBHOOK)
                    endpoint.close()

        # -- invariants --------------------------------------------------------------------

        @invariant()
        def converged(self) -> None:
            failure: AssertionError | None = None
            try:
                self._converged()
            except AssertionError as caught:
                failure = caught
            if failure is not None:  # raised here, one origin: Hypothesis sees one bug
                raise AssertionError(f"{failure}\n{self._request_log()}")
            self.mark = self.next_mark  # a write after the checks began counts in the next step
            self.stats["checks"] += 1

        def _did(self, action: str, arguments: dict[str, _Any]) -> None:
            """Count a rule's run and keep it as a line of this example's script (the
            arguments as the rule got them, a parent by its name): a failure prints the steps
            as run even when Hypothesis cannot replay or shrink it (a ``FlakyFailure``)."""
            self.stats[action] += 1
            # locals() of a rule holds its closure's names too: keep its parameters
            parameters = inspect.signature(getattr(type(self), action)).parameters
            shown = ", ".join(f"{key}={value!r}" for key, value in sorted(arguments.items())
                              if key in parameters and key != "self")
            self.steps.append(f"state.{action}({shown})")

        def _script(self) -> str:
            """This example's steps as a script to run (``converged()`` after each, as the
            invariant runs), the last ``_SCRIPT_STEPS`` of them."""
            shown = self.steps[-_SCRIPT_STEPS:]
            lines = [f"this example's steps as run ({len(self.steps)}, the last {len(shown)}; "
                     "Hypothesis' shrunk script, when it has one, is shorter):",
                     f"state = {type(self).__name__}()", "state.converged()"]
            for step in shown:
                lines += [step, "state.converged()"]
            return "\n".join([*lines, "state.teardown()"])

        def _request_log(self) -> str:
            log = self.server.request_log()[self.mark:]
            shown = log[-request_log_lines:]
            lines = [f"the step's requests ({len(log)}, the last {len(shown)}; "
                     f"{_MACHINE_AGENT} is the machine):"]
            lines += [f"  {r.code} {r.verb} {r.resource} "
                      f"{(r.namespace + '/') if r.namespace else ''}{r.name or ''} "
                      f"[{r.user_agent}]" for r in shown]
            for name in sorted(self.live):
                with contextlib.suppress(_errors.ApiError):
                    said = [f"{t}={_said(c)}" for t, c in _conditions(self._get_parent(name))
                            .items()]
                    lines.append(f"parent {name}'s conditions: " + "; ".join(said))
            return "\n".join([*lines, self._script()])

        def _caught_up(self) -> None:
            """Wait (at most 2 s) until the operator's informers hold what the server holds of
            each object the machine wrote in the step: an idle operator that has not yet seen
            the step's change is not at a quiet point."""
            deadline = time.monotonic() + 2.0
            for api_version, kind, ns, name in self.client.take_written():
                live = self._get(_Ref(api_version, kind, name, ns))
                for runtime in self.runtimes:
                    if (api_version, kind) == self._api_version_kind():
                        informer = runtime.parents
                    else:
                        informer = runtime.informers.informer(api_version, kind)
                    if informer is None or (live is not None and not informer.accepts(live)):
                        continue  # outside its watch (no managed-by label, another shard)
                    want = None if live is None else live["metadata"].get("resourceVersion")
                    while time.monotonic() < deadline:
                        cached = informer.cache.get(ns, name)
                        seen = None if cached is None else cached["metadata"].get(
                            "resourceVersion")
                        if seen == want or (want is not None and seen is not None
                                            and _newer_or_same(seen, want)):
                            break
                        time.sleep(0.005)

        def _assigned(self) -> None:
            """Sharded: wait (at most ``idle_timeout``) until every parent is assigned to a
            replica, not draining, and in that replica's parent cache."""
            if not sharded:
                return
            api_version, kind = self._api_version_kind()
            deadline = time.monotonic() + idle_timeout
            while True:
                pending = []
                shards = {f"r{i}": runtime for i, runtime in enumerate(self.runtimes)}
                for parent in self.client.list(api_version, kind, namespace=namespace)["items"]:
                    meta = parent["metadata"]
                    labels = meta.get("labels") or {}
                    owner = shards.get(labels.get(SHARD_LABEL, ""))
                    if owner is None or DRAIN_LABEL in labels or owner.parents.cache.get(
                            namespace, meta["name"]) is None:
                        pending.append(f"{meta['name']} (shard {labels.get(SHARD_LABEL)})")
                if not pending:
                    return
                assert time.monotonic() < deadline, (
                    f"parents not assigned to a replica within {idle_timeout}s: "
                    + ", ".join(pending))
                time.sleep(0.02)

        def _idle(self) -> None:
            for runtime in self.runtimes:
                assert wait_idle(runtime, idle_timeout), (
                    f"the operator was not idle within {idle_timeout}s (a reconcile loop?)")

        def _quiet(self) -> None:
            """Caught up and idle; a retry or held repair due within ``retry_window`` seconds is
            waited for (at most ``retry_window`` in all: an operator retrying for ever is
            judged as it stands)."""
            self._caught_up()
            self._assigned()
            self._idle()
            deadline = time.monotonic() + retry_window
            while (due := min((d for r in self.runtimes if (d := r.queue.next_due) is not None),
                              default=None)) is not None and due <= retry_window \
                    and time.monotonic() + due < deadline:
                time.sleep(due + 0.01)
                self._idle()
            if sharded:
                self._assigned()
                self._idle()

        def _converged(self) -> None:
            self._quiet()
            self.next_mark = len(self.server.request_log())
            reconciles = self._reconciles()
            assert reconciles - self.reconciles_mark <= max_reconciles_per_step, (
                f"{reconciles - self.reconciles_mark} reconciles in one step")
            self.reconciles_mark = reconciles
            self._check_untouched()
            self._check_shards()
            self._check_gates()
            self._check_children()
            self._check_deleted()
            if check_conditions:
                self._check_conditions()
            if check_secrets:
                self._check_secrets()
            if check_resync:
                self._check_resync()

        def _check_shards(self) -> None:
            """Sharded: each parent cached by its replica alone, and its children written in
            the step by one replica (but in a step that restarted replicas)."""
            moved, self.moved = self.moved, False
            if not sharded:
                return
            writes = [r for r in self._operator_writes() if r.code < 400]
            for name in self.live:
                live = self._get_parent(name)
                if live is None:
                    continue
                holders = [f"r{i}" for i, runtime in enumerate(self.runtimes)
                           if runtime.parents.cache.get(namespace, name) is not None]
                shard = (live["metadata"].get("labels") or {}).get(SHARD_LABEL)
                assert holders == [shard], (
                    f"parent {name} (shard {shard}) is cached by {holders or 'no replica'}")
                if moved:
                    continue
                refs = {_key(c.ref) for c in self._declared(live).children}
                writers = {str(r.user_agent).rpartition(_REPLICA)[2] for r in writes
                           if any(r.namespace == ns and r.name == n and _resource_of(
                               r.resource, k) for _, k, ns, n in refs)}
                assert writers <= {shard}, (
                    f"parent {name} (shard {shard}): its children were written by replicas "
                    f"{sorted(writers)} in one step")

        def _check_gates(self) -> None:
            """No child was created or updated in the step while its component waits for its
            dependencies (``builders.Component``: ``depends_on``, ``precondition``,
            ``when_served``), judged from the builders' own evaluation and the live objects."""
            from reconciler._reconcile.declared import declared_children
            # a create's request names no object (it is in the body): a child that exists now
            # and did not at the last quiet point was created in the step
            writes = [r for r in self._operator_writes()
                      if r.code < 400 and r.verb in ("update", "patch")]
            existed, self.existed = self.existed, set()
            for name in self.live:
                live = self._get_parent(name)
                if live is None or name in self.paused:
                    continue
                runtime = self._owner(live)
                declared = declared_children(  # no replica's labels: the builders as written
                    runtime.reconciler.build, live, operator_name=operator.name,
                    namespaced=runtime.reconciler._namespaced)
                children = [(c.ref, c.state, c.node) for c in declared.children]
                if not any(node is not None for _, _, node in children):
                    continue
                objects = {ref: obj for ref, _, _ in children if (obj := self._get(ref))}
                self.existed |= {_key(ref) for ref in objects}
                gates = ChildGates(children, parent=live, live=objects,
                                   served=runtime.reconciler.served)
                for index in gates.ordered():
                    ref, state, _ = children[index]
                    wait = None if str(state).upper().endswith("ABSENT") else gates.gate(index)
                    if wait is None or _key(ref) in self.foreign:
                        continue
                    assert ref not in objects or _key(ref) in existed, (
                        f"parent {name}: the operator created {ref} while it waits: "
                        f"{wait.message}")
                    for r in writes:
                        assert not (r.namespace == ref.namespace and r.name == ref.name
                                    and _resource_of(r.resource, ref.kind)), (
                            f"parent {name}: the operator wrote ({r.verb}) {ref} while it "
                            f"waits: {wait.message}")

        def _check_untouched(self) -> None:
            writes = self._operator_writes()
            for key, owner in self.foreign.items():
                _, kind, ns, name = key
                for r in (r for r in writes if r.code < 400):  # refused: nothing changed
                    assert not (r.namespace == ns and r.name == name
                                and _resource_of(r.resource, kind)), (
                        f"the operator wrote ({r.verb}) the foreign {kind} {ns}/{name} where "
                        f"{owner}'s child goes: it is not the operator's (no "
                        f"{LAST_APPLIED_ANNOTATION}, no owner reference)")
            log = self.server.request_log()
            for key, (policy, owner, seen) in self.policies.items():
                _, kind, ns, name = key
                for r in log[max(self.mark, seen):]:
                    assert not (r.user_agent != _MACHINE_AGENT and r.code < 400
                                and r.verb in _FORBIDDEN[policy] and r.namespace == ns
                                and r.name == name and _resource_of(r.resource, kind)), (
                        f"the operator wrote ({r.verb}) {kind} {ns}/{name}, a child of {owner} "
                        f"annotated {POLICY_ANNOTATION}: {policy}")
            if not self.paused:
                return
            from reconciler._reconcile.sharing import is_shared
            shared_by_running = {  # another parent's reconcile writes these: not paused
                child.ref for other in self.live if other not in self.paused
                for child in self._children(other) if is_shared(child.obj)}
            cleaned_up = {  # a parent deleted in this step: its cleanup writes these
                ref for other, refs in self.deleted.items()
                if other not in self.paused and self.deleted_at.get(other, -1) >= self.mark
                for ref in refs}
            for name in self.paused:
                live = self._get_parent(name)
                if live is None:
                    continue
                for child in self._declared(live).children:
                    ref = child.ref
                    if ref in shared_by_running or (is_shared(child.obj) and ref in cleaned_up):
                        continue  # a shared child another parent builds (or let go) is its
                    for r in writes:
                        assert not (r.namespace == ref.namespace and r.name == ref.name
                                    and _resource_of(r.resource, ref.kind)), (
                            f"paused parent {name}: the operator wrote ({r.verb}) its child {ref}")

        def _check_children(self) -> None:
            from reconciler._reconcile.sharing import is_shared, shared_record
            for name in self.live:
                if name in self.paused:
                    continue
                live = self._get_parent(name)
                assert live is not None, f"parent {name} vanished"
                declared = self._declared(live)
                failed = [f for f in declared.failures if not _waits_on_input(f.error)]
                assert declared.build_error is None, f"parent {name}: build failed {declared}"
                assert not failed, f"parent {name}: builders failed {declared}"
                reconciled = _conditions(live).get("Reconciled") or {}
                # the waits are said whatever the reason: a failure beside them comes first
                gated = str(reconciled.get("message") or "")
                for child in declared.children:
                    ref = child.ref
                    if _key(ref) in self.foreign or _waits_for_gate(ref, gated):
                        continue
                    if self._immutable(ref, reconciled):
                        continue  # said: the parent names the refusal (checked below)
                    obj = self._get(ref)
                    if obj is not None and _held_by_other(obj, live):
                        continue  # another parent's (its owner label): skipped, not ours
                    policy = self._policy(ref, obj)
                    if policy in _UNCOMPARED or (policy == "no-prune" and str(
                            child.state).upper().endswith("ABSENT")):
                        continue  # kept as it is: what the policy forbids was checked
                    if str(child.state).upper().endswith("ABSENT"):
                        kept = obj is not None and is_shared(obj) and any(
                            uid != live["metadata"].get("uid") for uid in shared_record(obj))
                        assert obj is None or kept, f"parent {name}: ABSENT child {ref} exists"
                        continue  # a shared child another parent builds is kept for it
                    if obj is None and len(failed) < len(declared.failures):
                        continue  # waits on an input: its message names no dependency's waits
                    assert obj is not None, f"parent {name}: PRESENT child {ref} is missing"
                    result = self._build_diff(child, obj)
                    assert result.is_empty, (
                        f"parent {name}: child {ref} differs from its build:\n"
                        f"{result.explain()}")

        @staticmethod
        def _build_diff(child: _Any, obj: dict[str, _Any]) -> _Any:
            """``calculate_patch`` of a live child against its build (server defaults aside)."""
            from objectmatcher import calculate_patch, set_last_applied
            from reconciler._reconcile.sharing import is_shared, wants_shared
            desired = wants_shared(child.obj) if is_shared(child.obj) else child.obj
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            if LAST_APPLIED_ANNOTATION not in annotations:
                # written by server-side apply: the built fields compared three-way
                obj = copy.deepcopy(obj)
                obj["metadata"]["annotations"] = {**annotations, LAST_APPLIED_ANNOTATION:
                    set_last_applied(desired)["metadata"]["annotations"][
                        LAST_APPLIED_ANNOTATION]}
            return calculate_patch(obj, desired)

        def _differs(self, child: _Any) -> bool:
            obj = self._get(child.ref)
            return obj is not None and not self._build_diff(child, obj).is_empty

        def _policy(self, ref: _Any, obj: _abc.Mapping[str, _Any] | None) -> str | None:
            """The policy the machine set on a child, or None; forgotten once the child is
            gone (a missing child carries none: it is created as usual)."""
            if _key(ref) not in self.policies:
                return None
            if obj is None or ((obj.get("metadata") or {}).get("annotations") or {}).get(
                    POLICY_ANNOTATION) is None:
                del self.policies[_key(ref)]
                return None
            return self.policies[_key(ref)][0]

        def _check_deleted(self) -> None:
            from reconciler._reconcile.sharing import is_shared, shared_record
            for name, refs in self.deleted.items():
                if name in self.paused:
                    continue  # a paused parent's cleanup is not run: it waits, documented
                left = self._get_parent(name)
                if left is not None:
                    finalizers = (left.get("metadata") or {}).get("finalizers") or []
                    stuck = " (cleanup stuck: its finalizers " + ", ".join(finalizers) + \
                        " are still there)" if finalizers else ""
                    raise AssertionError(f"deleted parent {name} still exists{stuck}")
                for ref in refs:
                    obj = self._get(ref)
                    if obj is None or _key(ref) in self.foreign:
                        continue  # gone, or someone else's object stands there now
                    if is_shared(obj):  # kept while another parent records it
                        assert shared_record(obj), (
                            f"deleted parent {name}: its shared child {ref} remains, no "
                            "parent records it")
                        continue
                    # what stands at its place now may be another's (a foreign object, or
                    # another parent's child of that name, created after the deletion)
                    assert not _owned_by(obj, self.deleted_uids.get(name, "")), (
                        f"deleted parent {name}: its child {ref} remains")
            for key, owner in self.foreign.items():
                api_version, kind, ns, name = key
                assert self._get(_Ref(api_version, kind, name, ns)) is not None, (
                    f"the foreign {kind} {ns}/{name} where {owner}'s child goes was deleted "
                    "by the operator")

        def _check_conditions(self) -> None:
            for name in self.live:
                live = self._get_parent(name)
                assert live is not None, f"parent {name} vanished"
                conditions = _conditions(live)
                reconciled = conditions.get("Reconciled") or {}
                ready = conditions.get("Ready") or {}
                generation = (live.get("metadata") or {}).get("generation")
                if name in self.paused:
                    assert reconciled.get("reason") == "ReconcilePaused", (
                        f"paused parent {name}: Reconciled is {_said(reconciled)}, not "
                        "False/ReconcilePaused")
                    continue
                declared = self._declared(live)
                waits = ("InputMissing", "InputForbidden") if any(
                    _waits_on_input(f.error) for f in declared.failures) else ()
                if any(_key(c.ref) in self.foreign and str(c.state).upper().endswith("PRESENT")
                       for c in declared.children):  # ABSENT there: no child of its own
                    assert reconciled.get("status") == "False" and reconciled.get(  # noqa: PT018
                        "reason") in ("ChildrenSkipped", *_GATED, *waits), (
                            f"parent {name}: a foreign object holds a child's place but "
                            f"Reconciled is {_said(reconciled)}, not False/ChildrenSkipped "
                            "(or a dependency's or an input's wait, said first)")
                    assert ready.get("status") != "True", (
                        f"parent {name}: Ready is True while a foreign object holds a "
                        "child's place")
                    continue
                observed = [c.ref for c in declared.children
                            if self.policies.get(_key(c.ref), ("",))[0] == "observe"
                            and str(c.state).upper().endswith("PRESENT")
                            and self._differs(c)]
                if observed:
                    drifted = conditions.get("Drifted") or {}
                    assert drifted.get("status") == "True", (
                        f"parent {name}: its observed child {observed[0]} differs from its "
                        f"build but Drifted is {_said(drifted)}, not True")
                refused = any(self._immutable(c.ref, reconciled) for c in declared.children)
                if any(_waits_on_input(f.error) for f in declared.failures):
                    # beside a refused change of a handed-over child: two failures, said
                    # together (ChildrenFailed, naming both)
                    assert (reconciled.get("status"), reconciled.get("reason")) in (
                        ("False", "InputMissing"), ("False", "InputForbidden"),
                        *((("False", "ChildrenFailed"),) if refused else ())), (
                        f"parent {name}: a builder waits on an input but Reconciled is "
                        f"{_said(reconciled)}, not False/InputMissing")
                    continue
                if declared.failed:
                    continue
                if reconciled.get("reason") in _GATED:
                    assert ready.get("status") != "True", (
                        f"parent {name}: Ready while children wait for their dependencies")
                    continue  # children wait in dependency order (checked as children)
                if refused:
                    assert ready.get("status") != "True", (
                        f"parent {name}: Ready while a child's immutable field differs")
                    continue
                assert reconciled.get("status") == "True", (
                    f"parent {name}: converged but Reconciled is {_said(reconciled)}")
                assert reconciled.get("observedGeneration") == generation, (
                    f"parent {name}: Reconciled observed generation "
                    f"{reconciled.get('observedGeneration')}, the parent is at {generation}")
                waiting = ("ChildrenNotReady", "ChildrenUnhealthy") + (
                    ("ChildrenPending",) if (conditions.get("Contested") or {}).get(
                        "status") == "True" else ())
                assert ready.get("status") == "True" or ready.get("reason") in waiting, (
                    f"parent {name}: converged but Ready is {_said(ready)}")

        def _check_secrets(self) -> None:
            values: set[str] = set()
            objects: list[_Any] = []
            for name in self.live:
                live = self._get_parent(name)
                if live is None:
                    continue
                objects.append(live)
                for child in self._declared(live).children:
                    if child.ref.kind == "Secret" and child.ref.api_version == "v1":
                        values |= _secret_values(child.obj)
                    if (obj := self._get(child.ref)) is not None and child.ref.kind != "Secret":
                        objects.append(obj)
            values |= {v for v in self.input_secrets if len(v) >= _SECRET_MIN}
            if not values:
                return
            events = self.client.list("v1", "Event", namespace=namespace)["items"]
            places = [(f"the log line {line!r}", line) for line in
                      (self.logs.lines if self.logs is not None else ())]
            places += [(f"the Event {e['metadata']['name']}",
                        f"{e.get('message', '')} {e.get('note', '')}") for e in events]
            places += [(f"an annotation of {o['kind']} {o['metadata'].get('name')}",
                        repr((o.get("metadata") or {}).get("annotations") or {}))
                       for o in objects]
            for where, text in places:
                for value in values:
                    assert value not in text, f"a Secret value appears in {where[:300]}"

        def _check_resync(self) -> None:
            # a contest in progress moves on with any reconcile once its writer's quiet window
            # or backoff try is due (docs/driver.md, "Contention"): its parent's status may
            # change then; its children may not be written but by the contest's own rules
            contested = {name for name in self.live if (_conditions(self._get_parent(name))
                                                        .get("Contested") or {}).get(
                                                            "status") == "True"}
            self.mark = len(self.server.request_log())
            for runtime in self.runtimes:
                runtime.resync_all()
            self._quiet()
            writes = [r for r in self._operator_writes()
                      if not r.resource.startswith(_BOOKKEEPING) and r.code < 400
                      and not (r.resource.endswith("/status") and r.name in contested)]
            assert not writes, (
                "a forced resync wrote: " + ", ".join(
                    f"{r.verb} {r.resource} {r.namespace}/{r.name}" for r in writes))
            self.reconciles_mark = self._reconciles()
            self.next_mark = len(self.server.request_log())

    OperatorMachine.__name__ = OperatorMachine.__qualname__ = (
        f"{operator.kind}OperatorMachine")
    return OperatorMachine
