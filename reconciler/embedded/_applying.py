"""Server-side apply: field ownership per manager, conflicts, and removal of dropped fields.

What ``server-side-apply.json`` records, in a simplified model: an apply's fields are the leaves
of its configuration (maps are walked, lists are atomic leaves); each ``Apply`` manager owns the
fields it applied, kept in ``metadata.managedFields`` in the real ``FieldsV1`` format. Applying a
different value to a field another apply manager owns is a 409 conflict unless ``force``, which
takes the field over; fields a manager applied before and no longer applies are removed when no
other manager owns them. ``Update`` operations (PUT, PATCH) do not record ownership here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.embedded._statuses import ApiStatusError, status_body
from reconciler.embedded._times import now_timestamp

__all__ = ["apply_fields", "fields_of", "managed_after_apply", "remove_fields"]

Path = tuple[str, ...]
_MISSING = object()
_SKIPPED_METADATA = frozenset({
    "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink",
})


def fields_of(config: Mapping[str, Any]) -> set[Path]:
    """The leaf paths an apply configuration sets (identity and server metadata excluded)."""
    found: set[Path] = set()

    def walk(node: Mapping[str, Any], prefix: Path) -> None:
        for key, value in node.items():
            if not prefix and key in ("apiVersion", "kind"):
                continue
            if prefix == ("metadata",) and key in _SKIPPED_METADATA:
                continue
            path = (*prefix, str(key))
            if isinstance(value, Mapping) and value:
                walk(value, path)
            else:
                found.add(path)

    walk(config, ())
    return found


def _to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for part in path:
            node = node.setdefault(f"f:{part}", {})
    return tree


def _from_fields_v1(tree: Any, prefix: Path = ()) -> set[Path]:
    paths: set[Path] = set()
    if not isinstance(tree, Mapping):
        return paths
    for key, child in tree.items():
        if not str(key).startswith("f:"):
            continue
        path = (*prefix, str(key)[2:])
        if isinstance(child, Mapping) and any(str(k).startswith("f:") for k in child):
            paths |= _from_fields_v1(child, path)
        else:
            paths.add(path)
    return paths


def _value(obj: Any, path: Path) -> Any:
    for part in path:
        if not isinstance(obj, Mapping) or part not in obj:
            return _MISSING
        obj = obj[part]
    return obj


def _overlaps(a: Path, b: Path) -> bool:
    shorter = min(len(a), len(b))
    return a[:shorter] == b[:shorter]


def remove_fields(obj: dict[str, Any], paths: Iterable[Path]) -> None:
    """Delete ``paths`` from ``obj`` in place, dropping maps the removal leaves empty."""
    for path in paths:
        parents: list[tuple[dict[str, Any], str]] = []
        node: Any = obj
        for part in path[:-1]:
            if not isinstance(node, dict) or part not in node:
                node = None
                break
            parents.append((node, part))
            node = node[part]
        if not isinstance(node, dict) or path[-1] not in node:
            continue
        del node[path[-1]]
        for parent, key in reversed(parents):
            if parent[key] == {}:
                del parent[key]
            else:
                break


def _entries(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    meta = obj.get("metadata") or {}
    return [dict(e) for e in meta.get("managedFields") or () if isinstance(e, Mapping)]


def apply_fields(
    live: Mapping[str, Any] | None,
    config: Mapping[str, Any],
    *,
    manager: str,
    force: bool,
) -> tuple[set[Path], set[Path]]:
    """Check conflicts; returns (the fields this apply owns, the fields to remove from live).

    Raises 409 ``Conflict`` with ``FieldManagerConflict`` causes when another apply manager
    owns a field this apply sets to a different value, unless ``force``.
    """
    mine = fields_of(config)
    if live is None:
        return mine, set()
    conflicts: list[tuple[str, Path]] = []
    others: set[Path] = set()
    previous: set[Path] = set()
    for entry in _entries(live):
        owned = _from_fields_v1(entry.get("fieldsV1"))
        if entry.get("manager") == manager and entry.get("operation") == "Apply":
            previous = owned
            continue
        if entry.get("operation") != "Apply":
            continue
        for path in sorted(mine):
            for theirs in owned:
                if _overlaps(path, theirs) and _value(live, path) != _value(config, path):
                    conflicts.append((str(entry.get("manager")), path))
                    break
        others |= owned
    if conflicts and not force:
        raise _conflict_error(conflicts)
    removed = {p for p in previous - mine if not any(_overlaps(p, o) for o in others)}
    return mine, removed


def _conflict_error(conflicts: list[tuple[str, Path]]) -> ApiStatusError:
    causes = [{"reason": "FieldManagerConflict", "message": f'conflict with "{who}"',
               "field": "." + ".".join(path)} for who, path in conflicts]
    if len(conflicts) == 1:
        who, path = conflicts[0]
        message = f'Apply failed with 1 conflict: conflict with "{who}": .{".".join(path)}'
    else:
        listed = "\n".join(f'- conflict with "{who}": .{".".join(path)}'
                           for who, path in conflicts)
        message = f"Apply failed with {len(conflicts)} conflicts:\n{listed}"
    body = status_body(409, "Conflict", message=message, details={"causes": causes})
    return ApiStatusError(409, body)


def managed_after_apply(
    live: Mapping[str, Any] | None,
    *,
    manager: str,
    api_version: str,
    owned: set[Path],
    force: bool,
) -> list[dict[str, Any]]:
    """``metadata.managedFields`` after this apply (the manager's entry kept as is when its
    fields did not change, so a repeated apply is a no-op)."""
    now = now_timestamp()
    result: list[dict[str, Any]] = []
    mine_entry: dict[str, Any] | None = None
    for entry in _entries(live) if live is not None else []:
        if entry.get("manager") == manager and entry.get("operation") == "Apply":
            if _from_fields_v1(entry.get("fieldsV1")) == owned:
                mine_entry = entry
            continue
        if force and entry.get("operation") == "Apply":
            kept = {p for p in _from_fields_v1(entry.get("fieldsV1"))
                    if not any(_overlaps(p, o) for o in owned)}
            if not kept:
                continue
            entry = {**entry, "fieldsV1": _to_fields_v1(kept)}
        result.append(entry)
    if mine_entry is None:
        mine_entry = {"manager": manager, "operation": "Apply", "apiVersion": api_version,
                      "time": now, "fieldsType": "FieldsV1", "fieldsV1": _to_fields_v1(owned)}
    position = next((i for i, e in enumerate(_entries(live) if live else [])
                     if e.get("manager") == manager and e.get("operation") == "Apply"),
                    len(result))
    result.insert(min(position, len(result)), mine_entry)
    return result
