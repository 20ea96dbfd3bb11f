"""How a child is written: the three-way merge (the default) or server-side apply, in pure code.

``ThreeWayMerge()`` is the toolkit's own comparison with the last-applied annotation
(``planning.plan_child``). ``ServerSideApply(force=False)`` sends the object as built as an
apply configuration with the operator's name as field manager, and the server records what the
operator owns in ``managedFields``. This module decides, with no I/O, whether an apply is
needed: from the desired object, the live object (with its ``managedFields``) and the digest of
the configuration the toolkit applied last (the annotation ``optk.dev/applied-digest``: a digest,
never the object). An unchanged desired object whose fields all hold our values makes no
request, in steady state and on resync; a field of ours changed by hand (an ``Update``
manager) is taken back by one forced apply; a field another apply manager owns with another
value is a conflict, reported and not written unless ``force``.

It also plans the migrations both ways, as kubectl's ``csaupgrade`` does: a child last written
with the last-applied annotation gets an ``Apply`` entry for the fields the annotation recorded
(taken from the ``Update`` entries that held them) and loses the annotation, so a field later
removed from the builder is deleted by the server; going back, the three-way merge reads the
fields of our ``Apply`` entry as its original (``original_from_apply``), so it deletes them too.
The boundary: decisions only; ``reconciling`` reads and sends.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

import attrs

from objectmatcher import (
    FIELD_MISSING,
    LAST_APPLIED_ANNOTATION,
    FieldPath,
    KubeObject,
    applied_fields,
    calculate_patch,
    extract_fields,
    field_value,
    fields_from_v1,
    fields_to_v1,
    remove_fields,
    set_last_applied,
)
from reconciler._base.keys import meta_of

__all__ = [
    "APPLIED_DIGEST_ANNOTATION",
    "APPLY_PATCH",
    "ApplyDecision",
    "ApplyStrategy",
    "ServerSideApply",
    "ThreeWayMerge",
    "apply_configuration",
    "decide_apply",
    "has_managed_fields",
    "migration_to_apply",
    "original_from_apply",
]

APPLIED_DIGEST_ANNOTATION: Final = "optk.dev/applied-digest"
"""The digest of the apply configuration the toolkit sent last (SHA-256 of its JSON)."""
APPLY_PATCH: Final = "application/apply-patch+yaml"
JSON_PATCH: Final = "application/json-patch+json"
_DIGEST_POINTER: Final = APPLIED_DIGEST_ANNOTATION.replace("~", "~0").replace("/", "~1")
_SERVER_META: Final = ("resourceVersion", "uid", "creationTimestamp", "generation",
                       "managedFields", "selfLink", "deletionTimestamp")


@attrs.frozen(kw_only=True)
class ThreeWayMerge:
    """Write children with the three-way merge of the last-applied annotation (the default):
    a strategic merge (built-in kinds) or merge patch (custom resources) of what changed."""


@attrs.frozen(kw_only=True)
class ServerSideApply:
    """Write children by server-side apply, the operator's name as field manager.

    ``force=False`` (the default) reports a field another apply manager owns with another value
    as a conflict and leaves it; ``force=True`` takes it over. Fields changed by hand (update
    operations: ``kubectl edit``, ``scale``) are drift and always taken back.
    """

    force: bool = False


ApplyStrategy = ThreeWayMerge | ServerSideApply
"""The strategies ``Applying(strategy=...)`` and ``DesiredState``'s ``apply`` accept."""


def _digest(config: Mapping[str, Any]) -> str:
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def apply_configuration(desired: KubeObject) -> dict[str, Any]:
    """What an apply sends: the object as built, without server metadata or status, with the
    digest of itself in ``optk.dev/applied-digest`` (and no last-applied annotation)."""
    config = {k: v for k, v in desired.items() if k != "status"}
    meta = {k: v for k, v in meta_of(desired).items() if k not in _SERVER_META}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k not in (LAST_APPLIED_ANNOTATION, APPLIED_DIGEST_ANNOTATION)}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    config["metadata"] = meta
    digest = _digest(config)
    meta["annotations"] = {**annotations, APPLIED_DIGEST_ANNOTATION: digest}
    return config


