"""``optk uninstall``: remove what an operator owns, then its finalizers, so nothing is left stuck.

An operator that is removed while its parents carry the toolkit's ``optk.dev/cleanup`` finalizer
would leave those parents undeletable (nobody removes the finalizer). :func:`uninstall` is the
way out, for a stopped operator: it deletes every child the operator manages (found by the
``app.kubernetes.io/managed-by`` label in every namespace, cluster-scoped ones included, and ours
by the toolkit's ownership rule), then removes the finalizer from every parent. The kinds looked
at are those the live parents' builders build, the operator's ``prune`` kinds and the kinds each
parent's cleanup annotation lists. CRDs that still hold custom resources are kept (and reported)
unless marked ``optk.dev/allow-data-loss``. People's say is kept (docs/driver.md): the children
and the finalizer of a parent annotated ``optk.dev/paused: "true"`` stay, and so does a child
whose ``optk.dev/policy`` forbids deleting it (``ignore``, ``observe``, ``no-prune``); each is
reported as kept, with why. Children placed in other clusters (``builders.placed``, issue 41)
are deleted from each parent's ``optk.dev/placed`` inventory through their clusters' clients
(``reconciler._reconcile.placement``), when the operator declares its clusters
(``Applying(clusters=...)``); a cluster that cannot be used is reported as kept, and the
finalizer comes off anyway (this command is the way out of a cleanup that waits for a cluster
that will not come back). The command-line shell is ``reconciler._commands.cli``.

An operator still running would create everything again within a second, so
``uninstall_command`` first looks for it (``running_holds``): the Leases named ``<name>-leader``
(leader election) and ``<name>-resync`` (the resync heartbeat), in every namespace (a deployed
operator keeps them in its own). It refuses while either is fresh: the leader Lease held and
renewed within its ``leaseDurationSeconds``, the heartbeat held and stamped within
``HEARTBEAT_GRACE`` periods (``reconciler._driver.resync_loop.heartbeat_hold``). A cleanly
stopped operator released both, so uninstall runs at once after it; after a crash it waits for
them to go stale, or ``force``. Freshness is judged by this machine's clock against the
times the operator wrote.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable
from typing import TextIO

import attrs

from builders import ObjectRef
from builders.names import OWNER_UID_LABEL, label_value
from reconciler._base.errors import (
    DataLossError,
    NotFoundError,
    PolicyAnnotationError,
    ReconcilerError,
    ReconcilerUsageError,
)
from reconciler._base.keys import meta_of
from reconciler._cache.inputs import one_argument_build, present_reader
from reconciler._client.caches import PassThroughCache
from reconciler._client.clusters import ClusterConnections
from reconciler._client.protocol import ClusterClient, KubeObject
from reconciler._driver.operators import Operator
from reconciler._driver.resync_loop import heartbeat_hold
from reconciler._leadership.leases import LEASE_API_VERSION, LEASE_KIND, LeaseHold, leader_hold
from reconciler._reconcile.cleanups import delete_owned
from reconciler._reconcile.declared import declared_children, unknown_scope
from reconciler._reconcile.finalizing import (
    CLEANUP_FINALIZER,
    cleanup_kinds,
    finalizer_patch,
    has_finalizer,
    managed_selector,
)
from reconciler._reconcile.placement import Placement, inventory_of
from reconciler._reconcile.planning import is_owned
from reconciler._reconcile.policies import ChildPolicy, child_policy

__all__ = ["UninstallReport", "describe_hold", "running_holds",
           "uninstall", "uninstall_command"]

_log = logging.getLogger("optk.uninstall")


@attrs.frozen(kw_only=True)
class UninstallReport:
    """What ``uninstall`` did: children deleted, parents released, and what it had to leave."""

    deleted: tuple[ObjectRef, ...] = ()
    released: tuple[ObjectRef, ...] = ()
    kept: tuple[tuple[ObjectRef, str], ...] = ()
    """Objects left in place, with why (a CRD holding custom resources, a refused request)."""

    @property
    def ok(self) -> bool:
        """Whether nothing had to be left."""
        return not self.kept


def _kinds(operator: Operator, parents: Iterable[KubeObject]) -> set[tuple[str, str]]:
    kinds = set(operator.policies.prune)
    for parent in parents:
        kinds.update(cleanup_kinds(parent))
        # Only the kinds count: no discovery request for the children's scope.
        declared = declared_children(one_argument_build(operator, present_reader), parent,
                                     operator_name=operator.name,
                                     namespaced=unknown_scope)
        for exc in declared.errors:  # a builder that fails on some parent: its other kinds count
            _log.warning("building the children of %s failed: %s", ObjectRef.of(parent), exc)
        kinds.update(declared.types)
    return kinds


def _order(obj: KubeObject) -> tuple[bool, str]:
    ref = ObjectRef.of(obj)  # CRDs last: the custom resources deleted before them
    return ref.kind == "CustomResourceDefinition", str(ref)


def uninstall(client: ClusterClient, operator: Operator) -> UninstallReport:
    """Delete every child ``operator`` manages, then remove its finalizer from every parent.
    The operator must not be running (it would create the children again)."""
    parents = client.list(operator.api_version, operator.kind,
                          namespace=operator.namespace)["items"]
    deleted: list[ObjectRef] = []
    kept: list[tuple[ObjectRef, str]] = []
    found: list[KubeObject] = []
    for api_version, kind in sorted(_kinds(operator, parents)):
        try:
            found += client.list(api_version, kind,
                                 label_selector=managed_selector(operator.name))["items"]
        except NotFoundError:
            continue
    paused = _paused(operator, parents)
    for obj in sorted(found, key=_order):
        ref = ObjectRef.of(obj)
        if (why := _kept_by_people(obj, paused)) is not None:
            kept.append((ref, why))
            continue
        if not is_owned(obj)[0]:
            kept.append((ref, is_owned(obj)[1]))
            continue
        try:
            if delete_owned(client, obj):
                deleted.append(ref)
        except (DataLossError, ReconcilerError) as exc:
            kept.append((ref, str(exc)))
    kept += _remove_placed(client, operator, parents, paused)
    released: list[ObjectRef] = []
    for parent in parents:
        if not has_finalizer(parent):
            continue
        ref = ObjectRef.of(parent)
        if (why := paused.get(label_value(str(meta_of(parent).get("uid"))))) is not None:
            kept.append((ref, f"{CLEANUP_FINALIZER} kept: paused ({why})"))
            continue
        try:
            client.patch(ref.api_version, ref.kind, ref.name, finalizer_patch(parent, add=False),
                         patch_type="application/merge-patch+json", namespace=ref.namespace)
        except NotFoundError:
            continue
        except ReconcilerError as exc:
            kept.append((ref, f"removing {CLEANUP_FINALIZER} failed: {exc}"))
            continue
        released.append(ref)
    return UninstallReport(deleted=tuple(deleted), released=tuple(released), kept=tuple(kept))


def _remove_placed(client: ClusterClient, operator: Operator, parents: Iterable[KubeObject],
                   paused: dict[str, str]) -> list[tuple[ObjectRef, str]]:
    """Delete the children each parent placed in other clusters (its inventory); what could
    not be deleted, by parent, with why."""
    kept: list[tuple[ObjectRef, str]] = []
    clusters = operator.applying.clusters
    placement = None if clusters is None else Placement(client, ClusterConnections(
        clusters, PassThroughCache(client), operator_name=operator.name))
    for parent in parents:
        ref, uid = ObjectRef.of(parent), str(meta_of(parent).get("uid") or "")
        if not (recorded := inventory_of(parent)) or label_value(uid) in paused:
            continue
        if placement is None:
            kept.append((ref, f"{len(recorded)} children placed in other clusters are recorded "
                              f"but the operator declares no clusters (Applying(clusters=...))"))
            continue
        done = placement.remove_all(parent, uid)
        for what in done.deleted:
            _log.info("deleted %s (placed by %s)", what, ref)
        kept += [(ref, f"placed children: {why}") for why in (*done.waiting, *done.failed)]
    if placement is not None:
        placement.connections.close()
    return kept


def _paused(operator: Operator, parents: Iterable[KubeObject]) -> dict[str, str]:
    """Why each paused parent is paused, by its owner-uid label value (its annotation, or its
    namespace paused in code: ``OPTK_PAUSED`` and ``--paused`` pause a running operator)."""
    pauses = attrs.evolve(operator.pauses({}), everything=False)
    return {label_value(str(meta_of(p).get("uid"))): found[0] for p in parents
            if (found := pauses.reason(p)) is not None}


def _kept_by_people(obj: KubeObject, paused: dict[str, str]) -> str | None:
    """Why people keep ``obj`` (its parent is paused, its policy forbids a delete), or None."""
    owner = (meta_of(obj).get("labels") or {}).get(OWNER_UID_LABEL)
    if owner in paused:
        return f"its parent is paused ({paused[owner]})"
    try:
        policy = child_policy(obj)
    except PolicyAnnotationError as exc:
        return str(exc)
    if policy in (ChildPolicy.IGNORE, ChildPolicy.OBSERVE, ChildPolicy.NO_PRUNE):
        return f"policy {policy.value}: never deleted by the toolkit"
    return None


def running_holds(client: ClusterClient, operator: Operator) -> list[LeaseHold]:
    """The holds of ``operator``'s leader and heartbeat Leases in every namespace (fresh or
    not; a heartbeat without a beat's stamp tells nothing and is left out)."""
    election = operator.leader_election
    duration = election.lease_duration if election is not None else 15.0
    holds: list[LeaseHold] = []
    for suffix in ("leader", "resync"):
        leases = client.list(LEASE_API_VERSION, LEASE_KIND,
                             field_selector=f"metadata.name={operator.name}-{suffix}")["items"]
        for lease in leases:
            hold = (leader_hold(lease, default_duration=duration) if suffix == "leader"
                    else heartbeat_hold(lease))
            if hold is not None:
                holds.append(hold)
    return holds


