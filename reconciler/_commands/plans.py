"""``optk plan``: what an operator would do to a cluster for given parents, writing nothing.

A plan is the parent reconcile's plans without their execution (``ParentReconciler(dry_run=True)``):
each child's decision is ``reconciler._reconcile.planning.plan_child``'s, as in a real run; creates
and patches go to the server only as ``dryRun=All`` requests, so defaulting, validation and
immutable-field refusals are the server's own while nothing is stored; deletes and recreations
are reported without being sent, and no Event or status is written. This module turns
the results into the text people read (one line per child, the field diff under each update,
Secret values redacted by ``objectmatcher``) and implements the command behind the CLI. People's
say shows as the operator would honour it: a paused parent plans nothing (``paused``), a write a
child's ``optk.dev/policy`` or the drift mode holds back is listed as ``held`` with why, and
``optk.dev/ignore-fields`` and ``Policies(ignore_fields=...)`` leave their fields out of diffs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO

import attrs

from builders import ObjectRef, ResourceBuilder
from builders.inputs import InputMissingError, InputUnavailableError
from objectmatcher import LAST_APPLIED_ANNOTATION, format_diff
from reconciler._base.clocks import RealClock
from reconciler._base.errors import NotFoundError, ReconcilerError
from reconciler._cache.inputs import client_reader, one_argument_build
from reconciler._client.protocol import ClusterClient, KubeObject
from reconciler._commands.trace_tree import chart_source
from reconciler._reconcile.conditions import ChildError, permanent_cause
from reconciler._reconcile.guard import PlanGuard
from reconciler._reconcile.parent_settings import ParentSettings
from reconciler._reconcile.parents import ParentReconciler, ParentResult
from reconciler._reconcile.reconciling import Action, ReconcileResult, ResourceReconciler
from reconciler._reconcile.resource_settings import ResourceSettings

__all__ = ["format_plan", "plan_command", "plan_parents", "shown_diff"]

_ANNOTATION_PATH = ("metadata", "annotations", LAST_APPLIED_ANNOTATION)
_VERBS = {
    Action.CREATED: "create",
    Action.UPDATED: "update",
    Action.RECREATED: "recreate",
    Action.DELETED: "delete",
    Action.SKIPPED: "skip",
    Action.UNCHANGED: "unchanged",
}


_IDENTITY = ("uid", "resourceVersion", "generation", "creationTimestamp", "ownerReferences",
             "finalizers", "deletionTimestamp", "managedFields")


def _live_parent(client: ClusterClient, parent: KubeObject) -> dict[str, Any]:
    """The parent as given (the file's spec, labels and annotations) with the stored parent's
    identity (uid, resourceVersion, ...) and status when it exists, so its children's owner
    references and the plan match a real reconcile of that spec; when it does not exist yet, a
    placeholder uid so that its children can be planned all the same."""
    ref = ObjectRef.of(parent)
    meta = dict(parent.get("metadata") or {})
    try:
        live = client.get(ref.api_version, ref.kind, ref.name, namespace=ref.namespace)
    except NotFoundError:
        meta.setdefault("uid", f"planned-{ref.name}")
        return {**parent, "metadata": meta}
    live_meta = live.get("metadata") or {}
    meta.update({key: live_meta[key] for key in _IDENTITY if key in live_meta})
    meta.setdefault("namespace", live_meta.get("namespace"))
    planned = {**parent, "metadata": meta}
    if "status" in live:
        planned["status"] = live["status"]
    return planned


def _in_namespace(client: ClusterClient, parent: KubeObject, namespace: str) -> KubeObject:
    """``parent`` in ``namespace`` when it is namespaced and names none (as ``kubectl apply -f``
    places it in the kubeconfig context's namespace)."""
    meta = parent.get("metadata") or {}
    if meta.get("namespace") or not client.is_namespaced(
        str(parent.get("apiVersion")), str(parent.get("kind"))
    ):
        return parent
    return {**parent, "metadata": {**meta, "namespace": namespace}}


def plan_parents(
    client: ClusterClient,
    build: Callable[[KubeObject], Iterable[ResourceBuilder]],
    parents: Iterable[KubeObject],
    *,
    operator_name: str,
    resource_settings: ResourceSettings | None = None,
    parent_settings: ParentSettings | None = None,
    guard: PlanGuard | None = None,
) -> list[ParentResult]:
    """The dry-run result of reconciling each parent (read from the cluster when it exists);
    ``resource_settings`` the operator's write strategies (a migration to or from server-side
    apply shows as an update with its reason); ``parent_settings`` its pruning, pauses and shard
    label (:func:`planned`: without what a plan does not run); ``guard`` as the operator's
    (``Operator.plan_guard``)."""
    resources = ResourceReconciler(client, settings=resource_settings, dry_run=True, guard=guard)
    settings = attrs.evolve(parent_settings or ParentSettings(), dry_run=True)
    planner = ParentReconciler(client, build, operator_name=operator_name, settings=settings,
                               resources=resources)
    return [planner.reconcile(_live_parent(client, parent)) for parent in parents]


def shown_diff(child: ReconcileResult) -> list[Any]:
    """A child's diff items as shown: without the last-applied annotation's own change."""
    return [d for d in child.diff if tuple(d.path[:3]) != _ANNOTATION_PATH]


def format_plan(results: Sequence[ParentResult], *, show_unchanged: bool = False) -> str:
    """People's view of a plan: per parent, one line per child, diffs indented under updates."""
    lines: list[str] = []
    for result in results:
        lines.append(f"{result.parent}:")
        if result.paused:
            lines.append(f"  {'paused':<9} nothing would be written ({result.paused})")
        for child in (*result.children, *result.pruned):
            if child.held:
                held_in = f"  [cluster {child.cluster}]" if child.cluster else ""
                lines.append(f"  {'held':<9} {child.ref}  ({child.held}){held_in}")
                lines.extend(f"      drifted {path or '(missing)'}" for path in child.drift)
                continue
            if child.action is Action.UNCHANGED and not show_unchanged:
                continue
            line = f"  {_VERBS[child.action]:<9} {child.ref}"
            if child.reason and child.action is not Action.UNCHANGED:
                line += f"  ({child.reason})"
            where = [f"cluster {child.cluster}"] if child.cluster else []
            if source := chart_source(child.live):
                where.append(source)
            if where:
                line += f"  [{'; '.join(where)}]"
            lines.append(line)
            shown = shown_diff(child)
            if child.action in (Action.UPDATED, Action.RECREATED) and shown:
                lines.extend(f"      {row}" for row in format_diff(shown).splitlines())
        for wait in result.waiting:
            lines.append(f"  {'wait':<9} {wait.ref}  ({wait.reason}: {wait.message})")
        for error in result.errors:
            lines.append(_error_line(error))
        unchanged = sum(1 for c in result.children
                        if c.action is Action.UNCHANGED and not c.held)
        if unchanged and not show_unchanged:
            lines.append(f"  ({unchanged} unchanged)")
        if not result.children and not result.pruned and not result.errors and (
                not result.paused and not result.waiting):
            lines.append("  (no children)")
    return "\n".join(lines)


def _error_line(error: ChildError) -> str:
    """A failed child's line; a declared input that is missing (or forbidden) is a line of
    its own naming the input and who waits for it (no failure of the code)."""
    cause = permanent_cause(error.error)
    if isinstance(cause, InputUnavailableError):
        state = "missing" if isinstance(cause, InputMissingError) else "forbidden"
        who = (f"the build function {error.ref.name}" if error.ref.kind == "build"
               else f"builder {error.ref.name.replace('.<locals>', '')}"
               if error.ref.kind == "builder" else str(error.ref))
        return (f"  {state:<9} {cause.ref}  (input: {who} waits until it "
                f"{'exists' if state == 'missing' else 'may be read'})")
    if not error.ref.api_version:  # a build or builder: the message names it
        return f"  {'error':<9} {error.message}"
    return f"  {'error':<9} {error.ref}  ({error.message})"


def _fails(result: ParentResult) -> bool:
    """Whether a child of ``result`` would fail (a missing input only waits)."""
    waits = [e for e in result.errors if isinstance(permanent_cause(e.error), InputMissingError)]
    return not attrs.evolve(result, errors=tuple(e for e in result.errors
                                                 if e not in waits)).ok


def plan_command(
    target: str,
    *,
    files: Sequence[str],
    kubeconfig: str | None = None,
    show_unchanged: bool = False,
    out: TextIO = sys.stdout,
) -> int:
    """``optk plan MODULE[:ATTR] -f PARENT.yaml``: print the plan; 1 when a child would fail
    (children that would wait, for a dependency or a missing input, are no failure).

    A namespaced parent without a namespace is planned in the kubeconfig context's namespace
    (``default`` when the context names none), where ``kubectl apply -f`` would create it."""
    import yaml

    from reconciler._client.connect import context_namespace
    from reconciler._commands.loading import connected, load_operator

    load_operator(target)  # a wrong target is said before the files are read
    parents: list[KubeObject] = []
    for path in files:
        with open(path, encoding="utf-8") as stream:
            parents.extend(doc for doc in yaml.safe_load_all(stream) if doc)
    operator, client = connected(target, kubeconfig)  # the operator's name: its field manager
    namespace = context_namespace(kubeconfig)
    try:
        parents = [_in_namespace(client, parent, namespace) for parent in parents]
        results = plan_parents(
            client,
            one_argument_build(operator, client_reader(client, operator.applying.clusters)),
            parents,
            operator_name=operator.name, resource_settings=operator.resource_settings(),
            parent_settings=planned(operator.parent_settings()),
            guard=attrs.evolve(operator, policies=attrs.evolve(
                operator.policies, contention=None)).plan_guard(RealClock()),
        )
    except ReconcilerError as error:
        print(f"optk plan: {error}", file=sys.stderr)
        return 2
    print(format_plan(results, show_unchanged=show_unchanged), file=out)
    return 1 if any(_fails(r) for r in results) else 0


def planned(settings: ParentSettings) -> ParentSettings:
    """An operator's ``ParentSettings`` as a plan uses them: dry run, and without the status
    function, readiness, the delete hook and reused builds (a plan shows the children's writes,
    and each plan builds afresh)."""
    return attrs.evolve(settings, dry_run=True, on_delete=None, readiness=None, status=None,
                        reuse_builds=False)
