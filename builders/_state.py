"""Desired states: what the reconciler should do with one built object, and the hooks it runs.

A builder says *what* an object should look like and *which* :class:`DesiredState` it should be in.
This module holds only the value type and the ready-made hooks operators need most; running the
states against a cluster is the reconciler's job (DESIGN.md section 4). Everything here is pure:
hooks take JSON-shaped dicts and return new ones, never mutating their inputs.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import attrs

from objectmatcher import KubeObject

__all__ = [
    "BeforeCreate",
    "BeforeDelete",
    "BeforeUpdate",
    "DesiredState",
    "KubeObject",
    "ShouldUpdate",
    "StateKind",
    "keep_cluster_ip",
    "keep_hpa_replicas",
]


BeforeCreate = Callable[[KubeObject], KubeObject]
"""Hook run on the desired object just before it is created; returns the object to create."""

BeforeUpdate = Callable[[KubeObject, KubeObject], KubeObject]
"""Hook run as ``hook(current, desired)`` before comparing and patching; returns the new desired."""

BeforeDelete = Callable[[KubeObject], "KubeObject | None"]
"""Hook run on the live object before deleting it; returns it (or a copy), or None to keep it."""

ShouldUpdate = Callable[[KubeObject, KubeObject], bool]
"""Predicate ``pred(current, desired)``: False vetoes the update of an existing object."""


class StateKind(enum.Enum):
    """Which of the three desired states a :class:`DesiredState` is (DESIGN.md section 4)."""

    PRESENT = "present"
    """Create if missing, patch when the diff is non-empty, otherwise no write."""
    ABSENT = "absent"
    """Delete if it exists and is ours; missing (or its kind not served) counts as done."""
    CREATED = "created"
    """Create if missing, never update."""


def _hook_name(hook: object) -> str:
    return getattr(hook, "__qualname__", None) or getattr(hook, "__name__", None) or repr(hook)


@attrs.frozen(kw_only=True, repr=False)
class DesiredState:
    """The state one built object should be in, with optional hooks; a comparable value.

    Use the constants ``DesiredState.PRESENT``, ``DesiredState.ABSENT`` and ``DesiredState.CREATED``
    and attach hooks with :meth:`with_hooks`, which returns a new state (hooks of one kind chain in
    the order they were attached)::

        DesiredState.PRESENT.with_hooks(before_update=keep_cluster_ip)

    The reconciler calls :meth:`before_create`, :meth:`before_update`, :meth:`before_delete` and
    :meth:`should_update` at their points; with no hooks attached they are identities (and
    ``should_update`` is True).
    """

    PRESENT: ClassVar[DesiredState]
    ABSENT: ClassVar[DesiredState]
    CREATED: ClassVar[DesiredState]

    kind: StateKind
    """Which of the three states this is."""
    create_hooks: tuple[BeforeCreate, ...] = ()
    """``before_create`` hooks, run in order."""
    update_hooks: tuple[BeforeUpdate, ...] = ()
    """``before_update`` hooks, run in order, each seeing the previous one's result."""
    delete_hooks: tuple[BeforeDelete, ...] = ()
    """``before_delete`` hooks, run in order; the first None keeps the object."""
    update_conditions: tuple[ShouldUpdate, ...] = ()
    """``should_update`` predicates; all must agree for an update to happen."""

    def with_hooks(
        self,
        *,
        before_create: BeforeCreate | None = None,
        before_update: BeforeUpdate | None = None,
        before_delete: BeforeDelete | None = None,
        should_update: ShouldUpdate | None = None,
    ) -> DesiredState:
        """A new state of the same kind with the given hooks appended to the existing ones."""
        for name, hook in (
            ("before_create", before_create),
            ("before_update", before_update),
            ("before_delete", before_delete),
            ("should_update", should_update),
        ):
            if hook is not None and not callable(hook):
                raise TypeError(f"DesiredState.with_hooks: {name} must be callable, got {hook!r}")
        return attrs.evolve(
            self,
            create_hooks=self.create_hooks + ((before_create,) if before_create else ()),
            update_hooks=self.update_hooks + ((before_update,) if before_update else ()),
            delete_hooks=self.delete_hooks + ((before_delete,) if before_delete else ()),
            update_conditions=self.update_conditions + ((should_update,) if should_update else ()),
        )

    def without_hooks(self) -> DesiredState:
        """The plain constant of the same kind (for example to compare kinds by equality)."""
        return DesiredState(kind=self.kind)

    @property
    def is_present(self) -> bool:
        """True for PRESENT (with or without hooks)."""
        return self.kind is StateKind.PRESENT

    @property
    def is_absent(self) -> bool:
        """True for ABSENT (with or without hooks)."""
        return self.kind is StateKind.ABSENT

    @property
    def is_created(self) -> bool:
        """True for CREATED (with or without hooks)."""
        return self.kind is StateKind.CREATED

    @property
    def has_hooks(self) -> bool:
        """True when any hook or predicate is attached."""
        return bool(
            self.create_hooks or self.update_hooks or self.delete_hooks or self.update_conditions
        )

    def before_create(self, desired: KubeObject) -> KubeObject:
        """Run the ``before_create`` hooks on ``desired``; returns the object to create."""
        for hook in self.create_hooks:
            desired = hook(desired)
        return desired

    def before_update(self, current: KubeObject, desired: KubeObject) -> KubeObject:
        """Run the ``before_update`` hooks; returns the desired object to compare and patch."""
        for hook in self.update_hooks:
            desired = hook(current, desired)
        return desired

    def before_delete(self, current: KubeObject) -> KubeObject | None:
        """Run the ``before_delete`` hooks on the live object; None means: do not delete it."""
        result: KubeObject | None = current
        for hook in self.delete_hooks:
            result = hook(result) if result is not None else None
            if result is None:
                return None
        return result

    def should_update(self, current: KubeObject, desired: KubeObject) -> bool:
        """True unless a ``should_update`` predicate vetoes updating ``current`` to ``desired``."""
        return all(pred(current, desired) for pred in self.update_conditions)

    def __repr__(self) -> str:
        base = f"DesiredState.{self.kind.name}"
        parts = [
            f"{name}={_hook_name(hook)}"
            for name, hooks in (
                ("before_create", self.create_hooks),
                ("before_update", self.update_hooks),
                ("before_delete", self.delete_hooks),
                ("should_update", self.update_conditions),
            )
            for hook in hooks
        ]
        return f"{base}.with_hooks({', '.join(parts)})" if parts else base


