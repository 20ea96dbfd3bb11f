"""Server-side tables (``Accept: ...;as=Table``): what ``kubectl get`` prints.

A real server prints per-kind columns; this module reproduces the common ones (Deployment
READY/UP-TO-DATE/AVAILABLE, Pod READY/STATUS/RESTARTS, Service TYPE/CLUSTER-IP/PORT(S), ...),
a custom resource's ``additionalPrinterColumns`` (simple ``.a.b`` JSON paths), and falls back to
NAME and AGE. Rows embed ``PartialObjectMetadata`` unless ``includeObject=Object`` is asked.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["table"]

Cell = Callable[[Mapping[str, Any]], Any]


def _get(obj: Mapping[str, Any], path: str) -> Any:
    value: Any = obj
    for part in path.strip(".").split("."):
        if not part:
            continue
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _age(obj: Mapping[str, Any]) -> str:
    timestamp = _get(obj, "metadata.creationTimestamp")
    try:
        created = datetime.datetime.strptime(str(timestamp), "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.UTC
        )
    except ValueError:
        return "<unknown>"
    seconds = max(int((datetime.datetime.now(datetime.UTC) - created).total_seconds()), 0)
    for limit, unit, size in ((120, "s", 1), (7200, "m", 60), (172800, "h", 3600)):
        if seconds < limit:
            return f"{seconds // size}{unit}"
    return f"{seconds // 86400}d"


def _ready(obj: Mapping[str, Any]) -> str:
    return f"{_get(obj, 'status.readyReplicas') or 0}/{_get(obj, 'spec.replicas') or 0}"


def _pod_ready(obj: Mapping[str, Any]) -> str:
    containers = _get(obj, "spec.containers") or []
    ready = sum(1 for s in _get(obj, "status.containerStatuses") or [] if s.get("ready"))
    return f"{ready}/{len(containers)}"


def _restarts(obj: Mapping[str, Any]) -> int:
    return sum(int(s.get("restartCount") or 0)
               for s in _get(obj, "status.containerStatuses") or [])


def _ports(obj: Mapping[str, Any]) -> str:
    ports = _get(obj, "spec.ports") or []
    text = ",".join(
        f"{p.get('port')}:{p['nodePort']}/{p.get('protocol', 'TCP')}" if p.get("nodePort")
        else f"{p.get('port')}/{p.get('protocol', 'TCP')}"
        for p in ports
    )
    return text or "<none>"


def _count(path: str) -> Cell:
    return lambda obj: len(_get(obj, path) or {})


def _field(path: str, default: Any = "<none>") -> Cell:
    def cell(obj: Mapping[str, Any]) -> Any:
        value = _get(obj, path)
        return default if value is None else value
    return cell


_NAME: tuple[str, str, Cell] = ("Name", "name", lambda obj: _get(obj, "metadata.name") or "")
_AGE: tuple[str, str, Cell] = ("Age", "", _age)

_COLUMNS: dict[str, list[tuple[str, str, Cell]]] = {
    "Deployment": [("Ready", "", _ready),
                   ("Up-to-date", "", _field("status.updatedReplicas", 0)),
                   ("Available", "", _field("status.availableReplicas", 0))],
    "StatefulSet": [("Ready", "", _ready)],
    "ReplicaSet": [("Desired", "", _field("spec.replicas", 0)),
                   ("Current", "", _field("status.replicas", 0)),
                   ("Ready", "", _field("status.readyReplicas", 0))],
    "DaemonSet": [("Desired", "", _field("status.desiredNumberScheduled", 0)),
                  ("Current", "", _field("status.currentNumberScheduled", 0)),
                  ("Ready", "", _field("status.numberReady", 0))],
    "Pod": [("Ready", "", _pod_ready), ("Status", "", _field("status.phase", "Pending")),
            ("Restarts", "", _restarts)],
    "Service": [("Type", "", _field("spec.type", "ClusterIP")),
                ("Cluster-IP", "", _field("spec.clusterIP")),
                ("External-IP", "", lambda obj: ",".join(_get(obj, "spec.externalIPs") or [])
                 or "<none>"),
                ("Port(s)", "", _ports)],
    "ConfigMap": [("Data", "", lambda obj: len(_get(obj, "data") or {})
                   + len(_get(obj, "binaryData") or {}))],
    "Secret": [("Type", "", _field("type", "Opaque")), ("Data", "", _count("data"))],
    "Namespace": [("Status", "", _field("status.phase", "Active"))],
    "PersistentVolumeClaim": [("Status", "", _field("status.phase", "Pending")),
                              ("Volume", "", _field("spec.volumeName", "")),
                              ("StorageClass", "", _field("spec.storageClassName"))],
    "Job": [("Completions", "", lambda obj: f"{_get(obj, 'status.succeeded') or 0}/"
             f"{_get(obj, 'spec.completions') or 1}")],
    "ServiceAccount": [("Secrets", "", _count("secrets"))],
    "CustomResourceDefinition": [("Created At", "date",
                                  _field("metadata.creationTimestamp", ""))],
}


def _custom_columns(printer_columns: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, Cell]]:
    columns = []
    for column in printer_columns:
        path = str(column.get("jsonPath") or "")
        if not path.startswith(".") or "[" in path:
            continue  # only simple field paths are printed
        cell: Cell = _age if path == ".metadata.creationTimestamp" else _field(path, "")
        columns.append((str(column.get("name") or path), str(column.get("format") or ""), cell))
    return columns


def table(
    kind: str,
    items: Sequence[Mapping[str, Any]],
    *,
    metadata: Mapping[str, Any],
    include_object: str,
    with_columns: bool = True,
    printer_columns: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """A ``meta.k8s.io/v1`` Table of ``items``."""
    if printer_columns:
        columns = [_NAME, *_custom_columns(printer_columns)]
        if not any(c[2] is _age for c in columns):
            columns.append(_AGE)
    elif kind == "CustomResourceDefinition":
        columns = [_NAME, *_COLUMNS[kind]]  # a real server prints no AGE here
    else:
        columns = [_NAME, *_COLUMNS.get(kind, []), _AGE]
    rows = []
    for obj in items:
        if include_object == "Object":
            embedded: Mapping[str, Any] = obj
        else:
            embedded = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                        "metadata": obj.get("metadata") or {}}
        rows.append({"cells": [cell(obj) for _, _, cell in columns], "object": embedded})
    definitions = [
        {"name": name, "type": "integer" if name in ("Restarts",) else "string",
         "format": fmt, "description": name, "priority": 0}
        for name, fmt, _ in columns
    ] if with_columns else []
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": dict(metadata),
            "columnDefinitions": definitions, "rows": rows}
