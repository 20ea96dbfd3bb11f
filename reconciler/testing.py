"""Helpers for testing operators built on the toolkit: a virtual clock and waits on a runtime.

``VirtualClock`` is a ``Clock`` whose time moves only when a test calls ``advance``, so periodic
behaviour (resync every 10 h, 5-minute backoff caps, 15 s leases) is tested in milliseconds and
deterministically. ``wait_synced(runtime)`` and ``wait_idle(runtime)`` block, in real time and
bounded by a timeout, until a running ``OperatorRuntime`` has synced its caches or has nothing
queued or running. ``make_available(client, obj)`` does what a kubelet would for a Deployment,
StatefulSet or DaemonSet where none runs: its Pods' status Running and Ready (a real control
plane's controllers then make the workload available), or, with no Pods (the embedded server runs
no controllers), the workload's own status, so that readiness rules and dependencies on workloads
can be exercised; ``make_workloads_available(client, namespace)`` does it for every workload of a
namespace that is not yet Current (poll it from a wait, as a kubelet keeps reporting).
``operator_machine(operator, parents=...)`` is a Hypothesis state machine over a whole operator
with random user actions and server faults, checking at each quiet point what every operator
author relies on (docs/testing-operators.md). ``KubeApiServer`` is the protocol both test servers
satisfy (the embedded server and ``reconciler.envtest.ControlPlane``; the pytest plugin's
``kube_api`` is either). Production code never needs these.

This module is the face: the implementations are private, one concept per module, under
``reconciler._testing`` (``clock``, ``waits``, ``workloads``, ``machine`` and the machine's
``observations``).
"""

from __future__ import annotations

from reconciler._client.servers import KubeApiServer
from reconciler._testing.clock import VirtualClock
from reconciler._testing.machine import operator_machine
from reconciler._testing.waits import wait_idle, wait_synced
from reconciler._testing.workloads import make_available, make_workloads_available

__all__ = ["KubeApiServer", "VirtualClock", "make_available", "make_workloads_available",
           "operator_machine", "wait_idle", "wait_synced"]
