"""What ``optk plan --all`` prints, and its exit code: pure functions of the fleet's plans.

``fleet_plans`` plans every parent (I/O); this module only reads its ``FleetPlan``: the counts of
the summary line (``summarize``), the text people read (``format_fleet_plan``: the parents with
something to say, as ``optk plan`` prints them, then the summary line, or ``no changes``), the JSON
document tools read (``fleet_plan_json``, its shape in docs/reconciler.md) and the exit code
(``fleet_exit_code``). Secret values are redacted before they get here (``objectmatcher``'s diff
items); the last-applied annotation's own change is never shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from builders import ObjectRef
from reconciler._commands.plans import format_plan, shown_diff
from reconciler._reconcile.conditions import ParentResult
from reconciler._reconcile.reconciling import Action, ReconcileResult

__all__ = [
    "EXIT_CHILD_ERRORS",
    "EXIT_NO_CHANGES",
    "EXIT_OVER_MAX_CHANGES",
    "EXIT_USAGE",
    "FleetPlan",
    "FleetSummary",
    "fleet_exit_code",
    "fleet_plan_json",
    "format_fleet_plan",
    "summarize",
    "summary_line",
]

EXIT_NO_CHANGES = 0
"""No write, or no more writes than ``--max-changes``, and no error."""
EXIT_CHILD_ERRORS = 1
"""A builder or a child would fail (as ``optk plan``): the new code errs for some parent."""
EXIT_USAGE = 2
"""The command itself failed: arguments, the kubeconfig, the operator module, a refused LIST."""
EXIT_OVER_MAX_CHANGES = 3
"""The plan writes more children than ``--max-changes`` (default 0: any write)."""

_CHANGE_VERBS = {Action.CREATED: "create", Action.UPDATED: "update",
                 Action.RECREATED: "recreate", Action.DELETED: "delete"}


@attrs.frozen(kw_only=True)
class FleetPlan:
    """Every parent's dry-run result, the scope planned and the requests it took."""

    operator: str
    parent_kind: tuple[str, str]
    """(apiVersion, kind) of the parents."""
    namespace: str | None = None
    selector: str | None = None
    results: tuple[ParentResult, ...] = ()
    deleting: tuple[ObjectRef, ...] = ()
    """Parents being deleted: the operator tears them down; not planned."""
    requests: Mapping[str, int] = attrs.field(factory=dict)
    """Requests sent, by verb (discovery aside)."""


@attrs.frozen(kw_only=True)
class FleetSummary:
    """The counts of the summary line (children, over every parent)."""

    parents: int = 0
    parents_changed: int = 0
    create: int = 0
    update: int = 0
    recreate: int = 0
    delete: int = 0
    unchanged: int = 0
    held: int = 0
    skipped: int = 0
    errors: int = 0
    paused: int = 0
    deleting: int = 0

    @property
    def changes(self) -> int:
        """Children the plan writes: created, updated, recreated, deleted."""
        return self.create + self.update + self.recreate + self.delete


def _children(result: ParentResult) -> tuple[ReconcileResult, ...]:
    return (*result.children, *result.pruned)


def _verb(child: ReconcileResult) -> str | None:
    """The change a child's result plans, or None (unchanged, held back or skipped)."""
    return None if child.held else _CHANGE_VERBS.get(child.action)


def summarize(plan: FleetPlan) -> FleetSummary:
    """The counts of ``plan``."""
    counts = dict.fromkeys(("create", "update", "recreate", "delete", "unchanged", "held",
                            "skipped"), 0)
    changed = errors = paused = 0
    for result in plan.results:
        verbs = [_verb(child) for child in _children(result)]
        changed += any(verbs)
        errors += len(result.errors)
        paused += bool(result.paused)
        for child, verb in zip(_children(result), verbs, strict=True):
            key = verb or ("held" if child.held else "skipped"
                           if child.action is Action.SKIPPED else "unchanged")
            counts[key] += 1
    return FleetSummary(parents=len(plan.results), parents_changed=changed, errors=errors,
                        paused=paused, deleting=len(plan.deleting), **counts)


def _parents(count: int) -> str:
    return f"{count} parent" if count == 1 else f"{count} parents"


