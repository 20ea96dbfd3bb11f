"""Patch appliers: strategic merge, JSON merge (RFC 7386) and JSON patch (RFC 6902).

``calculate_patch`` is proved by applying its patch to the live object, and the embedded API
server applies the patches clients send; both use :func:`apply_patch`. Strategic merge follows
``k8s.io/apimachinery/pkg/util/strategicpatch``: lists with a patch merge key merge item by item,
primitive lists with the ``merge`` strategy merge as sets, other lists are replaced, and the
directives ``$patch`` (``delete``/``replace``/``merge``), ``$retainKeys``,
``$deleteFromPrimitiveList/<field>`` and ``$setElementOrder/<field>`` are honoured. JSON patch is
delegated to ``jsonpatch``; its errors are mapped to :class:`PatchError` here and nowhere else.

The boundary: appliers never mutate their inputs and never look at the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import jsonpatch

from objectmatcher._errors import PatchError, UnsupportedPatchError
from objectmatcher._schemas import SchemaNode, kind_schema
from objectmatcher._types import KubeObject

__all__ = [
    "JSON_PATCH",
    "MERGE_PATCH",
    "PATCH_TYPES",
    "STRATEGIC_MERGE_PATCH",
    "apply_patch",
    "deep_copy",
    "strategic_merge",
]

#: Media type of a strategic merge patch (built-in kinds only).
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
#: Media type of a JSON merge patch (RFC 7386).
MERGE_PATCH: Final = "application/merge-patch+json"
#: Media type of a JSON patch (RFC 6902).
JSON_PATCH: Final = "application/json-patch+json"
#: Every patch type :func:`apply_patch` accepts.
PATCH_TYPES: Final = (STRATEGIC_MERGE_PATCH, MERGE_PATCH, JSON_PATCH)

_DELETE_FROM: Final = "$deleteFromPrimitiveList/"
_SET_ORDER: Final = "$setElementOrder/"


def deep_copy(value: Any) -> Any:
    """A copy of a JSON-shaped value sharing no dict or list with it (faster than deepcopy)."""
    if isinstance(value, Mapping):
        return {key: deep_copy(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [deep_copy(item) for item in value]
    return value


def _ref(obj: Any) -> str:
    if not isinstance(obj, Mapping):
        return ""
    meta = obj.get("metadata")
    name = meta.get("name", "") if isinstance(meta, Mapping) else ""
    return f"{obj.get('kind', '')} {name}".strip()


def apply_patch(
    obj: KubeObject,
    patch: Any,
    *,
    patch_type: str,
    kubernetes_version: str | None = None,
) -> dict[str, Any]:
    """``obj`` with ``patch`` applied, as a new dict (``obj`` and ``patch`` are untouched).

    ``patch_type`` is one of :data:`STRATEGIC_MERGE_PATCH` (built-in kinds; list semantics from
    the schemas of ``kubernetes_version``, default :data:`DEFAULT_KUBERNETES_VERSION`),
    :data:`MERGE_PATCH` or :data:`JSON_PATCH`. Raises :class:`PatchError` (a ``ValueError``) with
    the reason when the patch cannot apply (a failed ``test``, a missing path, a malformed patch),
    and :class:`UnsupportedPatchError` for an unknown patch type or a strategic merge patch of a
    kind without a built-in schema (a custom resource), where a server answers 415.
    """
    if patch_type == MERGE_PATCH:
        if not isinstance(patch, Mapping):
            raise PatchError("a merge patch must be a JSON object", patch_type=patch_type,
                             object_ref=_ref(obj))
        return _as_object(json_merge(obj, patch), patch_type, obj)
    if patch_type == JSON_PATCH:
        return _as_object(_json_patch(obj, patch), patch_type, obj)
    if patch_type == STRATEGIC_MERGE_PATCH:
        node = kind_schema(str(obj.get("apiVersion", "")), str(obj.get("kind", "")),
                           kubernetes_version)
        if node is None:
            raise UnsupportedPatchError(
                f"{obj.get('kind')!s}.{obj.get('apiVersion')!s} has no built-in schema; "
                "strategic merge patch is not supported for custom resources",
                patch_type=patch_type,
                object_ref=_ref(obj),
            )
        return strategic_merge(obj, patch, node)
    raise UnsupportedPatchError(
        f"unknown patch type {patch_type!r}; expected one of {', '.join(PATCH_TYPES)}",
        patch_type=patch_type,
        object_ref=_ref(obj),
    )


def _as_object(result: Any, patch_type: str, obj: KubeObject) -> dict[str, Any]:
    if not isinstance(result, dict):
        raise PatchError("the patched document is not a JSON object", patch_type=patch_type,
                         object_ref=_ref(obj))
    return result


def json_merge(target: Any, patch: Any) -> Any:
    """RFC 7386: ``patch`` merged into ``target`` (``null`` deletes, lists are replaced)."""
    if not isinstance(patch, Mapping):
        return deep_copy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge(result.get(key), value)
    return {key: deep_copy(value) for key, value in result.items()}


def _json_patch(obj: KubeObject, patch: Any) -> Any:
    if not isinstance(patch, Sequence) or isinstance(patch, str | bytes):
        raise PatchError("a JSON patch must be a list of operations", patch_type=JSON_PATCH,
                         object_ref=_ref(obj))
    try:
        # Copies of both: jsonpatch inserts the operations' values by reference.
        return jsonpatch.JsonPatch(deep_copy(patch)).apply(deep_copy(obj), in_place=True)
    except jsonpatch.JsonPatchTestFailed as error:
        raise PatchError(f"test operation failed: {error}", patch_type=JSON_PATCH,
                         object_ref=_ref(obj)) from error
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
        raise PatchError(str(error), patch_type=JSON_PATCH, object_ref=_ref(obj)) from error
    except (KeyError, IndexError, TypeError, AttributeError) as error:
        raise PatchError(f"malformed operation: {error!r}", patch_type=JSON_PATCH,
                         object_ref=_ref(obj)) from error


def strategic_merge(
    obj: KubeObject, patch: Any, node: SchemaNode | None, *, share: bool = False
) -> dict[str, Any]:
    """``patch`` applied to ``obj`` as a strategic merge patch, guided by the schema ``node``.

    The low-level applier behind :func:`apply_patch`, for callers that already hold a node.
    With ``share`` the result shares unpatched subtrees with ``obj`` (for read-only use).
    """
    if not isinstance(patch, Mapping):
        raise PatchError("a strategic merge patch must be a JSON object",
                         patch_type=STRATEGIC_MERGE_PATCH, object_ref=_ref(obj))
    try:
        result = _merge_map(obj, patch, node)
    except _DirectiveError as error:
        raise PatchError(str(error), patch_type=STRATEGIC_MERGE_PATCH,
                         object_ref=_ref(obj)) from None
    if result is None:
        return {}
    return result if share else deep_copy(result)


class _DirectiveError(Exception):
    pass


def _strip(value: Any) -> Any:
    """A patch value as it lands in the object: directives and ``null`` removed."""
    if isinstance(value, Mapping):
        if value.get("$patch") == "delete":
            return None
        return {
            key: _strip(item)
            for key, item in value.items()
            if not key.startswith("$") and item is not None
        }
    if isinstance(value, list):
        return [_strip(item) for item in value if not _is_list_directive(item)]
    return value


def _is_list_directive(item: Any) -> bool:
    """A list item that is a directive, not an item: ``{"$patch": "replace"}`` or a delete."""
    if not isinstance(item, Mapping):
        return False
    directive = item.get("$patch")
    return directive == "delete" or (directive == "replace" and set(item) == {"$patch"})


def _merge_map(
    original: Any, patch: Mapping[str, Any], node: SchemaNode | None
) -> dict[str, Any] | None:
    directive = patch.get("$patch")
    if directive is not None:
        if directive == "delete":
            return None
        if directive == "replace":
            return {k: v for k, v in _strip({**patch, "$patch": None}).items()}
        if directive != "merge":
            raise _DirectiveError(f"unknown $patch directive {directive!r}")
    result: dict[str, Any] = dict(original) if isinstance(original, Mapping) else {}
    retain = patch.get("$retainKeys")
    if retain is not None:
        if not isinstance(retain, list):
            raise _DirectiveError("$retainKeys must be a list of field names")
        keep = set(retain)
        result = {key: value for key, value in result.items() if key in keep}
    orders: list[tuple[str, Any]] = []
    for key, value in patch.items():
        if key.startswith("$"):
            if key.startswith(_DELETE_FROM):
                field = key[len(_DELETE_FROM):]
                if not isinstance(value, list):
                    raise _DirectiveError(f"{key} must be a list")
                current = result.get(field)
                if isinstance(current, list):
                    result[field] = [item for item in current if item not in value]
            elif key.startswith(_SET_ORDER):
                orders.append((key[len(_SET_ORDER):], value))
            elif key not in ("$patch", "$retainKeys"):
                raise _DirectiveError(f"unknown directive {key!r}")
            continue
        child = node.field(key) if node is not None else None
        if value is None:
            result.pop(key, None)
        elif isinstance(value, Mapping):
            merged = _merge_map(result.get(key), value, child)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, child)
        else:
            result[key] = value
    for field, order in orders:
        if isinstance(result.get(field), list) and isinstance(order, list):
            child = node.field(field) if node is not None else None
            before = original.get(field) if isinstance(original, Mapping) else None
            result[field] = _reorder(result[field], order, child, before)
    return result


def _merge_list(original: Any, patch: list[Any], node: SchemaNode | None) -> list[Any]:
    if node is None or not node.merges_items:
        return [_strip(item) for item in patch]
    current = list(original) if isinstance(original, list) else []
    if any(_is_list_directive(item) and item.get("$patch") == "replace" for item in patch):
        return _strip(patch)  # type: ignore[no-any-return]
    key = node.merge_key
    if key is None:  # a primitive list merged as a set
        for item in patch:
            if item not in current:
                current.append(item)
        return current
    for item in patch:
        if not isinstance(item, Mapping):
            raise _DirectiveError(f"list merged by {key!r} has a non-object item {item!r}")
        if key not in item:
            raise _DirectiveError(f"list item without its merge key {key!r}: {item!r}")
        position = next(
            (i for i, old in enumerate(current)
             if isinstance(old, Mapping) and old.get(key) == item[key]),
            None,
        )
        if item.get("$patch") == "delete":
            current = [old for old in current
                       if not (isinstance(old, Mapping) and old.get(key) == item[key])]
            continue
        if position is None:
            merged = _merge_map(None, item, node.element)
            if merged is not None:
                current.append(merged)
        else:
            merged = _merge_map(current[position], item, node.element)
            if merged is None:
                del current[position]
            else:
                current[position] = merged
    return current


def _reorder(
    items: list[Any], order: list[Any], node: SchemaNode | None, server: Any
) -> list[Any]:
    """``items`` in the order ``$setElementOrder`` asks, as the API server orders them.

    Items named in ``order`` follow it; the others (only the server had them) keep their relative
    order and their places in front of the named items they preceded in ``server`` (the list
    before the patch), as ``normalizeElementOrder`` of ``strategicpatch`` does.
    """
    key = node.merge_key if node is not None else None

    def identity(item: Any) -> Any:
        found = item.get(key) if key is not None and isinstance(item, Mapping) else item
        return found if _hashable(found) else repr(found)

    ranked: dict[Any, int] = {}
    for rank, entry in enumerate(order):
        ranked.setdefault(identity(entry), rank)
    named = sorted((item for item in items if identity(item) in ranked),
                   key=lambda item: ranked[identity(item)])
    server_only = [item for item in items if identity(item) not in ranked]
    position: dict[Any, int] = {}
    for index, item in enumerate(server if isinstance(server, list) else ()):
        position.setdefault(identity(item), index)
    merged: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(named):
        if j >= len(named):
            merged.append(server_only[i])
            i += 1
            continue
        if i < len(server_only):
            left = position.get(identity(server_only[i]))
            right = position.get(identity(named[j]))
            if left is not None and right is not None and left < right:
                merged.append(server_only[i])
                i += 1
                continue
        merged.append(named[j])
        j += 1
    return merged


def _hashable(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) or value is None
