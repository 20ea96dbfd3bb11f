"""The operator state machine on the examples: the Thanos operator as shipped (three-way merge,
declared inputs, component gates, pruning), the same operator writing with server-side apply,
and the Observer operator (an operator that installs an operator, its Thanos CRD shared by every
Observer). Fixed seeds (``derandomize``) keep CI stable; the soak (``make soak``) runs them
longer with fresh seeds (tests/testing/soak.py)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import yaml
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

from builders.specs import to_spec_dict
from builders.testing import spec_instances
from examples.observer.crds import API_VERSION as OBSERVER_API_VERSION
from examples.observer.crds import KIND as OBSERVER_KIND
from examples.observer.operator import make_operator as make_observer_operator
from examples.thanos.crds import API_VERSION, KIND, ThanosSpec
from examples.thanos.operator import make_operator, samples
from reconciler import Applying, LeaderElection, ServerSideApply, Sharding
from reconciler.testing import operator_machine

#: Hypothesis' explain phase traces every line run: minutes with an operator's threads
NO_EXPLAIN = tuple(p for p in Phase if p is not Phase.explain)
CI = settings(max_examples=4, stateful_step_count=8, deadline=None, derandomize=True,
              phases=NO_EXPLAIN, report_multiple_bugs=False)

SSA_PARENT = {"apiVersion": API_VERSION, "kind": KIND,
              "spec": {"image": "quay.io/thanos/thanos:v0.34.1", "query": {"replicas": 1}}}

#: every valid spec: the soak's parents (many draws are rejected, so a run is long)
THANOS = spec_instances(ThanosSpec).map(
    lambda spec: {"apiVersion": API_VERSION, "kind": KIND, "spec": to_spec_dict(spec)})
#: the demo's sample parents (samples.yaml) and small variations: CI's parents, never rejected
THANOS_SAMPLES = st.builds(
    lambda sample, replicas, secret: {**sample, "spec": {
        **sample["spec"], "query": {**(sample["spec"].get("query") or {}), "replicas": replicas},
        **({} if secret else {"objectStorageSecret": None})}},
    st.sampled_from([dict(doc) for doc in yaml.safe_load_all(samples.read_text()) if doc]),
    st.integers(1, 3), st.booleans(),
).map(lambda parent: {**parent, "spec": {k: v for k, v in parent["spec"].items()
                                         if v is not None}})

#: an Observer without Thanos (its Thanos and the shared CRD ABSENT), and one with a query
OBSERVER_WITHOUT_THANOS: dict[str, Any] = {"apiVersion": OBSERVER_API_VERSION,
                                           "kind": OBSERVER_KIND, "spec": {}}
OBSERVER_WITH_THANOS: dict[str, Any] = {**OBSERVER_WITHOUT_THANOS,
                                        "spec": {"thanos": {"query": {"replicas": 1}}}}
OBSERVERS = st.one_of(
    st.just({}),
    st.just({"thanos": {"enabled": False}}),
    st.builds(lambda replicas, secret: {"thanos": {
        "query": {"replicas": replicas}, **({"objectStorageSecret": secret} if secret else {})}},
        st.integers(1, 3), st.sampled_from([None, "objstore"])),
).map(lambda spec: {"apiVersion": OBSERVER_API_VERSION, "kind": OBSERVER_KIND, "spec": spec})


def thanos_machine(parents: Any = THANOS_SAMPLES, **options: Any) -> Any:
    """The Thanos example's machine (``options`` go to ``operator_machine``)."""
    return operator_machine(make_operator(), parents=parents, **options)


def thanos_ssa_machine(parents: Any = THANOS_SAMPLES, **options: Any) -> Any:
    """The Thanos example writing with server-side apply."""
    operator = attrs.evolve(make_operator(), applying=Applying(strategy=ServerSideApply()))
    return operator_machine(operator, parents=parents, **options)


def thanos_sharded_machine(parents: Any = THANOS_SAMPLES, **options: Any) -> Any:
    """The Thanos example sharded over two replicas in the process (short leases)."""
    sharding = Sharding(namespace="machine", lease_duration=2.0, renew_deadline=1.4,
                        renew_period=0.25, drain_timeout=10.0, replicas_hint=2)
    election = LeaderElection(namespace="machine", lease_duration=2.0, renew_deadline=1.4,
                              retry_period=0.25)
    operator = attrs.evolve(make_operator(), sharding=sharding, leader_election=election)
    return operator_machine(operator, parents=parents, replicas=2, **options)


