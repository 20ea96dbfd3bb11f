"""``optk trace``'s view of one parent: what each child is, and what the parent is waiting for.

Why it exists: when a parent does not converge, the first question is "what is it waiting for?"
(``crossplane beta trace``, ``flux trace``). ``optk plan`` says what would change; this says
what *is*: per child its kind and name, its component, its health (kstatus, as
``builders.health.health_of`` reads it), the operator's last write to it and when (from the
server's ``managedFields``), what the operator would do now, the policy or pause in force, what
it waits for and why (the dependency gates, exactly as the reconcile decides them) and whether
another writer contests its fields (the parent's ``Contested`` condition).

Boundary: pure. :func:`trace_of` turns a dry-run ``ParentResult`` (``reconciler._commands.traces``
produces it from one LIST per kind, nothing written) and the live objects into a :class:`Trace`;
:func:`trace_json` is its documented JSON shape for tools (docs/reconciler.md, "optk trace") and
:func:`format_trace` the tree people read. Messages name fields and objects, never values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from builders import ObjectRef
from builders.health import health_of
from builders.helm import CHART_ANNOTATION, TEMPLATE_ANNOTATION
from reconciler._reconcile.conditions import ParentResult, described
from reconciler._reconcile.policies import PAUSED_ANNOTATION, POLICY_ANNOTATION
from reconciler._reconcile.reconciling import Action

__all__ = ["LastWrite", "Trace", "TraceChild", "format_trace", "trace_json", "trace_of"]

COMPONENT_LABEL = "app.kubernetes.io/component"

_ACTIONS = {
    Action.CREATED: "create",
    Action.UPDATED: "update",
    Action.RECREATED: "recreate",
    Action.DELETED: "delete",
    Action.SKIPPED: "skip",
    Action.UNCHANGED: "none",
}


@attrs.frozen(kw_only=True)
class LastWrite:
    """The operator's latest write to an object as the server recorded it in ``managedFields``:
    ``operation`` (``Update`` or ``Apply``), ``time`` (RFC 3339) and ``subresource`` (e.g.
    ``status``; "" for the object itself)."""

    operation: str
    time: str
    subresource: str = ""


@attrs.frozen(kw_only=True)
class TraceChild:
    """One child of the traced parent.

    ``state`` is what the builders declare (``present``, ``absent``, ``created``; ``orphan`` for
    a child the operator would prune); ``health`` is kstatus' ``Current``/``InProgress``/
    ``Failed``, ``Missing`` when it does not exist (``Absent`` when it should not); ``next`` what
    the operator would do now (``none``, ``create``, ``update``, ``recreate``, ``delete``,
    ``skip``, ``wait``, ``held``, ``error``) and ``why``; ``waits_for`` the objects it waits on."""

    ref: ObjectRef
    component: str | None
    state: str
    exists: bool
    health: str
    health_message: str = ""
    last_write: LastWrite | None = None
    next: str = "none"
    why: str = ""
    policy: str | None = None
    wait_reason: str = ""
    waits_for: tuple[ObjectRef, ...] = ()
    contested: str = ""
    drift: tuple[str, ...] = ()
    source: str = ""
    """Where the child comes from when not from a builder of code: ``chart NAME-VERSION,
    template PATH`` for an object a Helm chart rendered (``builders.helm``)."""
    cluster: str | None = None
    """The cluster a child placed in another cluster is in (``builders.placed``), None for
    the operator's own cluster."""


@attrs.frozen(kw_only=True)
class Trace:
    """The traced parent and its children, in the order the reconcile visits them."""

    parent: ObjectRef
    health: str
    health_message: str
    paused: str
    conditions: tuple[Mapping[str, Any], ...]
    children: tuple[TraceChild, ...]
    errors: tuple[str, ...] = ()

    @property
    def waiting(self) -> tuple[TraceChild, ...]:
        """The children held back by a dependency, a precondition or a kind not served."""
        return tuple(c for c in self.children if c.next == "wait")


def _last_write(obj: Mapping[str, Any] | None, manager: str) -> LastWrite | None:
    entries = [e for e in ((obj or {}).get("metadata") or {}).get("managedFields") or ()
               if isinstance(e, Mapping) and e.get("manager") == manager]
    if not entries:
        return None
    latest = max(entries, key=lambda e: str(e.get("time") or ""))
    return LastWrite(operation=str(latest.get("operation") or ""),
                     time=str(latest.get("time") or ""),
                     subresource=str(latest.get("subresource") or ""))


