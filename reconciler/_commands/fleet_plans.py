"""``optk plan --all``: every parent in the cluster planned with the code on disk, nothing written.

``optk plan -f`` plans parents from files, one at a time, with server-side dry runs. A release of
an operator changes what its builders make for every parent at once, and the question before it
is "what will the new code do to the fleet?". ``plan_fleet`` answers it from ONE LIST per kind:
the parents (in a namespace or all, by a label selector), then each child kind the first time a
parent's children are read (``ListedReader``, by the operator's ``managed-by`` label, as its
informers are scoped): no per-parent GET. Each parent then goes through the same dry-run
``ParentReconciler`` as ``optk plan`` (so pauses, policies, the drift mode and ignored fields are
honoured as there), over that reader and a ``LocalDryRunClient`` that answers its dry-run
creates and patches locally: no write, not even a dry run, unless ``server_dry_run`` asks the
server to default and validate each planned create and patch (one request each; only then can a
patch the server refuses on an immutable field show as a recreate). Rendering and the exit code
are ``fleet_report``'s (pure). The boundary: reading and deciding; printing is the renderer's.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TextIO

import attrs

from builders import ObjectRef, ResourceBuilder
from builders.names import MANAGED_BY_LABEL
from reconciler._base.clocks import RealClock
from reconciler._base.errors import ReconcilerError, ReconcilerUsageError
from reconciler._cache.inputs import client_reader, one_argument_build
from reconciler._cache.listed import ListedReader
from reconciler._client.caches import PassThroughCache
from reconciler._client.counting import counting, recording, uncounted
from reconciler._client.protocol import ClusterClient, KubeObject
from reconciler._commands.fleet_report import (
    EXIT_USAGE,
    FleetPlan,
    fleet_exit_code,
    fleet_plan_json,
    format_fleet_plan,
    summarize,
)
from reconciler._commands.local_dry_run import LocalDryRunClient
from reconciler._commands.plans import planned
from reconciler._driver.operators import Operator
from reconciler._reconcile.parents import ParentReconciler
from reconciler._reconcile.reconciling import ResourceReconciler

__all__ = ["fleet_plan_command", "fleet_planner", "plan_fleet"]


def plan_fleet(
    client: ClusterClient,
    operator: Operator,
    *,
    namespace: str | None = None,
    selector: str | None = None,
    server_dry_run: bool = False,
    page_size: int = 500,
) -> FleetPlan:
    """The dry-run result of reconciling every parent of ``operator`` (in ``namespace``, or the
    operator's own, or every namespace; matching the label ``selector``) with its builders, from
    one LIST per kind (pages of ``page_size``). Raises ``ReconcilerError`` when the parents
    cannot be listed (their kind not served, say) and ``ReconcilerUsageError`` for a namespace
    of cluster-scoped parents; a child kind whose list fails fails those children only."""
    counted = counting(client)
    if not counted.is_namespaced(operator.api_version, operator.kind):  # raises when not served
        if namespace is not None:
            raise ReconcilerUsageError(
                f"--namespace {namespace}: {operator.kind} ({operator.api_version}) parents are "
                "cluster-scoped")
    elif namespace is None:
        namespace = operator.namespace
    planner, _, _ = fleet_planner(counted, operator, namespace=namespace,
                                  server_dry_run=server_dry_run, page_size=page_size,
                                  writes_to=uncounted(client))
    with recording() as calls:
        parents = PassThroughCache(counted, page_size=page_size).list(
            operator.api_version, operator.kind, namespace=namespace, label_selector=selector)
        parents.sort(key=lambda p: (str(p["metadata"].get("namespace")), p["metadata"]["name"]))
        deleting = tuple(ObjectRef.of(p) for p in parents
                         if p["metadata"].get("deletionTimestamp"))
        results = tuple(planner.reconcile(parent) for parent in parents
                        if not parent["metadata"].get("deletionTimestamp"))
    return FleetPlan(operator=operator.name, parent_kind=(operator.api_version, operator.kind),
                     namespace=namespace, selector=selector, results=results, deleting=deleting,
                     requests=Counter(call.verb for call in calls))


def fleet_planner(
    client: ClusterClient,
    operator: Operator,
    *,
    namespace: str | None,
    server_dry_run: bool = False,
    page_size: int = 500,
    writes_to: ClusterClient | None = None,
) -> tuple[ParentReconciler, ListedReader, Callable[[KubeObject], Iterable[ResourceBuilder]]]:
    """The dry-run ``ParentReconciler`` of ``operator`` over one LIST per child kind in
    ``namespace`` (``ListedReader``), its dry-run writes answered by a ``LocalDryRunClient``
    (over ``writes_to``, default ``client``), with the reader and the one-argument build it
    uses (declared inputs read with one GET each); shared by ``optk plan --all`` and ``optk
    trace``."""
    reader = ListedReader(client, namespace=namespace, page_size=page_size,
                          label_selector=f"{MANAGED_BY_LABEL}={operator.name}")
    writer = LocalDryRunClient(writes_to if writes_to is not None else client, live=reader,
                               server_dry_run=server_dry_run)
    resources = ResourceReconciler(
        writer, settings=operator.resource_settings(), reader=reader, dry_run=True,
        guard=_uncontended(operator).plan_guard(RealClock()),
    )
    build = one_argument_build(operator, client_reader(client, operator.applying.clusters))
    planner = ParentReconciler(
        writer, build, operator_name=operator.name, reader=reader, resources=resources,
        settings=planned(operator.parent_settings()),
    )
    return planner, reader, build


def fleet_plan_command(
    target: str,
    *,
    kubeconfig: str | None = None,
    namespace: str | None = None,
    selector: str | None = None,
    max_changes: int = 0,
    output: str = "text",
    server_dry_run: bool = False,
    show_unchanged: bool = False,
    out: TextIO | None = None,
) -> int:
    """``optk plan --all MODULE[:ATTR]``: print the fleet's plan (text or JSON); the exit code
    of ``fleet_report.fleet_exit_code``, or ``EXIT_USAGE`` when the parents cannot be listed;
    ``out`` defaults to the standard output at the time of the call."""
    from reconciler._commands.loading import connected

    if max_changes < 0:
        raise ReconcilerUsageError(f"--max-changes must be 0 or more, got {max_changes}")
    operator, client = connected(target, kubeconfig)
    try:
        plan = plan_fleet(client, operator, namespace=namespace, selector=selector,
                          server_dry_run=server_dry_run)
    except ReconcilerError as error:
        print(f"optk plan --all: {error}", file=sys.stderr)
        return EXIT_USAGE
    out = out if out is not None else sys.stdout
    if output == "json":
        print(json.dumps(fleet_plan_json(plan, max_changes=max_changes), default=str), file=out)
    else:
        print(format_fleet_plan(plan, show_unchanged=show_unchanged), file=out)
    return fleet_exit_code(summarize(plan), max_changes=max_changes)


def _uncontended(operator: Operator) -> Operator:
    """``operator`` without contention: a preview has no history of other writers."""
    return attrs.evolve(operator, policies=attrs.evolve(operator.policies, contention=None))