def observer_machine(**options: Any) -> Any:
    """The Observer example's machine (the Thanos CRD it installs shared by the Observers)."""
    return operator_machine(make_observer_operator(shared_crd=True, events=True),
                            parents=OBSERVERS, **options)


#: the soak's machines (every valid Thanos spec)
MACHINES = {"thanos": lambda: thanos_machine(THANOS),
            "thanos-ssa": lambda: thanos_ssa_machine(THANOS),
            "thanos-sharded": lambda: thanos_sharded_machine(THANOS),
            "observer": observer_machine}


def test_thanos_machine() -> None:
    run_state_machine_as_test(thanos_machine(), settings=CI)


def test_thanos_machine_with_server_side_apply() -> None:
    run_state_machine_as_test(thanos_ssa_machine(), settings=CI)


def test_thanos_machine_sharded_on_two_replicas() -> None:
    # each parent reconciled by one replica, gates kept, no write on a forced resync
    run_state_machine_as_test(thanos_sharded_machine(), settings=settings(CI, max_examples=3))


def test_thanos_machine_sharded_keeps_the_gates_in_steps() -> None:
    # the query frontend waits for the query Deployment on its replica as unsharded (the
    # derandomized run above may not draw it before the query is available)
    state = thanos_sharded_machine()()
    try:
        p0 = state.create_parent(parent={**SSA_PARENT, "spec": {
            **SSA_PARENT["spec"], "queryFrontend": {"ingress": {"host": "q.example"}}}})
        state.converged()
        state.make_workloads_available()
        state.converged()
        assert state._get(next(c.ref for c in state._children(p0, present=True)
                               if c.ref.name.endswith("frontend")))  # then it is created
    finally:
        state.teardown()


def test_thanos_machine_sharded_leaves_an_ignored_child_alone_when_its_parent_moves() -> None:
    # the sharded soak found it (session 15): a restart moved a parent to the other replica,
    # whose adoption relabelled its child marked optk.dev/policy: ignore with its shard; now
    # the new owner reads each child first and leaves one whose policy forbids patches alone
    state = thanos_sharded_machine()()
    try:
        p0 = state.create_parent(parent=SSA_PARENT)
        state.converged()
        for which in range(3):
            state.set_policy(name=p0, which=which, policy="ignore")
            state.converged()
        for _ in range(2):
            state.restart_operator()
            state.converged()
    finally:
        state.teardown()


def test_thanos_machine_sharded_deletes_a_handed_over_child_turned_absent() -> None:
    # the sharded soak found it (session 15): a foreign query frontend handed over while the
    # frontend waits (no query) is never written, so it never gets the replica's shard label;
    # a spec change while the operator is down turns the frontend ABSENT, and the replica's
    # caches, which select the shard label, never saw it: it stayed. Sharded, an ABSENT child
    # missing from the caches is read from the server
    state = thanos_sharded_machine()()
    try:
        p0 = _handed_over(state, {**SSA_PARENT, "spec": {
            "image": "quay.io/thanos/thanos:v0.34.1", "serviceMonitors": True,
            "objectStorageSecret": "g", "queryFrontend": {"replicas": 1, "logLevel": "info"}}},
            which=12, place=("Deployment", "machine", "p0-query-frontend"))
        state.crash_operator(name=p0, parent={**SSA_PARENT, "spec": {
            "image": "quay.io/thanos/thanos:v0.34.1", "serviceMonitors": True,
            "query": {"replicas": 1, "logLevel": "info"}}})
        state.converged()
    finally:
        state.teardown()


def test_thanos_machine_sharded_wakes_a_parent_when_the_foreign_object_goes() -> None:
    # the machine found it (issue 38): the foreign object lacks the shard label its replica's
    # child informers select, so the parent skipping it slept until its next reconcile; now its
    # replica watches that object by name while it waits (reconciler._sharding.foreign)
    state = thanos_sharded_machine()()
    try:
        for which in range(3):
            state.create_parent_over_foreign(parent=SSA_PARENT, which=which)
        state.converged()
        state.release_foreign(which=0, hand_over=False)
        state.converged()
        state.release_foreign(which=0, hand_over=True)
        state.converged()
    finally:
        state.teardown()


@pytest.mark.parametrize("machine", [thanos_machine, thanos_sharded_machine],
                         ids=["one-replica", "sharded"])