def _entries(live: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [e for e in meta_of(live).get("managedFields") or () if isinstance(e, Mapping)]


def has_managed_fields(live: Mapping[str, Any]) -> bool:
    """Whether ``live`` came with its ``managedFields`` (informer caches keep only the
    ``Apply`` entries: an ``Update`` entry says the object was read from the server)."""
    return any(e.get("operation") != "Apply" for e in _entries(live))


def _knows_appliers(live: Mapping[str, Any], manager: str) -> bool:
    """Whether ``live`` shows every ``Apply`` entry: read from the server, or from a cache
    (which keeps them) holding ours."""
    return has_managed_fields(live) or any(_is_mine(e, manager) for e in _entries(live))


def _is_mine(entry: Mapping[str, Any], manager: str, operation: str = "Apply") -> bool:
    return entry.get("manager") == manager and entry.get("operation") == operation \
        and not entry.get("subresource")


@attrs.frozen(kw_only=True)
class ApplyDecision:
    """What server-side apply should do to one live object."""

    body: Mapping[str, Any] | list[dict[str, Any]] | None = attrs.field(default=None,
                                                                           repr=False)
    """The apply configuration (or the JSON patch of a migration) to send; None: nothing."""
    patch_type: str = APPLY_PATCH
    force: bool = False
    reread: bool = False
    """A write is needed and ``managedFields`` are missing: read the object from the server
    and decide again."""
    migrating: bool = False
    """The body moves ownership from the last-applied annotation (decide again after it)."""
    conflicts: tuple[tuple[str, str], ...] = ()
    """(field, manager) pairs another apply manager owns with another value."""
    diff: tuple[Any, ...] = ()
    reason: str = ""


def _dotted(path: FieldPath) -> str:
    return "".join(f".{e[2:]}" if e.startswith("f:") else f"[{e[2:]}]" for e in path)


def decide_apply(
    *,
    live: KubeObject,
    desired: KubeObject,
    strategy: ServerSideApply,
    manager: str,
    crd_schema: Mapping[str, Any] | None = None,
    now: str = "",
) -> ApplyDecision:
    """Whether and what to apply to ``live`` (an existing object that is ours) for ``desired``.

    ``now`` is the time written into a migrated ``Apply`` entry (RFC 3339, to the second).
    """
    annotations = meta_of(live).get("annotations") or {}
    if LAST_APPLIED_ANNOTATION in annotations:
        if not has_managed_fields(live):
            return ApplyDecision(reread=True, reason="migration needs managedFields")
        return ApplyDecision(
            body=migration_to_apply(live, manager=manager, crd_schema=crd_schema, now=now),
            patch_type=JSON_PATCH, migrating=True,
            reason=f"migrate from {LAST_APPLIED_ANNOTATION} to server-side apply")
    config = apply_configuration(desired)
    digest = config["metadata"]["annotations"][APPLIED_DIGEST_ANNOTATION]
    unchanged = annotations.get(APPLIED_DIGEST_ANNOTATION) == digest
    match = calculate_patch(_without_records(live), config, crd_schema=crd_schema)
    if unchanged and not _drifted(match.patch):
        return ApplyDecision(reason="as applied")
    if not _knows_appliers(live, manager):
        return ApplyDecision(reread=True, reason="an apply needs managedFields")
    conflicts = () if strategy.force else _conflicts(live, config, manager, crd_schema)
    if conflicts:
        listed = ", ".join(f'{field} (owned by "{who}")' for field, who in conflicts)
        return ApplyDecision(conflicts=conflicts, diff=_shown(match.diff),
                             reason=f"conflict: {listed}; not written (force=False)")
    return ApplyDecision(body=config, force=True, diff=_shown(match.diff))


def _shown(diff: Any) -> tuple[Any, ...]:
    """The diff items of fields, not of the toolkit's own records."""
    records = {LAST_APPLIED_ANNOTATION, APPLIED_DIGEST_ANNOTATION}
    return tuple(d for d in diff if not (tuple(d.path[:2]) == ("metadata", "annotations")
                                         and len(d.path) > 2 and d.path[2] in records))


def _drifted(patch: Mapping[str, Any]) -> bool:
    """Whether a two-way patch changes anything but the last-applied record it always adds."""
    meta = dict(patch.get("metadata") or {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k != LAST_APPLIED_ANNOTATION}
    meta = {k: v for k, v in meta.items() if k != "annotations"}
    rest = {k: v for k, v in patch.items() if k != "metadata"}
    return bool(rest or meta or annotations)


def _without_records(live: KubeObject) -> dict[str, Any]:
    meta = dict(meta_of(live))
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k != LAST_APPLIED_ANNOTATION}
    meta["annotations"] = annotations
    return {**live, "metadata": meta}


def _conflicts(
    live: KubeObject, config: Mapping[str, Any], manager: str,
    crd_schema: Mapping[str, Any] | None,
) -> tuple[tuple[str, str], ...]:
    mine = applied_fields(config, crd_schema=crd_schema)
    found: list[tuple[str, str]] = []
    for entry in _entries(live):
        if entry.get("operation") != "Apply" or entry.get("manager") == manager:
            continue
        for path in sorted(mine & fields_from_v1(entry.get("fieldsV1"))):
            if path[-1][:2] in ("k:", "v:"):
                continue
            theirs = field_value(live, path, crd_schema=crd_schema)
            if theirs is not FIELD_MISSING and theirs != field_value(
                    config, path, crd_schema=crd_schema):
                found.append((_dotted(path), str(entry.get("manager"))))
    return tuple(found)


def migration_to_apply(
    live: KubeObject, *, manager: str, crd_schema: Mapping[str, Any] | None = None,
    now: str = "",
) -> list[dict[str, Any]]:
    """The JSON patch that moves ``live`` from the last-applied annotation to server-side apply
    ownership (kubectl's ``csaupgrade.UpgradeManagedFields``): an ``Apply`` entry of
    ``manager`` owning the fields the annotation recorded, those fields taken from every
    ``Update`` entry, the annotation replaced by a digest that matches no configuration (the
    apply that follows writes the real one); preconditioned on the ``resourceVersion``."""
    from objectmatcher import get_last_applied

    recorded = get_last_applied(live) or {}
    fields = applied_fields(apply_configuration(recorded), crd_schema=crd_schema) \
        if recorded else frozenset()
    entries: list[dict[str, Any]] = []
    for entry in _entries(live):
        if _is_mine(entry, manager):
            fields |= fields_from_v1(entry.get("fieldsV1"))
            continue
        if entry.get("operation") == "Update":
            kept = fields_from_v1(entry.get("fieldsV1")) - fields
            if kept:
                entries.append({**entry, "fieldsV1": fields_to_v1(kept)})
            continue
        entries.append(dict(entry))
    api_version = str(live.get("apiVersion"))
    entries.insert(0, {"manager": manager, "operation": "Apply", "apiVersion": api_version,
                       "time": now, "fieldsType": "FieldsV1", "fieldsV1": fields_to_v1(fields)})
    escaped = LAST_APPLIED_ANNOTATION.replace("~", "~0").replace("/", "~1")
    return [
        {"op": "test", "path": "/metadata/resourceVersion",
         "value": str(meta_of(live).get("resourceVersion"))},
        {"op": "replace", "path": "/metadata/managedFields", "value": entries},
        {"op": "remove", "path": f"/metadata/annotations/{escaped}"},
        {"op": "add", "path": f"/metadata/annotations/{_DIGEST_POINTER}", "value": "migrated"},
    ]


def original_from_apply(
    live: KubeObject, *, manager: str, crd_schema: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """``live`` with a last-applied annotation recording what ``manager`` applied (its
    ``Apply`` entry's fields), for the three-way merge after a switch back from server-side
    apply; None when ``live`` has no such entry or already has the annotation."""
    if LAST_APPLIED_ANNOTATION in (meta_of(live).get("annotations") or {}):
        return None
    fields: frozenset[FieldPath] = frozenset()
    for entry in _entries(live):
        if _is_mine(entry, manager):
            fields = fields_from_v1(entry.get("fieldsV1"))
    if not fields:
        return None
    original = extract_fields(live, fields, crd_schema=crd_schema)
    original = remove_fields(original, [("f:metadata", "f:annotations",
                                         f"f:{APPLIED_DIGEST_ANNOTATION}")])
    recorded = set_last_applied(original)["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
    meta = dict(meta_of(live))
    meta["annotations"] = {**(meta.get("annotations") or {}),
                           LAST_APPLIED_ANNOTATION: recorded}
    return {**live, "metadata": meta}
