"""What a kubelet would report of a workload the benchmark's server runs no Pods for.

The embedded server runs no controllers and no kubelet, so a Deployment or StatefulSet never
becomes Available by itself; the Thanos example's query frontend waits for the query Deployment
to be Available (issue 24), so without this the fleet would never converge. ``available_status``
is the pure half: the status patch that says "fully available for your generation", or None when
the workload already says so. ``benchmarks._child_watch`` sends it (a harness request, counted as
the harness's own, so neither operator is charged for it).

Boundary: pure; no I/O, no other kinds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["available_status"]


def available_status(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch of ``status`` that makes the Deployment or StatefulSet ``obj`` available
    for its generation, or None when its status already says so (or it is another kind)."""
    kind = obj.get("kind")
    if kind not in ("Deployment", "StatefulSet"):
        return None
    generation = (obj.get("metadata") or {}).get("generation", 1)
    replicas = (obj.get("spec") or {}).get("replicas", 1)
    status = obj.get("status") or {}
    if (status.get("observedGeneration") == generation
            and status.get("availableReplicas", 0) >= replicas
            and status.get("readyReplicas", 0) >= replicas):
        return None
    patch: dict[str, Any] = {
        "observedGeneration": generation, "replicas": replicas, "readyReplicas": replicas,
        "availableReplicas": replicas, "updatedReplicas": replicas}
    if kind == "StatefulSet":
        patch["currentReplicas"] = replicas
    else:
        patch["conditions"] = [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]
    return {"status": patch}
