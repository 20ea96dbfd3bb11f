"""The operator as deployed: what ``optk run --leader-elect`` changes of the ``Operator`` value.

``deployed_operator`` is what ``--leader-elect``/``--lease-namespace``/``--watch-namespace``
(the flags of the Deployment ``optk manifests`` writes) and the maintenance flags ``--paused``/
``--pause-namespace`` change: the ``Operator`` value, and nothing else; it is the one place
that knows those fields. ``optk run`` then runs the adapted value through the same process
shell as without them (``reconciler._driver.process``: logging, connection and ``/version``
probe, heap freeze, signals, metrics).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from reconciler._base.errors import ReconcilerUsageError
from reconciler._client.incluster import pod_namespace
from reconciler._driver.operators import Operator
from reconciler._leadership.election import LeaderElection

__all__ = ["deployed_operator"]


def deployed_operator(
    operator: Operator, *, leader_elect: bool, lease_namespace: str | None,
    watch_namespace: str | None, paused: bool = False, pause_namespaces: Sequence[str] = (),
) -> Operator:
    """``operator`` with leader election, the Leases' namespace and the watched namespace set
    (the one function that knows those ``Operator`` fields; adapt it here). With
    ``leader_elect`` and no ``lease_namespace``, the Leases go to the pod's namespace
    (``pod_namespace``; a ``ValueError`` outside a pod). The resync heartbeat Lease follows the
    election's namespace unless the operator names its own."""
    if leader_elect and not lease_namespace:
        lease_namespace = pod_namespace()
        if lease_namespace is None:
            raise ReconcilerUsageError("--leader-elect needs --lease-namespace outside a pod")
    changes: dict[str, Any] = {}
    election = operator.leader_election
    if leader_elect and election is None:
        election = LeaderElection()
    if lease_namespace and election is not None:
        election = attrs.evolve(election, namespace=lease_namespace)
    elif lease_namespace and operator.resync.heartbeat_namespace is None:
        changes["resync"] = attrs.evolve(operator.resync, heartbeat_namespace=lease_namespace)
    if election is not operator.leader_election:
        changes["leader_election"] = election
    if watch_namespace:
        changes["namespace"] = watch_namespace
    if paused:  # --paused, --pause-namespace: maintenance (docs/driver.md)
        changes["paused"] = True
    if pause_namespaces:
        changes["paused_namespaces"] = (*operator.paused_namespaces, *pause_namespaces)
    return attrs.evolve(operator, **changes) if changes else operator