def describe_hold(hold: LeaseHold, *, now: float) -> str:
    """``Lease NS/NAME is held by ID, renewed 3s ago (fresh for 15s)``."""
    age = hold.age(now)
    when = f"{age:.0f}s ago" if age >= 0 else f"{-age:.0f}s in the future (clock skew)"
    return (f"Lease {hold.where} is held by {hold.holder!r}, renewed {when} "
            f"(fresh for {hold.valid_for:.0f}s)")


def _refuse_while_running(client: ClusterClient, operator: Operator, *, force: bool) -> None:
    try:
        holds = running_holds(client, operator)
    except ReconcilerError as error:
        if not force:
            raise ReconcilerUsageError(
                f"cannot tell whether operator {operator.name!r} runs: listing its Leases "
                f"failed ({error}); pass --force to uninstall anyway") from error
        return
    now = time.time()
    fresh = [hold for hold in holds if hold.fresh(now)]
    if not fresh:
        return
    reason = f"operator {operator.name!r} is running: {describe_hold(fresh[0], now=now)}"
    if not force:
        raise ReconcilerUsageError(
            f"{reason}; stop it first (it would create everything again), or pass --force")
    print(f"optk uninstall: --force: {reason}", file=sys.stderr)


def uninstall_command(target: str, *, kubeconfig: str | None = None, force: bool = False,
                      out: TextIO | None = None) -> int:
    """``optk uninstall MODULE[:ATTR]``: print what was deleted and released; 1 when something
    had to be left (each such object named with why), 0 otherwise. Raises
    ``ReconcilerUsageError`` (a ``ValueError``) naming the fresh Lease while the operator runs
    (or when its Leases cannot be listed), unless ``force``; nothing is done then."""
    from reconciler._commands.loading import connected

    out = sys.stdout if out is None else out
    operator, client = connected(target, kubeconfig)
    _refuse_while_running(client, operator, force=force)
    report = uninstall(client, operator)
    for ref in report.deleted:
        print(f"deleted {ref}", file=out)
    for ref in report.released:
        print(f"removed {CLEANUP_FINALIZER} from {ref}", file=out)
    for ref, why in report.kept:
        print(f"kept {ref}: {why}", file=out)
    print(f"{operator.name}: {len(report.deleted)} deleted, {len(report.released)} released, "
          f"{len(report.kept)} kept", file=out)
    return 0 if report.ok else 1
