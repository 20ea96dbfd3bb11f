"""A Hypothesis state machine that drives a whole operator against an in-process embedded API
server with random user actions and checks, at each quiet point, the invariants every operator
author relies on. ``reconciler.testing.operator_machine`` is its public face; this module holds
the rules and the checks. It is test-only: it imports ``hypothesis`` and the embedded server.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule

from reconciler._base.errors import AlreadyExistsError, NotFoundError
from reconciler._client.kubernetes import KubernetesClient
from reconciler._reconcile.policies import PAUSED_ANNOTATION

_WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})
_MACHINE_AGENT = "optk-operator-machine"


def _walk_leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, Mapping):
        return [p for k, v in value.items() for p in _walk_leaves(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _walk_leaves(v, (*path, i))]
    return [path] if isinstance(value, str) else []


def _set_path(obj: Any, path: tuple[Any, ...], value: Any) -> bool:
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


def operator_machine(  # noqa: C901, PLR0913, PLR0915 - one class built from its options
    operator: Any, *, parents: st.SearchStrategy[Any], namespace: str = "machine",
    create_parents: bool = True, change_spec: bool = True, delete_parents: bool = True,
    delete_children: bool = True, edit_children: bool = True, pause: bool = True,
    restart: bool = True, make_available: bool = True, check_resync: bool = True,
    idle_timeout: float = 20.0, max_reconciles_per_step: int = 50,
) -> type[RuleBasedStateMachine]:
    """See ``reconciler.testing.operator_machine``."""
    from reconciler.embedded import EmbeddedApiServer
    from reconciler.testing import make_workloads_available, wait_idle, wait_synced

    names = itertools.count()

    class OperatorMachine(RuleBasedStateMachine):
        parent_names = Bundle("parents")

        def __init__(self) -> None:
            super().__init__()
            self.server = EmbeddedApiServer().start()
            api = self.server.api_client()
            api.user_agent = _MACHINE_AGENT
            self.client = KubernetesClient(api)
            self.server.enable_request_log()
            with contextlib.suppress(AlreadyExistsError):
                self.client.create({"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": namespace}})
            self.runtime = operator.start(KubernetesClient(self.server.api_client()))
            assert wait_synced(self.runtime, idle_timeout), "the operator never synced"
            self.live: dict[str, Any] = {}       # parents the machine created and not deleted
            self.paused: set[str] = set()
            self.deleted: dict[str, list[Any]] = {}  # deleted parent -> its children's refs
            self.mark = 0
            self.reconciles_mark = 0

        def teardown(self) -> None:
            with contextlib.suppress(Exception):
                self.runtime.stop(5)
            self.server.stop()

        # -- helpers -----------------------------------------------------------------------

        def _api_version_kind(self) -> tuple[str, str]:
            return operator.api_version, operator.kind

        def _get_parent(self, name: str) -> dict[str, Any] | None:
            api_version, kind = self._api_version_kind()
            try:
                return self.client.get(api_version, kind, name, namespace=namespace)
            except NotFoundError:
                return None

        def _declared(self, parent: Any) -> Any:
            return self.runtime.reconciler.declared(parent)

        def _operator_writes(self) -> list[Any]:
            log = self.server.request_log()[self.mark:]
            return [r for r in log if r.verb in _WRITES and r.user_agent != _MACHINE_AGENT]

        # -- rules -------------------------------------------------------------------------

        if create_parents:
            @rule(target=parent_names, parent=parents)
            def create_parent(self, parent: Any) -> str:
                obj = copy.deepcopy(dict(parent))
                name = f"p{next(names)}"
                obj["metadata"] = {**(obj.get("metadata") or {}), "name": name,
                                   "namespace": namespace}
                obj.setdefault("apiVersion", operator.api_version)
                obj.setdefault("kind", operator.kind)
                self.client.create(obj)
                self.live[name] = obj
                return name

        if change_spec:
            @rule(name=parent_names, parent=parents)
            def change_parent_spec(self, name: str, parent: Any) -> None:
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
                with contextlib.suppress(NotFoundError):
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
                except NotFoundError:
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
                make_workloads_available(self.client, namespace)

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
                    except NotFoundError:
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
                    with contextlib.suppress(NotFoundError):
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