def test_a_foreign_object_where_a_child_is_no_longer_built_leaves_the_parent_reconciled(
    machine: Any,
) -> None:
    # the sharded machine found it (issue 38): a foreign object at the place of a child the
    # parent came to declare ABSENT was ChildrenSkipped where the operator's cache held it (its
    # managed-by label) and Reconciled=True where it did not (a replica's shard-selected
    # cache); the parent has no such child, which is what ABSENT asks: True in both
    with_frontend = {**SSA_PARENT, "spec": {**SSA_PARENT["spec"], "queryFrontend": {}}}
    state = machine()()
    try:
        planned = {**with_frontend, "metadata": {"name": "p0", "namespace": "machine",
                                                 "uid": "00000000-0000-0000-0000-000000000000"}}
        present = [c for c in state._declared(planned).children
                   if str(c.state).upper().endswith("PRESENT")]
        which = next(i for i, c in enumerate(present)
                     if c.ref.kind == "Service" and c.ref.name.endswith("frontend"))
        assert which % 2 == 1  # odd: the foreign object has the built values (always valid)
        p0 = state.create_parent_over_foreign(parent=with_frontend, which=which)
        assert state.foreign, "the foreign object was not created"
        state.converged()  # the frontend's place is held: ChildrenSkipped (checked)
        state.change_parent_spec(name=p0, parent=SSA_PARENT)  # no frontend: declared ABSENT
        state.converged()
        state.crash_operator(name=p0, parent={**SSA_PARENT, "spec": {
            **SSA_PARENT["spec"], "query": {"replicas": 2}}})  # a new process's caches
        state.converged()
        live = state._get_parent(p0)
        reconciled = next(c for c in live["status"]["conditions"] if c["type"] == "Reconciled")
        assert (reconciled["status"], reconciled["reason"]) == ("True", "ReconcileSucceeded"), (
            reconciled["message"])
    finally:
        state.teardown()


@pytest.mark.parametrize("machine", [thanos_machine, thanos_sharded_machine],
                         ids=["one-replica", "sharded"])
def test_a_hanging_webhook_in_steps(machine: Any) -> None:
    # the random runs draw it rarely: the operator's create waits on a webhook that never
    # answers, the server answers others meanwhile, and once the webhook is gone the child is
    # back (refused under Fail and retried; let through under Ignore)
    state = machine()()
    try:
        p0 = state.create_parent(parent=SSA_PARENT)
        state.converged()
        for which, ignore in ((0, False), (1, True)):
            state.hang_webhook(name=p0, which=which, ignore=ignore)
            state.converged()
        assert state.stats["webhook hung"] == 2
    finally:
        state.teardown()


def test_a_spec_change_the_crd_refuses_is_a_refused_user_action() -> None:
    # the soak met it: a ruler's storage may not change once set (a CEL transition rule the
    # spec strategy cannot honour: it draws one object); the server refuses the change with
    # 422, as it refuses a user's kubectl apply, and the machine goes on
    ruler = {**SSA_PARENT, "spec": {**SSA_PARENT["spec"],
                                    "rule": {"replicas": 1, "storage": "10Gi"}}}
    state = thanos_machine()()
    try:
        p0 = state.create_parent(parent=ruler)
        state.converged()
        state.change_parent_spec(name=p0, parent={**ruler, "spec": {
            **ruler["spec"], "rule": {"replicas": 1, "storage": "1Mi"}}})
        state.converged()
        assert state.stats["spec change refused"] == 1
        assert state._get_parent(p0)["spec"]["rule"]["storage"] == "10Gi"
    finally:
        state.teardown()


def test_a_contested_child_beside_a_missing_input_is_repaired_and_the_contest_ends() -> None:
    # the sharded soak found it (issue 38), and one replica shows it too: a parent waiting on
    # a missing input (a permanent failure: InputMissing) and a second writer on its query
    # Deployment. The held repair's timer was dropped with the failure (settling), and once
    # repaired, the reconcile right after it asked for no look at the quiet window's end
    # (contention): not repaired, then Contested=True, for 30 s
    state = thanos_machine()()
    try:
        p0 = state.create_parent(parent={**SSA_PARENT, "spec": {
            "image": "0691:z", "objectStorageSecret": "wxb",
            "query": {"replicas": 0, "logLevel": "debug"},
            "queryFrontend": {"replicas": 1, "logLevel": "info"}}})
        state.converged()
        state.contend_child(field=7, name=p0, which=4, writer="patch")
        state.converged()
        assert state.stats["fights"] >= 1
    finally:
        state.teardown()