def summary_line(summary: FleetSummary) -> str:
    """One line: ``no changes: ...`` or the counts of each change."""
    tail = [f"{summary.unchanged} unchanged"]
    tail += [f"{n} {what}" for n, what in ((summary.held, "held"),
                                           (summary.skipped, "skipped"),
                                           (summary.errors, "errors")) if n]
    tail += [f"{_parents(n)} {what}" for n, what in ((summary.paused, "paused"),
                                                     (summary.deleting, "being deleted")) if n]
    if not summary.changes:
        return f"no changes: {_parents(summary.parents)}, {', '.join(tail)}"
    return (f"plan: {summary.parents_changed} of {summary.parents} parents change: "
            f"{summary.create} to create, {summary.update} to update, "
            f"{summary.recreate} to recreate, {summary.delete} to delete "
            f"({summary.changes} writes); {', '.join(tail)}")


def _worth_showing(result: ParentResult) -> bool:
    return bool(result.errors or result.paused or any(
        child.held or child.action is not Action.UNCHANGED for child in _children(result)))


def format_fleet_plan(plan: FleetPlan, *, show_unchanged: bool = False) -> str:
    """People's view: each parent with a change, a held write, an error or a pause (every
    parent and child with ``show_unchanged``), as ``optk plan`` prints it, then the summary
    line."""
    shown = [result for result in plan.results if show_unchanged or _worth_showing(result)]
    blocks = [format_plan(shown, show_unchanged=show_unchanged)] if shown else []
    blocks += [f"{ref}:\n  being deleted: not planned" for ref in plan.deleting]
    return "\n".join([*blocks, summary_line(summarize(plan))])


def fleet_exit_code(summary: FleetSummary, *, max_changes: int = 0) -> int:
    """``EXIT_CHILD_ERRORS`` when a child or builder would fail, else
    ``EXIT_OVER_MAX_CHANGES`` when more than ``max_changes`` children would be written, else
    ``EXIT_NO_CHANGES``."""
    if summary.errors:
        return EXIT_CHILD_ERRORS
    return EXIT_OVER_MAX_CHANGES if summary.changes > max_changes else EXIT_NO_CHANGES


def _ref(ref: ObjectRef) -> dict[str, Any]:
    return {"apiVersion": ref.api_version, "kind": ref.kind, "namespace": ref.namespace,
            "name": ref.name}


def _child_json(child: ReconcileResult) -> dict[str, Any]:
    action = "held" if child.held else _verb(child) or child.action.value
    entry: dict[str, Any] = {"action": action, **_ref(child.ref),
                             "reason": child.held or child.reason}
    entry["diff"] = [{"op": item.op, "path": list(item.path), "old": item.old, "new": item.new}
                     for item in shown_diff(child)] if action in ("update", "recreate") else []
    if child.drift:
        entry["drift"] = list(child.drift)
    return entry


def fleet_plan_json(plan: FleetPlan, *, max_changes: int = 0) -> dict[str, Any]:
    """The plan for tools (shape documented in docs/reconciler.md): every parent planned with
    its children that change (or are held back or skipped), its errors and its unchanged count;
    the summary, the exit code and the requests by verb."""
    summary = summarize(plan)
    parents: list[dict[str, Any]] = []
    for result in plan.results:
        listed = [child for child in _children(result)
                  if child.held or child.action is not Action.UNCHANGED]
        parents.append({
            **_ref(result.parent), "paused": result.paused or None,
            "children": [_child_json(child) for child in listed],
            "errors": [{**_ref(error.ref), "message": error.message} for error in result.errors],
            "unchanged": len(_children(result)) - len(listed),
        })
    return {
        "operator": plan.operator,
        "parentKind": {"apiVersion": plan.parent_kind[0], "kind": plan.parent_kind[1]},
        "namespace": plan.namespace, "selector": plan.selector,
        "summary": {**attrs.asdict(summary), "changes": summary.changes},
        "maxChanges": max_changes,
        "exitCode": fleet_exit_code(summary, max_changes=max_changes),
        "requests": dict(sorted(plan.requests.items())),
        "parents": parents,
        "deleting": [_ref(ref) for ref in plan.deleting],
    }
