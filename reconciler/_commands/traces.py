"""``optk trace``: one parent and its children as they are, and what the parent is waiting for.

The parent is read with one GET, its children with one LIST per child kind (the operator's
``managed-by`` label, as its informers are scoped: ``reconciler._cache.listed.ListedReader``);
then the parent goes through the same dry-run reconcile as ``optk plan --all``
(``reconciler._commands.fleet_plans.fleet_planner``), so the gates, policies, pauses and drift
mode are decided exactly as the running operator decides them, and nothing is written.
``reconciler._commands.trace_tree`` (pure) turns the result into the tree and its JSON; this
module does the reads, the printing, and ``--watch`` (redrawn with ``rich`` when installed,
plain text otherwise), bounded by ``--count`` and clean on Ctrl-C.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TextIO

from builders import KubeObject, ObjectRef
from reconciler._base.clocks import Clock, RealClock
from reconciler._base.errors import NotFoundError, ReconcilerError, ReconcilerUsageError
from reconciler._client.protocol import ClusterClient
from reconciler._commands.fleet_plans import fleet_planner
from reconciler._commands.trace_tree import (
    Trace,
    chart_source,
    format_trace,
    trace_json,
    trace_of,
)
from reconciler._driver.operators import Operator
from reconciler._reconcile.parents import ParentReconciler

__all__ = ["trace_command", "trace_parent"]

EXIT_NOT_FOUND = 1
EXIT_USAGE = 2


def _declared(
    planner: ParentReconciler, parent: KubeObject
) -> tuple[dict[ObjectRef, str], dict[ObjectRef, str], dict[ObjectRef, str],
           dict[ObjectRef, str]]:
    """The builders' declared state of each child, its component and where it comes from (a
    Helm chart's template, ``chart_source``), from the one evaluation
    the dry-run reconcile uses (``ParentReconciler.declared``, ``reconciler._reconcile.declared``):
    the same keys as the reconcile's results, so a cluster-scoped child has no namespace. A
    failing build or builder declares nothing here; the dry-run reconcile reports it. The
    fourth mapping: the cluster of each child placed in another cluster (``builders.placed``)."""
    declared = planner.declared(parent)
    every = (*declared.children, *declared.placed)
    states = {child.ref: "absent" if child.state.is_absent else (
        "created" if child.state.is_created else "present") for child in every}
    components = {child.ref: child.node.name for child in every if child.node is not None}
    sources = {child.ref: source for child in every if (source := chart_source(child.obj))}
    clusters = {child.ref: child.cluster for child in declared.placed
                if child.cluster is not None}
    return states, components, sources, clusters


def _placed_reader(planner: ParentReconciler) -> Callable[[str, ObjectRef], Any]:
    """Read a placed child in its cluster (one GET through that cluster's client); None when
    it is not there or the cluster cannot be used now (the dry-run reconcile says why)."""
    placement = planner.placement
    views: list[Any] = []  # the clusters, listed once per trace

    def read(cluster: str, ref: ObjectRef) -> Any:
        if placement is None:
            return None
        try:
            if not views:
                views.append(placement.connections.view())
            record = views[0].clusters.get(cluster)
            if record is None:
                return None
            remote = placement.connections.client(record)
            return remote.get(ref.api_version, ref.kind, ref.name, namespace=ref.namespace)
        except ReconcilerError:
            return None

    return read


def trace_parent(
    client: ClusterClient, operator: Operator, *, name: str, namespace: str | None = None
) -> Trace:
    """The trace of ``operator``'s parent ``name`` (in ``namespace`` for namespaced parents):
    one GET of the parent, one LIST per child kind, a dry-run reconcile; raises
    ``NotFoundError`` when the parent does not exist."""
    if client.is_namespaced(operator.api_version, operator.kind):
        namespace = namespace or operator.namespace
        if namespace is None:
            raise ReconcilerUsageError(
                f"{operator.kind} parents are namespaced: say which namespace (-n NS)")
    else:
        namespace = None
    parent = client.get(operator.api_version, operator.kind, name, namespace=namespace)
    planner, reader, _ = fleet_planner(client, operator, namespace=namespace)
    result = planner.reconcile(parent)

    def live(ref: ObjectRef) -> Any:
        try:
            return reader.get(ref.api_version, ref.kind, ref.name, namespace=ref.namespace)
        except ReconcilerError:
            return None

    states, components, sources, clusters = _declared(planner, parent)
    return trace_of(parent, result, live=live, states=states, components=components,
                    sources=sources, clusters=clusters, placed_live=_placed_reader(planner),
                    field_manager=operator.name)


def trace_command(
    target: str,
    parent: str,
    *,
    namespace: str | None = None,
    kubeconfig: str | None = None,
    output: str = "text",
    watch: bool = False,
    interval: float = 2.0,
    count: int | None = None,
    out: TextIO | None = None,
    clock: Clock | None = None,
) -> int:
    """``optk trace MODULE[:ATTR] [KIND/]NAME``: print the trace (text or JSON); 0 when
    printed, 1 when the parent does not exist, 2 when the command failed. ``watch`` redraws
    every ``interval`` seconds, ``count`` times (None: until Ctrl-C)."""
    from reconciler._client.connect import context_namespace
    from reconciler._commands.loading import connected

    out = out if out is not None else sys.stdout
    clock = clock or RealClock()
    if interval <= 0:
        raise ReconcilerUsageError(f"--interval must be positive, got {interval}")
    kind, _, name = parent.rpartition("/")

    def check(operator: Operator) -> None:  # a wrong kind is said before connecting
        if kind and kind.lower() not in (operator.kind.lower(), f"{operator.kind.lower()}s"):
            raise ReconcilerUsageError(
                f"{parent}: the operator's parents are {operator.kind}, not {kind}")

    operator, client = connected(target, kubeconfig, check=check)
    namespace = namespace or operator.namespace or context_namespace(kubeconfig)

    def render() -> str:
        trace = trace_parent(client, operator, name=name, namespace=namespace)
        if output == "json":
            return json.dumps(trace_json(trace), indent=2, default=str)
        return format_trace(trace)

    try:
        if not watch:
            print(render(), file=out)
            return 0
        return _watch(render, out=out, interval=interval, count=count, clock=clock)
    except NotFoundError:
        print(f"optk trace: {operator.kind} {namespace + '/' if namespace else ''}{name} not "
              "found", file=sys.stderr)
        return EXIT_NOT_FOUND
    except ReconcilerError as error:
        print(f"optk trace: {error}", file=sys.stderr)
        return EXIT_USAGE


def _watch(render: Callable[[], str], *, out: TextIO, interval: float, count: int | None,
           clock: Clock) -> int:
    """Redraw ``render()`` every ``interval`` seconds, ``count`` times or until Ctrl-C."""
    try:
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text
    except ImportError:  # the demo extra is not installed: plain frames
        Live = None  # type: ignore[assignment,misc]
    shown = 0
    try:
        if Live is not None and out.isatty():
            with Live(console=Console(file=out), auto_refresh=False) as live:
                while count is None or shown < count:
                    live.update(Text(render()), refresh=True)
                    shown += 1
                    if count is None or shown < count:
                        clock.sleep(interval)
        else:
            while count is None or shown < count:
                print(render(), file=out)
                print("", file=out, flush=True)
                shown += 1
                if count is None or shown < count:
                    clock.sleep(interval)
    except KeyboardInterrupt:
        pass
    return 0