#: a query frontend without a query (it waits: the query builds nothing) and a ruler
FRONTEND_WITHOUT_QUERY = {**SSA_PARENT, "spec": {
    "image": "cxn3-k9:jx2", "serviceMonitors": True,
    "queryFrontend": {"replicas": 0, "logLevel": "debug"},
    "rule": {"replicas": 1, "logLevel": "info", "storage": "10Gi"}}}
FRONTEND_WITHOUT_QUERY_GATEWAY = {**FRONTEND_WITHOUT_QUERY, "spec": {
    **FRONTEND_WITHOUT_QUERY["spec"], "image": "0:000", "serviceMonitors": False,
    "storeGateway": {"replicas": 1, "logLevel": "info", "storage": "10Gi"}}}


def _handed_over(state: Any, parent: dict[str, Any], *, which: int,
                 place: tuple[str, str, str]) -> str:
    """A parent created over a foreign object at ``place`` (kind, namespace, name), which is
    then handed over; the parent's name."""
    name: str = state.create_parent_over_foreign(parent=parent, which=which)
    assert [key[1:] for key in state.foreign] == [place]
    state.converged()
    state.release_foreign(hand_over=True, which=0)
    state.converged()
    return name


def test_a_refused_handover_beside_a_child_waiting_on_a_dependency_says_both() -> None:
    # the server-side-apply soak found it (session 15): a foreign StatefulSet at the ruler's
    # place, handed over, and its change refused (immutable); the query frontend waits for a
    # query that builds nothing. Reconciled said only the refusal (ImmutableFieldChanged), so
    # the frontend seemed missing for no reason; the message now names the waits too
    state = thanos_ssa_machine()()
    try:
        p0 = _handed_over(state, FRONTEND_WITHOUT_QUERY_GATEWAY, which=4,
                          place=("StatefulSet", "machine", "p0-rule"))
        reconciled = {c["type"]: c for c in state._get_parent(p0)["status"]["conditions"]}[
            "Reconciled"]
        assert reconciled["reason"] == "ImmutableFieldChanged"
        assert "waits for component 'query'" in reconciled["message"]
    finally:
        state.teardown()


def test_a_handed_over_child_waiting_on_a_dependency_is_not_contested() -> None:
    # the sharded soak found it (session 15), and one replica shows it too: a foreign query
    # frontend Deployment handed over while the frontend waits for a query that builds nothing;
    # the operator holds it back (no write while it waits), so a second writer's change of it
    # is no contest the operator should win; the machine expected a repair within 30 s
    state = thanos_machine()()
    try:
        p0 = _handed_over(state, FRONTEND_WITHOUT_QUERY, which=16,
                          place=("Deployment", "machine", "p0-query-frontend"))
        state.contend_child(field=40, name=p0, which=0, writer="update")
        state.converged()
    finally:
        state.teardown()


def test_observer_machine_a_foreign_object_at_a_deleted_parents_childs_place_is_not_its() -> None:
    # the Observer soak found it (session 15): after p0's deletion, someone creates the Thanos
    # CRD (shared) where p1's child goes; the machine took it for p0's child left behind.
    # What stands at a deleted parent's child's place afterwards is judged by its owner
    state = observer_machine()()
    try:
        p0 = state.create_parent(parent=OBSERVER_WITHOUT_THANOS)
        state.converged()
        state.delete_parent(name=p0)
        state.converged()
        state.create_parent_over_foreign(parent=OBSERVER_WITH_THANOS, which=6)
        assert [key[1:] for key in state.foreign] == [
            ("CustomResourceDefinition", None, "thanoses.monitoring.optk.dev")]
        state.converged()
        state.release_foreign(hand_over=True, which=0)  # then another parent's child
        state.converged()
    finally:
        state.teardown()


def test_observer_machine_the_last_sharers_cleanup_deletes_a_paused_parents_absent_crd() -> None:
    # the Observer soak found it (session 15): p0 (no Thanos: the shared CRD ABSENT) is
    # paused; p1 turns Thanos on (the CRD is created, p1 records it) and is deleted: its cleanup
    # deletes the CRD it was the last to record. The machine took that for a write of the
    # paused p0's child; the cleanup of a parent deleted in the step writes its shared children
    state = observer_machine()()
    try:
        p0 = state.create_parent(parent=OBSERVER_WITHOUT_THANOS)
        state.converged()
        state.set_paused(name=p0, paused=True)
        state.converged()
        p1 = state.create_parent(parent=OBSERVER_WITH_THANOS)
        state.converged()
        state.delete_parent(name=p1)
        state.converged()
    finally:
        state.teardown()