DesiredState.PRESENT = DesiredState(kind=StateKind.PRESENT)
DesiredState.ABSENT = DesiredState(kind=StateKind.ABSENT)
DesiredState.CREATED = DesiredState(kind=StateKind.CREATED)


def _get_path(obj: KubeObject, *path: str) -> Any:
    node: Any = obj
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def _with_spec_fields(desired: KubeObject, fields: Mapping[str, Any]) -> KubeObject:
    new = copy.deepcopy(dict(desired))
    spec = dict(new.get("spec") or {})
    spec.update(fields)
    new["spec"] = spec
    return new


def keep_cluster_ip(current: KubeObject, desired: KubeObject) -> KubeObject:
    """``before_update`` hook: keep the live Service's ``spec.clusterIP`` and ``spec.clusterIPs``.

    The API server allocates them and refuses to change them; a desired Service that leaves them
    out (or says ``None``) gets the live values, so no patch tries to remove them. A desired value
    that is set explicitly wins.
    """
    kept = {
        field: _get_path(current, "spec", field)
        for field in ("clusterIP", "clusterIPs")
        if _get_path(desired, "spec", field) is None
        and _get_path(current, "spec", field) is not None
    }
    return _with_spec_fields(desired, kept) if kept else desired


def keep_hpa_replicas(current: KubeObject, desired: KubeObject) -> KubeObject:
    """``before_update`` hook: keep the live ``spec.replicas`` an HPA manages.

    Use it on Deployments/StatefulSets scaled by an HPA: the desired replica count is replaced by
    the live one, so the reconciler never fights the autoscaler. A live object without
    ``spec.replicas`` leaves ``desired`` as it is.
    """
    live = _get_path(current, "spec", "replicas")
    if live is None or _get_path(desired, "spec", "replicas") == live:
        return desired
    return _with_spec_fields(desired, {"replicas": live})
