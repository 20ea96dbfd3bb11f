"""Server-side tables (``Accept: ...;as=Table``): what ``kubectl get`` prints.

A real server prints per-kind columns; this module reproduces the common ones (Deployment
READY/UP-TO-DATE/AVAILABLE, Pod READY/STATUS/RESTARTS, Service TYPE/CLUSTER-IP/PORT(S), ...),
Event LAST SEEN/TYPE/REASON/OBJECT/MESSAGE with the wide columns of ``printEvent`` in
``pkg/printers/internalversion`` for core/v1 and events.k8s.io/v1 Events alike), a custom
resource's ``additionalPrinterColumns`` (simple ``.a.b`` JSON paths), and falls back to NAME and
AGE. Rows embed ``PartialObjectMetadata`` unless ``includeObject=Object`` is asked; then they
embed the whole object with its ``apiVersion`` and ``kind`` (list items have none), which
``kubectl get --sort-by`` decodes to sort the rows.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reconciler.embedded._times import parse_time

__all__ = ["human_duration", "table"]

Cell = Callable[[Mapping[str, Any]], Any]


def _get(obj: Mapping[str, Any], path: str) -> Any:
    value: Any = obj
    for part in path.strip(".").split("."):
        if not part:
            continue
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _age(obj: Mapping[str, Any]) -> str:
    created = parse_time(_get(obj, "metadata.creationTimestamp"))
    if created is None:
        return "<unknown>"
    seconds = max(int((datetime.datetime.now(datetime.UTC) - created).total_seconds()), 0)
    for limit, unit, size in ((120, "s", 1), (7200, "m", 60), (172800, "h", 3600)):
        if seconds < limit:
            return f"{seconds // size}{unit}"
    return f"{seconds // 86400}d"


def human_duration(seconds: float) -> str:
    """``duration.HumanDuration`` of apimachinery: ``45s``, ``3m20s``, ``2h5m``, ``3d4h``."""
    total = int(seconds)
    if total < -1:
        return "<invalid>"
    if total < 0:
        return "0s"
    if total < 120:
        return f"{total}s"
    minutes, hours = total // 60, total // 3600
    if minutes < 10:
        return f"{minutes}m{total % 60}s" if total % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    if hours < 24 * 365 * 8:
        return f"{days // 365}y{days % 365}d" if days % 365 else f"{days // 365}y"
    return f"{days // 365}y"


def _since(value: Any) -> str:
    when = parse_time(value)
    if when is None:
        return "<unknown>"
    return human_duration((datetime.datetime.now(datetime.UTC) - when).total_seconds())


def _as_core_event(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """An events.k8s.io/v1 Event in core/v1 field names (the server stores both as one type)."""
    if "involvedObject" in obj or not any(
        key in obj for key in ("regarding", "note", "reportingController", "series",
                               "deprecatedSource", "deprecatedCount")
    ):
        return obj
    return {
        "metadata": obj.get("metadata") or {},
        "involvedObject": obj.get("regarding") or {},
        "reason": obj.get("reason"),
        "message": obj.get("note"),
        "type": obj.get("type"),
        "source": obj.get("deprecatedSource") or {},
        "reportingComponent": obj.get("reportingController"),
        "reportingInstance": obj.get("reportingInstance"),
        "firstTimestamp": obj.get("deprecatedFirstTimestamp"),
        "lastTimestamp": obj.get("deprecatedLastTimestamp"),
        "count": obj.get("deprecatedCount"),
        "eventTime": obj.get("eventTime"),
        "series": obj.get("series"),
    }


def _event_cells(raw: Mapping[str, Any]) -> list[Any]:
    """``printEvent`` with ``Wide`` (a server always prints every column)."""
    obj = _as_core_event(raw)
    first = obj.get("firstTimestamp")
    first_seen = _since(first) if first else _since(obj.get("eventTime"))
    last = obj.get("lastTimestamp")
    last_seen = _since(last) if last else first_seen
    count = int(obj.get("count") or 0)
    series = obj.get("series")
    if isinstance(series, Mapping):
        last_seen = _since(series.get("lastObservedTime"))
        count = int(series.get("count") or 0)
    elif count == 0:
        count = 1  # singleton events of the new API carry no count
    involved = obj.get("involvedObject") or {}
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingComponent") or ""
    instance = source.get("host") or obj.get("reportingInstance") or ""
    source_text = (f"{component}, {instance}" if instance else component) if component else ""
    return [last_seen, obj.get("type") or "", obj.get("reason") or "", target,
            involved.get("fieldPath") or "", source_text,
            str(obj.get("message") or "").strip(), first_seen, count,
            _get(obj, "metadata.name") or ""]


_EVENT_COLUMNS: list[tuple[str, int, str]] = [
    ("Last Seen", 0, ""), ("Type", 0, ""), ("Reason", 0, ""), ("Object", 0, ""),
    ("Subobject", 1, ""), ("Source", 1, ""), ("Message", 0, ""), ("First Seen", 1, ""),
    ("Count", 1, ""), ("Name", 1, "name"),
]


def _event_table(
    items: Sequence[Mapping[str, Any]], *, with_columns: bool
) -> tuple[list[dict[str, Any]], list[list[Any]]]:
    definitions = [
        {"name": name, "type": "string", "format": fmt, "description": name,
         "priority": priority}
        for name, priority, fmt in _EVENT_COLUMNS
    ] if with_columns else []
    return definitions, [_event_cells(obj) for obj in items]


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


def _embedded(
    obj: Mapping[str, Any], include_object: str, api_version: str, kind: str
) -> Mapping[str, Any]:
    if include_object == "Object":
        return {"apiVersion": api_version, "kind": kind, **obj}
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata") or {}}


def table(
    kind: str,
    items: Sequence[Mapping[str, Any]],
    *,
    api_version: str,
    metadata: Mapping[str, Any],
    include_object: str,
    with_columns: bool = True,
    printer_columns: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """A ``meta.k8s.io/v1`` Table of ``items``."""
    if kind == "Event" and not printer_columns:
        definitions, cells = _event_table(items, with_columns=with_columns)
        return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": dict(metadata),
                "columnDefinitions": definitions,
                "rows": [{"cells": row,
                          "object": _embedded(obj, include_object, api_version, kind)}
                         for row, obj in zip(cells, items, strict=True)]}
    if printer_columns:
        columns = [_NAME, *_custom_columns(printer_columns)]
        if not any(c[2] is _age for c in columns):
            columns.append(_AGE)
    elif kind == "CustomResourceDefinition":
        columns = [_NAME, *_COLUMNS[kind]]  # a real server prints no AGE here
    else:
        columns = [_NAME, *_COLUMNS.get(kind, []), _AGE]
    rows = [{"cells": [cell(obj) for _, _, cell in columns],
             "object": _embedded(obj, include_object, api_version, kind)} for obj in items]
    definitions = [
        {"name": name, "type": "integer" if name in ("Restarts",) else "string",
         "format": fmt, "description": name, "priority": 0}
        for name, fmt, _ in columns
    ] if with_columns else []
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": dict(metadata),
            "columnDefinitions": definitions, "rows": rows}