def test_a_contest_in_progress_may_change_its_parents_status_at_a_forced_resync() -> None:
    # the server-side-apply soak found it (session 15): another writer scales the ruler's
    # StatefulSet three times, Contested=True and the repair backs off; at the quiet point the
    # forced resync's reconcile said the child as applied where the held repair had said
    # nothing, and wrote the status. A contest moves on with any reconcile: the machine
    # leaves a contested parent's status to it (its children stay checked)
    state = thanos_ssa_machine()()
    try:
        p0 = state.create_parent(parent={**SSA_PARENT, "spec": {
            "image": "0:0", "serviceMonitors": True,
            "rule": {"replicas": 1, "logLevel": "info", "storage": "10Gi"}}})
        state.converged()
        for _ in range(4):
            state.make_workloads_available()
            state.converged()
        for _ in range(3):
            state.scale_child(name=p0, replicas=0, which=0)
            state.converged()
    finally:
        state.teardown()


def test_observer_machine_recreates_the_shared_crd_someone_deleted() -> None:
    # the soak found it (issue 38): the shared Thanos CRD names no owner, so its deletion
    # woke no Observer and it stayed missing until the resync
    state = observer_machine()()
    try:
        p0 = state.create_parent(parent=OBSERVER_WITH_THANOS)
        state.converged()
        assert state._children(p0)[0].ref.kind == "CustomResourceDefinition"
        state.delete_child(name=p0, which=0)
        state.converged()
    finally:
        state.teardown()


def test_observer_machine_a_paused_parents_shared_crd_is_written_by_another_parent() -> None:
    # the soak found it (session 14): a second Observer joining the shared Thanos CRD writes it
    # (its name in the optk.dev/shared-by record) while the first one is paused. The machine
    # took that for a write of the paused parent's child; a shared child that a parent not
    # paused builds too is that parent's to write
    state = observer_machine()()
    thanos = OBSERVER_WITH_THANOS
    try:
        p0 = state.create_parent(parent=OBSERVER_WITHOUT_THANOS)
        state.converged()
        state.server_fault(fault="error-500", name=p0, parent=thanos)
        state.converged()
        state.set_paused(name=p0, paused=True)
        state.converged()
        state.create_parent(parent=thanos)
        state.converged()
    finally:
        state.teardown()


def test_observer_machine_deletes_a_parent_whose_dependent_child_a_policy_keeps() -> None:
    # the soak found it (issue 38): a child marked optk.dev/policy: ignore, on which other
    # children's teardown waited (DependentsNotGone): the deleted Observer's cleanup finalizer
    # stayed for good
    state = observer_machine()()
    try:
        p0 = state.create_parent(parent=OBSERVER_WITH_THANOS)
        state.converged()
        for _ in range(3):
            state.make_workloads_available()
            state.converged()
        state.set_policy(name=p0, policy="ignore", which=9)
        state.converged()
        state.delete_parent(name=p0)
        state.converged()
    finally:
        state.teardown()


def test_observer_machine_an_absent_child_of_a_kind_no_longer_served_is_done() -> None:
    # the soak found it (issue 38): the last Observer's deletion removed the Thanos CRD; a new
    # Observer without Thanos builds its Thanos ABSENT, and the child cache's informer for the
    # kind, refused (not served), made that child fail (ChildrenFailed, retried for good) where
    # a kind not served counts as done
    state = observer_machine()()
    try:
        p0 = state.create_parent(parent=OBSERVER_WITH_THANOS)
        state.converged()
        state.delete_parent(name=p0)
        state.converged()
        state.create_parent(parent=OBSERVER_WITHOUT_THANOS)
        state.converged()
    finally:
        state.teardown()


@pytest.mark.parametrize("machine", [thanos_machine, thanos_ssa_machine],
                         ids=["three-way", "server-side-apply"])
def test_a_handed_over_object_whose_immutable_field_differs_says_so(machine: Any) -> None:
    # the soak found it (issue 38): a foreign StatefulSet with someone else's volume claim
    # template, handed over; each repair was refused (immutable) and the contention detector
    # took the unchanged child for a writer: Contested=True by the operator's own manager,
    # Reconciled=True. Now the refusal is what the parent says
    state = machine()()
    try:
        p0 = state.create_parent_over_foreign(parent={**SSA_PARENT, "spec": {
            "image": "quay.io/thanos/thanos:v0.34.1", "serviceMonitors": False,
            "storeGateway": {"replicas": 1, "logLevel": "debug", "storage": "10Gi"}}},
            which=4)
        assert [k[1] for k in state.foreign] == ["StatefulSet"]
        state.converged()
        state.release_foreign(which=0, hand_over=True)
        state.converged()
        conditions = {c["type"]: c for c in state._get_parent(p0)["status"]["conditions"]}
        assert (conditions["Reconciled"]["status"], conditions["Reconciled"]["reason"]) == (
            "False", "ImmutableFieldChanged")
        assert conditions.get("Contested", {}).get("status") != "True"
    finally:
        state.teardown()


