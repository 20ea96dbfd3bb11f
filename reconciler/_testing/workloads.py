"""Workloads made available as a kubelet would, where none runs (the toolkit's test helpers).

The embedded server runs no controllers and a real control plane in tests runs no kubelet, so a
Deployment, StatefulSet or DaemonSet never becomes available by itself: readiness rules and
dependencies on workloads could not be exercised. Boundary: the status writes a kubelet (and,
without Pods, the workload controllers) would make; nothing else. Public through
``reconciler.testing``.
"""

from __future__ import annotations

import time
import typing
from collections import abc as _abc
from typing import Any as _Any

from reconciler._base import errors as _errors

if typing.TYPE_CHECKING:
    from reconciler._client.protocol import ClusterClient

__all__ = ["make_available", "make_workloads_available"]

_WORKLOADS = (("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("apps/v1", "DaemonSet"))


def make_available(client: ClusterClient, obj: _abc.Mapping[str, _Any]) -> dict[str, _Any]:
    """Make a Deployment, StatefulSet or DaemonSet (``obj`` names it) available as a kubelet
    would where none runs; returns the workload as read before.

    With workload controllers running (a real control plane), its Pods exist: each one's status
    is patched Running and Ready, and the controllers make the workload available. Without Pods
    (the embedded server runs no controllers) the workload's own status is patched fully
    available for its current generation."""
    meta = obj.get("metadata") or {}
    api_version, kind = str(obj.get("apiVersion")), str(obj.get("kind"))
    namespace = meta.get("namespace")
    if kind not in ("Deployment", "StatefulSet", "DaemonSet"):
        raise _errors.ReconcilerUsageError(
            f"make_available: {kind} {meta.get('name')} is not a Deployment, StatefulSet or "
            f"DaemonSet")
    live = client.get(api_version, kind, meta["name"], namespace=namespace)
    labels = ((live.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    selector = ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
    pods = client.list("v1", "Pod", namespace=namespace, label_selector=selector)["items"]
    for pod in pods:
        client.patch("v1", "Pod", pod["metadata"]["name"], {"status": _ready_pod(pod)},
                     patch_type="application/merge-patch+json", namespace=namespace,
                     subresource="status")
    if pods:
        return dict(live)
    replicas = (live.get("spec") or {}).get("replicas", 1)
    status: dict[str, _Any] = {"observedGeneration": live["metadata"].get("generation", 1)}
    if kind == "DaemonSet":
        status.update(desiredNumberScheduled=replicas, currentNumberScheduled=replicas,
                      numberReady=replicas, numberAvailable=replicas,
                      updatedNumberScheduled=replicas)
    else:
        status.update(replicas=replicas, readyReplicas=replicas, availableReplicas=replicas,
                      updatedReplicas=replicas)
        if kind == "StatefulSet":
            status["currentReplicas"] = replicas
        else:
            # as the deployment controller reports a finished rollout (kstatus reads both)
            status["conditions"] = [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]
    client.patch(api_version, kind, meta["name"], {"status": status},
                 patch_type="application/merge-patch+json", namespace=namespace,
                 subresource="status")
    return dict(live)


def make_workloads_available(
    client: ClusterClient, namespace: str, *, label_selector: str | None = None
) -> list[str]:
    """Every Deployment, StatefulSet and DaemonSet of ``namespace`` (matching ``label_selector``)
    whose health is not ``Current`` made available with :func:`make_available`; their
    ``Kind name`` in the order done (empty when every workload already is).

    One call is one look, as one kubelet status report: a workload created or rolled later
    needs another call, so call it from the condition a test waits on."""
    from builders.health import health_of  # the kstatus verdict the readiness rules use

    done = []
    for api_version, kind in _WORKLOADS:
        items = client.list(api_version, kind, namespace=namespace,
                            label_selector=label_selector)["items"]
        for item in items:
            if not health_of(item).current:
                make_available(client, {"apiVersion": api_version, "kind": kind,
                                        "metadata": item["metadata"]})
                done.append(f"{kind} {item['metadata']['name']}")
    return done


def _ready_pod(pod: _abc.Mapping[str, _Any]) -> dict[str, _Any]:
    """A Pod's status as a kubelet reports it once every container runs and is ready."""
    containers = ((pod.get("spec") or {}).get("containers")) or ()
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "phase": "Running", "startTime": now, "podIP": "10.0.0.1", "hostIP": "10.0.0.2",
        "conditions": [{"type": kind, "status": "True", "lastTransitionTime": now}
                       for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
        "containerStatuses": [
            {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True,
             "started": True, "restartCount": 0, "state": {"running": {"startedAt": now}}}
            for c in containers],
    }
