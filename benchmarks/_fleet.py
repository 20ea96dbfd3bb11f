"""The pure part of ``benchmarks.compare``: the parents, what their children must be, statistics.

A fleet is N ``Thanos`` parents shaped like the demo's ``observatory`` (all four components, two
Ingresses: ten children each). ``desired_children`` runs the example's builders over the parents
as created (with their ``uid``), the one definition both operators are held to: a child matches
when it holds every field the builders set (``is_subset``), whatever the server or an operator
added besides (defaults, annotations). Nothing here does I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from builders.names import COMPONENT_LABEL
from examples.thanos import builders as thanos
from examples.thanos.crds import API_VERSION, KIND

NAMESPACE = "bench"
CHILD_KINDS: dict[str, tuple[str, str]] = {
    "Deployment": ("apps/v1", "deployments"),
    "StatefulSet": ("apps/v1", "statefulsets"),
    "Service": ("v1", "services"),
    "Ingress": ("networking.k8s.io/v1", "ingresses"),
}
"""Every child kind the example builds without ServiceMonitors: apiVersion and plural."""
WORKLOADS = ("Deployment", "StatefulSet")
DRIFT_LABEL = COMPONENT_LABEL
"""The label a drift removes (not the ``managed-by`` label both operators select children by)."""
NEW_IMAGE = "quay.io/thanos/thanos:v0.35.0"
"""The image of the spec change (every workload child changes)."""

ChildKey = tuple[str, str, str]
"""``(kind, namespace, name)``."""


def parent(index: int, *, namespace: str = NAMESPACE) -> dict[str, Any]:
    """The ``index``-th parent: four components and two Ingresses, ten children."""
    name = f"t{index:04d}"
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "objectStorageSecret": "thanos-objstore",
            "query": {"replicas": 2, "ingress": {"host": f"query.{name}.example"}},
            "queryFrontend": {"ingress": {"host": f"thanos.{name}.example"}},
            "storeGateway": {"storage": "20Gi"},
            "rule": {"logLevel": "debug"},
        },
    }


def object_storage_secret(*, namespace: str = NAMESPACE) -> dict[str, Any]:
    """The Secret every parent's ``objectStorageSecret`` names (the store gateway's declared
    input: without it the store gateway waits with ``InputMissing``)."""
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "thanos-objstore", "namespace": namespace},
            "stringData": {"objstore.yml": "type: FILESYSTEM"}}


def child_key(obj: Mapping[str, Any], kind: str | None = None) -> ChildKey:
    """The key of a child (``kind`` when the object lacks one, as list items do)."""
    meta = obj.get("metadata") or {}
    return (str(kind or obj.get("kind")), str(meta.get("namespace")), str(meta.get("name")))


def desired_children(parents: Iterable[Mapping[str, Any]]) -> dict[ChildKey, dict[str, Any] | None]:
    """Every child of every parent: the built object, or None when it must be absent."""
    result: dict[ChildKey, dict[str, Any] | None] = {}
    for owner in parents:
        for builder in thanos.build(owner):
            obj, state = builder()
            result[child_key(obj)] = None if state.is_absent else dict(obj)
    return result


def is_subset(want: Any, live: Any) -> bool:
    """Whether ``live`` holds every field of ``want`` with its value (lists item by item)."""
    if isinstance(want, Mapping):
        return isinstance(live, Mapping) and all(
            is_subset(value, live.get(key)) for key, value in want.items()
        )
    if isinstance(want, list):
        return (
            isinstance(live, list) and len(live) == len(want)
            and all(is_subset(w, v) for w, v in zip(want, live, strict=True))
        )
    return bool(want == live)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) by the nearest-rank method, or None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float | None:
    """The median, or None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def verb_delta(
    before: Mapping[str, int], after: Mapping[str, int], own: Mapping[str, int]
) -> dict[str, int]:
    """Requests by verb between two server snapshots, minus the harness's own (``own``)."""
    verbs = set(before) | set(after)
    return {
        verb: after.get(verb, 0) - before.get(verb, 0) - own.get(verb, 0) for verb in sorted(verbs)
    }


WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


def writes(by_verb: Mapping[str, int]) -> int:
    """How many of the requests were writes."""
    return sum(by_verb.get(verb, 0) for verb in WRITE_VERBS)


def ratio(ours: float | None, theirs: float | None) -> float | None:
    """``ours / theirs`` rounded to 3 places; None when undefined (missing, or theirs is 0)."""
    if ours is None or theirs is None or theirs == 0:
        return None
    return round(ours / theirs, 3)