def test_a_handed_over_object_whose_immutable_field_differs_beside_a_missing_input() -> None:
    # the soak found it (session 14): the same refusal beside another failure (an input that
    # does not exist) is said as ChildrenFailed, naming both; the machine took only
    # ImmutableFieldChanged for it and reported the StatefulSet as differing from its build
    state = thanos_machine()()
    try:
        state.create_parent_over_foreign(parent={**SSA_PARENT, "spec": {
            "image": "quay.io/thanos/thanos:v0.34.1", "serviceMonitors": False,
            "objectStorageSecret": "a",
            "rule": {"replicas": 1, "logLevel": "info", "storage": "10Gi"}}}, which=0)
        state.converged()
        state.release_foreign(hand_over=True, which=0)
        state.converged()
    finally:
        state.teardown()


def test_observer_machine_deletes_a_handed_over_object_at_an_absent_childs_place() -> None:
    # the soak found it (issue 38): a foreign CRD at an Observer's CRD place, the Observer's
    # Thanos switched off (the CRD declared ABSENT: the foreign one left alone), then the CRD
    # handed over: it is the Observer's now, to delete, but nothing woke the Observer
    state = observer_machine()()
    try:
        p0 = state.create_parent_over_foreign(parent=OBSERVER_WITH_THANOS, which=6)
        assert [k[1] for k in state.foreign] == ["CustomResourceDefinition"]
        state.converged()
        state.change_parent_spec(name=p0, parent=OBSERVER_WITHOUT_THANOS)
        state.converged()
        state.release_foreign(which=0, hand_over=True)
        state.converged()
    finally:
        state.teardown()


def test_server_side_apply_leaves_a_foreign_object_with_the_built_values_alone() -> None:
    # the machine found it: a child missing from the cache was applied blind, and a foreign
    # object with the built values taken over (controller owner reference, applied digest);
    # now it is read first and skipped as not ours (tests/reconciler/test_server_side_apply.py)
    machine = thanos_ssa_machine()()
    try:
        machine.create_parent_over_foreign(parent=SSA_PARENT, which=1)
        machine.converged()
    finally:
        machine.teardown()


#: every rule off but those a policy and a second writer meet: parents, their changes, a child
#: edited
PEOPLE = {"relabel_parents": False, "delete_parents": False, "scale_children": False,
          "delete_children": False,
          "foreign_objects": False, "inputs": False, "pause": False, "restart": False,
          "crash": False, "make_available": False, "faults": False, "webhooks": False}


@pytest.mark.parametrize(("machine", "writer"), [(thanos_machine, "update"),
                                                 (thanos_ssa_machine, "patch")],
                         ids=["three-way", "server-side-apply"])
def test_each_policy_and_a_second_writer_in_steps(machine: Any, writer: str) -> None:
    # the random runs above draw few of these rules: every policy and one fight, as steps
    state = machine(**PEOPLE)()
    fights = state.stats["fights"]
    try:
        p0 = state.create_parent(parent=SSA_PARENT)
        state.converged()
        kinds = [c.ref.kind for c in state._children(p0)]
        deployment, image = kinds.index("Deployment"), 6  # its 7th string field: the image
        state.contend_child(name=p0, which=0, field=image, writer=writer)
        state.converged()
        assert state.stats["fights"] == fights + 1  # the writer changed it: a fight was judged
        for policy in ("ignore", "create-only", "no-prune", "observe"):
            state.set_policy(name=p0, which=deployment, policy=policy)
            state.converged()
            state.drift_child(name=p0, which=0, field=image)
            state.converged()
            state.change_parent_spec(name=p0, parent={**SSA_PARENT, "spec": {
                **SSA_PARENT["spec"], "query": {"replicas": 2}}})
            state.converged()
            state.set_policy(name=p0, which=deployment, policy=None)
            state.converged()  # repaired: as built again
            state.change_parent_spec(name=p0, parent=SSA_PARENT)
            state.converged()
    finally:
        state.teardown()


def test_observer_machine() -> None:
    run_state_machine_as_test(observer_machine(), settings=CI)
