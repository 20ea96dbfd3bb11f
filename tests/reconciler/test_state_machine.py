"""A Hypothesis state machine: spec changes, user edits, deletions and reconciles, interleaved.

Against the embedded API server, on ConfigMaps. The model knows what the builder wants for each
name (a data dict, or absent) and which keys a user added on their own. Invariants checked after
every reconcile: the live object agrees with the desired one (our keys exactly as built, removed
keys gone, the user's own keys kept), an absent name does not exist, and a second reconcile makes
zero write requests.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from builders import DesiredState
from reconciler import Action, KubernetesClient, NotFoundError, ResourceReconciler
from tests.reconciler.conftest import Requests

NAMES = ("alpha", "beta")
OUR_KEYS = st.sampled_from(["a", "b", "c"])
VALUES = st.text(alphabet="xyz01", min_size=0, max_size=4)
DATA = st.dictionaries(OUR_KEYS, VALUES, max_size=3)
MERGE = "application/merge-patch+json"


class ReconcileMachine(RuleBasedStateMachine):
    """The model: ``desired[name]`` (None = ABSENT) and ``user_keys[name]`` (keys a user added)."""

    client: KubernetesClient
    server: Any

    def __init__(self) -> None:
        super().__init__()
        self.ns = f"sm-{uuid.uuid4().hex[:10]}"
        self.client.create({"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": self.ns}})
        self.rr = ResourceReconciler(self.client)
        self.desired: dict[str, dict[str, str] | None] = dict.fromkeys(NAMES)
        self.applied: dict[str, dict[str, str] | None] = dict.fromkeys(NAMES)
        self.user_keys: dict[str, dict[str, str]] = {n: {} for n in NAMES}
        self.reconciled = False

    def teardown(self) -> None:
        self.client.delete("v1", "Namespace", self.ns)

    def _obj(self, name: str, data: dict[str, str] | None) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": self.ns}, "data": dict(data or {})}

    def _live(self, name: str) -> dict[str, Any] | None:
        try:
            return self.client.get("v1", "ConfigMap", name, namespace=self.ns)
        except NotFoundError:
            return None

    def _reconcile(self, name: str) -> Action:
        data = self.desired[name]
        state = DesiredState.ABSENT if data is None else DesiredState.PRESENT
        return self.rr.reconcile_resource(self._obj(name, data), state).action

    # -- rules ------------------------------------------------------------------------------

    @initialize(specs=st.fixed_dictionaries({n: DATA for n in NAMES}))
    def start_present(self, specs: dict[str, dict[str, str]]) -> None:
        """Every name starts PRESENT and reconciled, so edits and deletions have a target."""
        self.desired.update(specs)
        self.reconcile()

    @rule(name=st.sampled_from(NAMES), data=DATA)
    def change_spec(self, name: str, data: dict[str, str]) -> None:
        self.desired[name] = data
        self.reconciled = False

    @rule(name=st.sampled_from(NAMES))
    def make_absent(self, name: str) -> None:
        self.desired[name] = None
        self.reconciled = False

    @rule(name=st.sampled_from(NAMES), value=VALUES)
    def user_edits_our_field(self, name: str, value: str) -> None:
        """A user changes a key we applied (it must be reverted, or removed if unwanted now)."""
        live, applied = self._live(name), self.applied[name]
        if live is None or not applied:
            return
        key = sorted(applied)[0]
        self.client.patch("v1", "ConfigMap", name, {"data": {key: value + "!"}},
                          patch_type=MERGE, namespace=self.ns)
        self.reconciled = False

    @rule(name=st.sampled_from(NAMES), value=VALUES)
    def user_adds_own_field(self, name: str, value: str) -> None:
        """Another actor adds a key we never set: it must survive our reconciles."""
        if self._live(name) is None:
            return
        self.client.patch("v1", "ConfigMap", name, {"data": {"user": value}},
                          patch_type=MERGE, namespace=self.ns)
        self.user_keys[name]["user"] = value
        self.reconciled = False

    @rule(name=st.sampled_from(NAMES))
    def user_deletes(self, name: str) -> None:
        if self._live(name) is None:
            return
        self.client.delete("v1", "ConfigMap", name, namespace=self.ns)
        self.user_keys[name] = {}
        self.reconciled = False

    @rule()
    def reconcile(self) -> None:
        for name in NAMES:
            self._reconcile(name)
            self.applied[name] = self.desired[name]
            if self.desired[name] is None:
                self.user_keys[name] = {}
        self.reconciled = True
        with Requests(self.server) as again:
            actions = [self._reconcile(name) for name in NAMES]
        assert again.writes == 0, f"a second reconcile wrote: {again.delta}, {actions}"
        assert set(actions) == {Action.UNCHANGED}

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def live_agrees_with_desired_after_a_reconcile(self) -> None:
        if not self.reconciled:
            return
        for name in NAMES:
            live = self._live(name)
            wanted = self.desired[name]
            if wanted is None:
                assert live is None, f"{name} should be absent"
                continue
            assert live is not None, f"{name} should exist"
            assert (live.get("data") or {}) == {**wanted, **self.user_keys[name]}


@pytest.mark.both_servers
def test_reconcile_state_machine(client: KubernetesClient, kube_api: Any) -> None:
    machine = type("Machine", (ReconcileMachine,), {"client": client, "server": kube_api})
    run_state_machine_as_test(
        machine, settings=settings(max_examples=30, stateful_step_count=15, deadline=None),
    )
