"""Server-side apply and field ownership: ``metadata.managedFields`` per manager and operation.

An apply's fields are those its configuration sets (``objectmatcher.applied_fields``: leaves,
list-map items by their keys, set items by value, atomic lists and maps as one value, typed by
the kind's schema or the CRD's). Each manager's fields are kept per operation in
``metadata.managedFields`` in the real ``FieldsV1`` format. Applying a different value to a field
another manager owns (by apply or by update) is a 409 conflict naming the field and the manager,
unless ``force``, which takes the field over; the same value shares the field. Fields a manager
applied before and no longer applies are removed from the object when no other manager owns
them. An update (PUT, PATCH, or a create) by a named manager takes the fields it changed from
every other manager and records them under an ``Update`` entry; fields an update removed leave
every manager's set. A write that sets ``managedFields`` itself replaces them (kubectl's
csaupgrade moves ownership this way). The differences from a real server are listed in
docs/embedded-apiserver.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from objectmatcher import (
    FIELD_MISSING,
    FieldPath,
    applied_fields,
    changed_fields,
    field_value,
    fields_from_v1,
    fields_to_v1,
    merge_applied,
    remove_fields,
)
from reconciler.embedded._statuses import ApiStatusError, status_body
from reconciler.embedded._times import now_timestamp

__all__ = ["apply_configuration", "managed_after_update"]

Entries = list[dict[str, Any]]


def _entries(obj: Mapping[str, Any] | None) -> Entries:
    meta = (obj or {}).get("metadata") or {}
    return [dict(e) for e in meta.get("managedFields") or () if isinstance(e, Mapping)]


def _is(entry: Mapping[str, Any], manager: str, operation: str) -> bool:
    return entry.get("manager") == manager and entry.get("operation") == operation \
        and not entry.get("subresource")


def _entry(manager: str, operation: str, api_version: str, fields: frozenset[FieldPath]
           ) -> dict[str, Any]:
    return {"manager": manager, "operation": operation, "apiVersion": api_version,
            "time": now_timestamp(), "fieldsType": "FieldsV1",
            "fieldsV1": fields_to_v1(fields)}


def _sorted(entries: Entries) -> Entries:
    """Entries in the order a real server keeps them: ``Apply`` before ``Update``, then the
    most recent first (to the second), then by manager and API version."""
    def key(entry: Mapping[str, Any]) -> tuple[str, int, str, str]:
        time = str(entry.get("time") or "")
        stamp = int("".join(ch for ch in time if ch.isdigit())[:14] or 0)
        return (str(entry.get("operation")), -stamp, str(entry.get("manager")),
                str(entry.get("apiVersion")))
    return sorted(entries, key=key)


def _with_fields(entry: dict[str, Any], fields: frozenset[FieldPath]) -> dict[str, Any]:
    return {**entry, "fieldsV1": fields_to_v1(fields)}


def _is_item(path: FieldPath) -> bool:
    return path[-1][:2] in ("k:", "v:", "i:")


def apply_configuration(
    live: Mapping[str, Any] | None,
    config: Mapping[str, Any],
    *,
    manager: str,
    force: bool,
    api_version: str,
    crd_schema: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], Entries]:
    """The object after applying ``config`` (``config`` itself when ``live`` is None) and its
    ``managedFields``.

    Raises 409 ``Conflict`` with one ``FieldManagerConflict`` cause per (manager, field) when
    another manager owns a field this apply sets to a different value, unless ``force``.
    """
    mine = applied_fields(config, crd_schema=crd_schema)
    entries = _entries(live)
    if live is None:
        return dict(config), [_entry(manager, "Apply", api_version, mine)]
    conflicts: list[tuple[str, FieldPath]] = []
    taken: dict[int, frozenset[FieldPath]] = {}
    for index, entry in enumerate(entries):
        if _is(entry, manager, "Apply"):
            continue
        owned = fields_from_v1(entry.get("fieldsV1"))
        lost = frozenset(
            path for path in mine & owned if not _is_item(path)
            and field_value(live, path, crd_schema=crd_schema)
            != field_value(config, path, crd_schema=crd_schema)
        )
        who = f'"{entry.get("manager")}"'
        if entry.get("operation") == "Update":
            who += f' using {entry.get("apiVersion")}'
        conflicts += [(who, path) for path in sorted(lost)]
        if lost:
            taken[index] = owned - lost
    if conflicts and not force:
        raise _conflict_error(conflicts)
    previous: frozenset[FieldPath] = frozenset()
    result: Entries = []
    mine_at: int | None = None
    others: set[FieldPath] = set()
    for index, entry in enumerate(entries):
        if _is(entry, manager, "Apply"):
            previous = fields_from_v1(entry.get("fieldsV1"))
            mine_at = len(result)
            result.append(entry)
            continue
        owned = taken.get(index, fields_from_v1(entry.get("fieldsV1")))
        if not owned:
            continue
        others |= owned
        result.append(_with_fields(entry, owned) if index in taken else entry)
    removed = {path for path in previous - mine
               if not any(other[:len(path)] == path for other in others)}
    new = remove_fields(merge_applied(live, config, crd_schema=crd_schema), removed,
                        crd_schema=crd_schema)
    own = _entry(manager, "Apply", api_version, mine)
    if mine_at is None:
        result.append(own)
    elif previous != mine:
        result[mine_at] = own
    return new, _sorted(result)


def _conflict_error(conflicts: list[tuple[str, FieldPath]]) -> ApiStatusError:
    def dotted(path: FieldPath) -> str:
        return "".join(f".{e[2:]}" if e.startswith("f:") else f"[{e[2:]}]" for e in path)

    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {who}",
               "field": dotted(path)} for who, path in conflicts]
    if len(conflicts) == 1:
        who, path = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {who}: {dotted(path)}"
    else:
        listed = "\n".join(f"- conflict with {who}: {dotted(path)}" for who, path in conflicts)
        message = f"Apply failed with {len(conflicts)} conflicts:\n{listed}"
    body = status_body(409, "Conflict", message=message, details={"causes": causes})
    return ApiStatusError(409, body)


def _timeless(entries: list[Any]) -> list[Any]:
    """Entries as compared for a change (a client may send the times back in another format)."""
    return [{k: v for k, v in e.items() if k != "time"} if isinstance(e, Mapping) else e
            for e in entries]


def managed_after_update(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    *,
    manager: str | None,
    api_version: str,
    given: Any = None,
    crd_schema: Mapping[str, Any] | None = None,
) -> Entries:
    """``managedFields`` after an update (or a create, ``old`` None) by ``manager``.

    ``given`` is the ``managedFields`` the request carried: when it differs from the stored
    ones it replaces them (the update's own changes are recorded on top). Without a manager
    (the server's own writes) nothing is recorded, only fields that are gone leave the sets.
    """
    base = _entries(old)
    if isinstance(given, list) and _timeless(given) != _timeless(base):
        base = [dict(e) for e in given if isinstance(e, Mapping) and e]
    changed = changed_fields(old, new, crd_schema=crd_schema)
    result: Entries = []
    mine_at: int | None = None
    previous: frozenset[FieldPath] = frozenset()
    for entry in base:
        owned = fields_from_v1(entry.get("fieldsV1"))
        if manager is not None and _is(entry, manager, "Update"):
            mine_at, previous = len(result), owned
            result.append(entry)
            continue
        kept = frozenset(path for path in owned - changed
                         if field_value(new, path, crd_schema=crd_schema) is not FIELD_MISSING)
        if kept == owned:
            result.append(entry)
        elif kept:
            result.append(_with_fields(entry, kept))
    if not changed or manager is None:
        return _sorted(result)
    mine = frozenset(path for path in previous | changed
                     if field_value(new, path, crd_schema=crd_schema) is not FIELD_MISSING)
    own = _entry(manager, "Update", api_version, mine)
    if mine_at is None:
        result.append(own)
    else:
        result[mine_at] = own
    return _sorted(result)