def _contests(conditions: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Per child (its ``str(ref)``), the sentence of the parent's ``Contested`` condition that
    names it (``reconciler._reconcile.contention.Contest.describe``)."""
    found: dict[str, str] = {}
    for condition in conditions:
        if condition.get("type") != "Contested" or condition.get("status") != "True":
            continue
        for sentence in str(condition.get("message") or "").split("; "):
            head, sep, _ = sentence.partition(" is changed back by ")
            if sep and " of " in head:
                found[head.rsplit(" of ", 1)[1]] = sentence
    return found


def _state(result_state: str | None, pruned: bool) -> str:
    return "orphan" if pruned else (result_state or "present")


def trace_of(
    parent: Mapping[str, Any],
    result: ParentResult,
    *,
    live: Callable[[ObjectRef], Mapping[str, Any] | None],
    states: Mapping[ObjectRef, str],
    components: Mapping[ObjectRef, str] | None = None,
    sources: Mapping[ObjectRef, str] | None = None,
    clusters: Mapping[ObjectRef, str] | None = None,
    placed_live: Callable[[str, ObjectRef], Mapping[str, Any] | None] | None = None,
    field_manager: str,
) -> Trace:
    """The trace of ``parent`` from its dry-run reconcile ``result``: ``live`` reads a child as
    listed (None when it does not exist), ``states`` the builders' declared state of each child
    (``present``/``absent``/``created``), ``components`` the component each belongs to (else
    the child's ``app.kubernetes.io/component`` label), ``sources`` where a declared child comes
    from (:func:`chart_source`; else read from the live child), ``clusters`` the cluster of each
    declared child placed in another cluster (``builders.placed``; a result names its own),
    ``placed_live`` reads such a child there (None: not known), ``field_manager`` the
    operator's (its name)."""
    components = components or {}
    sources = sources or {}
    clusters = clusters or {}
    conditions = tuple(c for c in ((parent.get("status") or {}).get("conditions") or ())
                       if isinstance(c, Mapping))
    contested = _contests(conditions)
    waits = {w.ref: w for w in result.waiting}
    errors = {e.ref: e for e in result.errors}
    children = []

    def add(ref: ObjectRef, planned: Any, pruned: bool) -> None:
        cluster = getattr(planned, "cluster", None) or clusters.get(ref)
        if cluster is None:
            obj = live(ref)
        else:
            obj = placed_live(cluster, ref) if placed_live is not None else None
        child = _child(ref, planned, obj, states.get(ref), pruned,
                       component=components.get(ref), waits=waits, errors=errors,
                       contested=contested, manager=field_manager)
        source = sources.get(ref) or chart_source(obj)
        children.append(attrs.evolve(child, source=source or child.source, cluster=cluster))

    for child in result.children:
        add(child.ref, child, False)
    for child in result.pruned:
        add(child.ref, child, True)
    seen = {c.ref for c in children}
    for ref in waits:  # held back before it was planned at all
        if ref not in seen:
            add(ref, None, False)
            seen.add(ref)
    for ref, error in errors.items():
        if ref not in seen:
            children.append(TraceChild(ref=ref, component=None, state=states.get(ref, "present"),
                                       exists=live(ref) is not None, health="Unknown",
                                       next="error", why=error.message))
    verdict = health_of(parent)
    return Trace(
        parent=ObjectRef.of(parent), health=str(verdict.status), health_message=verdict.message,
        paused=result.paused, conditions=conditions, children=tuple(children),
        errors=tuple(described(e) for e in result.errors),
    )


def _child(
    ref: ObjectRef,
    planned: Any,
    obj: Mapping[str, Any] | None,
    declared: str | None,
    pruned: bool,
    *,
    component: str | None,
    waits: Mapping[ObjectRef, Any],
    errors: Mapping[ObjectRef, Any],
    contested: Mapping[str, str],
    manager: str,
) -> TraceChild:
    state = _state(declared, pruned)
    meta = (obj or {}).get("metadata") or {}
    if obj is None:
        health, message = ("Absent" if state == "absent" else "Missing"), ""
    else:
        verdict = health_of(obj)
        health, message = str(verdict.status), verdict.message
    policy = (meta.get("annotations") or {}).get(POLICY_ANNOTATION)
    wait = waits.get(ref)
    if wait is not None:
        next_, why = "wait", wait.message
    elif ref in errors:
        next_, why = "error", errors[ref].message
    elif planned is not None and planned.held:
        next_, why = "held", planned.held
    elif planned is not None:
        next_ = _ACTIONS.get(planned.action, str(planned.action))
        # unchanged says why only where a user would ask: an absent child whose place
        # someone else's object holds (left alone, not this parent's)
        why = planned.reason if planned.action is not Action.UNCHANGED or (
            state == "absent" and obj is not None) else ""
    else:
        next_, why = "none", ""
    return TraceChild(
        ref=ref, component=component or (meta.get("labels") or {}).get(COMPONENT_LABEL),
        state=state,
        exists=obj is not None, health=health, health_message=message,
        last_write=_last_write(obj, manager), next=next_, why=why,
        policy=str(policy) if policy is not None else None,
        wait_reason=wait.reason if wait is not None else "",
        waits_for=tuple(w.ref for w in wait.watches) if wait is not None else (),
        contested=contested.get(str(ref), ""),
        drift=tuple(planned.drift) if planned is not None else (),
    )


def chart_source(obj: Mapping[str, Any] | None) -> str:
    """``chart NAME-VERSION, template PATH`` for an object a Helm chart rendered (the
    annotations ``builders.helm`` sets), else ""."""
    meta = (obj or {}).get("metadata")
    annotations = (meta.get("annotations") if isinstance(meta, Mapping) else None) or {}
    chart = annotations.get(CHART_ANNOTATION)
    if not chart:
        return ""
    template = annotations.get(TEMPLATE_ANNOTATION)
    return f"chart {chart}" + (f", template {template}" if template else "")


def _ref_json(ref: ObjectRef) -> dict[str, Any]:
    return {"apiVersion": ref.api_version, "kind": ref.kind, "namespace": ref.namespace,
            "name": ref.name}


def trace_json(trace: Trace) -> dict[str, Any]:
    """The documented JSON shape (docs/reconciler.md, "optk trace")."""
    return {
        "parent": {**_ref_json(trace.parent), "health": trace.health,
                   "healthMessage": trace.health_message, "paused": trace.paused,
                   "conditions": [{k: c.get(k) for k in ("type", "status", "reason", "message")
                                   if k in c} for c in trace.conditions]},
        "children": [{
            **_ref_json(c.ref), "component": c.component, "state": c.state,
            "exists": c.exists, "health": c.health, "healthMessage": c.health_message,
            "lastWrite": attrs.asdict(c.last_write) if c.last_write is not None else None,
            "next": c.next, "why": c.why, "policy": c.policy, "waitReason": c.wait_reason,
            "waitsFor": [_ref_json(r) for r in c.waits_for], "contested": c.contested,
            "drift": list(c.drift), "source": c.source, "cluster": c.cluster,
        } for c in trace.children],
        "waiting": len(trace.waiting),
        "errors": list(trace.errors),
    }


def _label(ref: ObjectRef) -> str:
    return f"{ref.kind}/{ref.name}"


def format_trace(trace: Trace) -> str:
    """The tree people read: the parent, then one line per child with its details under it
    (children declared absent and gone are counted, not listed)."""
    parent_line = f"{_label(trace.parent)}  {trace.health}"
    if trace.health_message:
        parent_line += f"  ({trace.health_message})"
    lines = [parent_line]
    if trace.paused:
        lines.append(f"│ paused: {trace.paused}")
    for condition in trace.conditions:
        if condition.get("type") in ("Ready", "Reconciled") and condition.get("status") != "True":
            lines.append(f"│ {condition.get('type')}={condition.get('status')} "
                         f"{condition.get('reason', '')}: {condition.get('message', '')}")
    shown = [c for c in trace.children if not (c.health == "Absent" and c.next == "none")]
    for index, child in enumerate(shown):
        last = index == len(shown) - 1 and len(shown) == len(trace.children)
        branch, stem = ("└─ ", "   ") if last else ("├─ ", "│  ")
        head = f"{branch}{_label(child.ref)}"
        if child.component:
            head += f" [{child.component}]"
        head += f"  {child.health}"
        if child.state not in ("present", "absent") or (
                child.state == "absent" and child.health != "Absent"):
            head += f"  ({child.state})"
        lines.append(head)
        details = []
        if child.cluster:
            details.append(f"cluster: {child.cluster}")
        if child.source:
            details.append(f"from: {child.source}")
        if child.health_message and child.health != "Current":
            details.append(f"health: {child.health_message}")
        if child.last_write is not None:
            what = child.last_write.operation + (
                f" {child.last_write.subresource}" if child.last_write.subresource else "")
            details.append(f"last write: {what} at {child.last_write.time}")
        if child.policy:
            details.append(f"policy: {child.policy}")
        if child.next != "none":
            details.append(f"next: {child.next}" + (f" ({child.why})" if child.why else ""))
        if child.drift:
            details.append("drifted: " + ", ".join(child.drift))
        if child.contested:
            details.append(f"contested: {child.contested}")
        lines.extend(f"{stem}   {line}" for line in details)
    hidden = len(trace.children) - len(shown)
    if hidden:
        lines.append(f"└─ ({hidden} declared absent and gone, not shown; -o json lists them)")
    elif not trace.children:
        lines.append("└─ (no children)")
    if trace.paused:
        lines.append(f"(paused by {PAUSED_ANNOTATION} or the operator's pause settings: "
                     "nothing is written)")
    return "\n".join(lines)
