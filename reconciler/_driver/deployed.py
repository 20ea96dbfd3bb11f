"""The operator as deployed: what ``optk run --leader-elect`` changes of the ``Operator`` value.

``deployed_operator`` is what ``--leader-elect``/``--lease-namespace``/``--watch-namespace``
(the flags of the Deployment ``optk manifests`` writes) and the maintenance flags ``--paused``/
``--pause-namespace`` change: the ``Operator`` value, and nothing else; it is the one place
that knows those fields. ``optk run`` then runs the adapted value through the same process
shell as without them (``reconciler._driver.process``: logging, connection and ``/version``
probe, heap freeze, signals, metrics).
"""

from __future__ import annotations

import ipaddress
import logging
import urllib.parse
from collections.abc import Sequence
from typing import Any

import attrs

from reconciler._base.errors import ReconcilerUsageError
from reconciler._client.incluster import pod_namespace
from reconciler._driver.operators import Operator
from reconciler._leadership.election import LeaderElection
from reconciler._webhooks.serving import Webhooks

__all__ = ["deployed_operator", "is_local_server", "local_webhooks"]

_log = logging.getLogger("reconciler.run")


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
    policies = operator.policies
    if paused:  # --paused, --pause-namespace: maintenance (docs/driver.md)
        policies = attrs.evolve(policies, paused=True)
    if pause_namespaces:
        policies = attrs.evolve(
            policies, paused_namespaces=[*policies.paused_namespaces, *pause_namespaces])
    if policies is not operator.policies:
        changes["policies"] = policies
    return attrs.evolve(operator, **changes) if changes else operator


def is_local_server(url: str) -> bool:
    """Whether the API server at ``url`` is on this machine: a loopback address or
    ``localhost`` (the embedded server's, a local control plane's)."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def local_webhooks(operator: Operator, server_url: str) -> Operator:
    """``operator`` with its ``Webhooks`` start hooks served at a local URL when the API server
    at ``server_url`` is local (:func:`is_local_server`): such a server cannot reach the
    webhooks' Service (there is no Service network), so each hook without a ``url`` of its own
    listens on a free port of 127.0.0.1 and writes that address into the CRDs' conversion
    stanzas and the webhook configurations (``Webhooks(local=True)``). Any other server, or a
    hook that names its ``url`` or is already ``local``, is left as it is."""
    if not is_local_server(server_url):
        return operator
    hooks = [attrs.evolve(hook, local=True, host="127.0.0.1", port=0)
             if isinstance(hook, Webhooks) and hook.url is None and not hook.local else hook
             for hook in operator.on_start]
    if all(new is old for new, old in zip(hooks, operator.on_start, strict=True)):
        return operator
    _log.info("the API server %s is local: the webhooks are served at a local URL "
              "(127.0.0.1, a free port) instead of their Service", server_url)
    return attrs.evolve(operator, on_start=hooks)
