"""Field sets of server-side apply: which fields an object sets, in ``FieldsV1`` paths.

Server-side apply records, per manager, the set of fields it owns (``metadata.managedFields``,
``fieldsType: FieldsV1``). A field is a path of elements written as the API server writes them:
``f:<name>`` a field of an object or map, ``k:{"name":"web"}`` an item of a list-map list (keys
sorted, compact JSON), ``v:<json>`` an item of a set, ``i:<n>`` an item of a list without keys.
A list item that is itself a map is a member of the set as well as its fields (``"."`` in
``FieldsV1``). Lists and maps are typed from the same schemas the three-way matcher reads
(``_schemas``): ``x-kubernetes-list-type`` and ``x-kubernetes-list-map-keys`` when declared,
else the patch merge key (a list-map keyed by it) or the ``merge`` strategy (a set); anything
else, and objects declared ``x-kubernetes-map-type: atomic``, is one atomic value.

Both sides of the toolkit need exactly this and nothing of each other: the embedded API server
(ownership, conflicts, merging an apply configuration, removing fields a manager stops applying)
and the reconciler's server-side apply strategy (what it owns, the migration from the
last-applied annotation and back). The boundary: pure functions over JSON-shaped dicts; who owns
what, conflicts and requests are the callers' business.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from objectmatcher._schemas import (
    SchemaNode,
    crd_schema_node,
    custom_resource_node,
    kind_schema,
)

__all__ = [
    "FIELD_MISSING",
    "FieldPath",
    "applied_fields",
    "changed_fields",
    "extract_fields",
    "field_value",
    "fields_from_v1",
    "fields_to_v1",
    "merge_applied",
    "remove_fields",
    "schema_of",
]

FieldPath = tuple[str, ...]
"""One field: its ``FieldsV1`` path elements (``("f:spec", "f:replicas")``)."""

FIELD_MISSING: Final = object()
"""What :func:`field_value` answers for a field the object does not have."""
_IDENTITY_META: Final = frozenset({
    "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink",
})
# list-map keys the API server defaults when an item leaves them out (the key is then known)
_KEY_DEFAULTS: Final = {"protocol": "TCP"}


def schema_of(
    obj: Mapping[str, Any], *, crd_schema: Mapping[str, Any] | None = None
) -> SchemaNode:
    """The schema node of ``obj``'s kind (a built-in kind's, else its CRD's, else metadata)."""
    node = kind_schema(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if node is not None:
        return node
    crd_node = crd_schema_node(crd_schema) if crd_schema is not None else None
    return custom_resource_node(crd_node)


def _child(node: SchemaNode | None, name: str) -> SchemaNode | None:
    return node.field(name) if node is not None else None


def _list_shape(node: SchemaNode | None) -> tuple[str, tuple[str, ...]]:
    """``("map", keys)``, ``("set", ())`` or ``("atomic", ())``."""
    if node is None or node.kind != "list":
        return "atomic", ()
    declared = node.list_type
    if declared == "map" and node.list_map_keys:
        return "map", node.list_map_keys
    if declared == "set":
        return "set", ()
    if declared == "atomic":
        return "atomic", ()
    if node.list_map_keys:
        return "map", node.list_map_keys
    if node.merge_key:
        return "map", (node.merge_key,)
    if "merge" in node.strategies:
        return "set", ()
    return "atomic", ()


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _item_key(item: Any, shape: str, keys: tuple[str, ...]) -> str | None:
    if shape == "set":
        return "v:" + _compact(item) if not isinstance(item, (Mapping, list)) else None
    if not isinstance(item, Mapping):
        return None
    values = {}
    for key in keys:
        value = item.get(key, _KEY_DEFAULTS.get(key, FIELD_MISSING))
        if value is FIELD_MISSING:
            return None
        values[key] = value
    return "k:" + _compact(values)


def _is_walked_map(value: Any, node: SchemaNode | None) -> bool:
    return isinstance(value, Mapping) and bool(value) and not (node is not None and node.atomic)


def applied_fields(
    config: Mapping[str, Any], *, crd_schema: Mapping[str, Any] | None = None
) -> frozenset[FieldPath]:
    """The fields an apply configuration sets: its leaves, and its keyed list items.

    ``apiVersion``, ``kind`` and identity metadata (name, namespace, uid, ...) are not fields;
    ``None`` values set nothing.
    """
    found: set[FieldPath] = set()
    root = schema_of(config, crd_schema=crd_schema)
    for key, value in config.items():
        if key in ("apiVersion", "kind") or value is None:
            continue
        node = _child(root, str(key))
        if key == "metadata" and isinstance(value, Mapping):
            value = {k: v for k, v in value.items() if k not in _IDENTITY_META}
            if not value:
                continue
        _walk(value, node, (f"f:{key}",), found, member=False)
    return frozenset(found)


def _walk(value: Any, node: SchemaNode | None, prefix: FieldPath, out: set[FieldPath], *,
          member: bool) -> None:
    if _is_walked_map(value, node):
        if member:
            out.add(prefix)
        for key, child in value.items():
            if child is not None:
                _walk(child, _child(node, str(key)), (*prefix, f"f:{key}"), out, member=False)
        return
    shape, keys = _list_shape(node)
    if isinstance(value, list) and value and shape != "atomic":
        items = [_item_key(item, shape, keys) for item in value]
        if None not in items:
            element = node.element if node is not None else None
            for item, key in zip(value, items, strict=True):
                _walk(item, element, (*prefix, str(key)), out, member=True)
            return
    out.add(prefix)


def _step(value: Any, element: str, node: SchemaNode | None) -> tuple[Any, SchemaNode | None]:
    kind, _, rest = element.partition(":")
    if kind == "f":
        if isinstance(value, Mapping) and rest in value:
            return value[rest], _child(node, rest)
        return FIELD_MISSING, None
    if not isinstance(value, list):
        return FIELD_MISSING, None
    shape, keys = _list_shape(node)
    element_node = node.element if node is not None else None
    if kind == "i":
        index = int(rest)
        return (value[index] if 0 <= index < len(value) else FIELD_MISSING), element_node
    for item in value:
        if _item_key(item, shape, keys) == element:
            return item, element_node
    return FIELD_MISSING, None


def field_value(
    obj: Mapping[str, Any], path: FieldPath, *, crd_schema: Mapping[str, Any] | None = None
) -> Any:
    """The value at ``path`` in ``obj``, or ``FIELD_MISSING`` (this module's sentinel)."""
    value: Any = obj
    node: SchemaNode | None = schema_of(obj, crd_schema=crd_schema)
    for element in path:
        value, node = _step(value, element, node)
        if value is FIELD_MISSING:
            return FIELD_MISSING
    return value


def changed_fields(
    old: Mapping[str, Any] | None, new: Mapping[str, Any], *,
    crd_schema: Mapping[str, Any] | None = None,
) -> frozenset[FieldPath]:
    """The fields of ``new`` an update added or changed against ``old`` (None: a create).

    Status and identity metadata are left out (status has its own subresource).
    """
    body = {k: v for k, v in new.items() if k != "status"}
    fields = applied_fields(body, crd_schema=crd_schema)
    added: set[FieldPath] = set()
    _added_maps(old, body, schema_of(new, crd_schema=crd_schema), (), added)
    fields |= added
    if old is None:
        return fields
    return frozenset(
        path for path in fields
        if field_value(old, path, crd_schema=crd_schema)
        != field_value(new, path, crd_schema=crd_schema)
        or (_is_item(path)
        and field_value(old, path, crd_schema=crd_schema) is FIELD_MISSING)
    )


def _added_maps(old: Any, new: Any, node: SchemaNode | None, prefix: FieldPath,
                out: set[FieldPath]) -> None:
    """Maps with free keys (labels, data) an update created: a member themselves, as the
    server records them (``"."``)."""
    if isinstance(new, list) and node is not None and node.kind == "list":
        shape, keys = _list_shape(node)
        for item in new:
            key = _item_key(item, shape, keys)
            if key is not None:
                before, _ = _step(old, key, node) if old is not FIELD_MISSING else (old, None)
                _added_maps(before, item, node.element, (*prefix, key), out)
        return
    if not isinstance(new, Mapping) or (node is not None and node.atomic):
        return
    for key, value in new.items():
        child = _child(node, str(key))
        if isinstance(value, list) and value:
            before = old.get(key, FIELD_MISSING) if isinstance(old, Mapping) else FIELD_MISSING
            if child is not None and child.list_type in ("map", "set") \
                    and before is FIELD_MISSING:
                out.add((*prefix, f"f:{key}"))
            _added_maps(before, value, child, (*prefix, f"f:{key}"), out)
            continue
        if not isinstance(value, Mapping) or not value:
            continue
        if not prefix and key == "metadata":
            value = {k: v for k, v in value.items() if k not in _IDENTITY_META}
        before = old.get(key, FIELD_MISSING) if isinstance(old, Mapping) else FIELD_MISSING
        path = (*prefix, f"f:{key}")
        if child is not None and child.kind == "map" and before is FIELD_MISSING:
            out.add(path)
        _added_maps(before, value, child, path, out)


def _is_item(path: FieldPath) -> bool:
    return bool(path) and path[-1][:2] in ("k:", "v:", "i:")


def merge_applied(
    live: Mapping[str, Any], config: Mapping[str, Any], *,
    crd_schema: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``live`` with the apply configuration merged in: maps field by field, list-maps item by
    item (by their keys), sets by value, everything else replaced. Returns a new dict."""
    merged = _merge(live, config, schema_of(config, crd_schema=crd_schema))
    return dict(merged)


def _merge(live: Any, config: Any, node: SchemaNode | None) -> Any:
    if isinstance(live, Mapping) and isinstance(config, Mapping) and not (
        node is not None and node.atomic
    ):
        out = dict(copy.deepcopy(dict(live)))
        for key, value in config.items():
            if value is None:
                continue
            child = _child(node, str(key))
            out[key] = _merge(live[key], value, child) if key in live else copy.deepcopy(value)
        return out
    shape, keys = _list_shape(node)
    if isinstance(live, list) and isinstance(config, list) and shape != "atomic":
        live_keys = [_item_key(item, shape, keys) for item in live]
        config_keys = [_item_key(item, shape, keys) for item in config]
        if None not in live_keys and None not in config_keys:
            element = node.element if node is not None else None
            out_list = copy.deepcopy(live)
            for item, key in zip(config, config_keys, strict=True):
                if key in live_keys:
                    index = live_keys.index(key)
                    out_list[index] = _merge(live[index], item, element)
                else:
                    out_list.append(copy.deepcopy(item))
            return out_list
    return copy.deepcopy(config)


def remove_fields(
    obj: Mapping[str, Any], paths: Iterable[FieldPath], *,
    crd_schema: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A copy of ``obj`` without ``paths`` (a list item path removes the item); maps and lists
    the removal leaves empty are removed as well."""
    out = copy.deepcopy(dict(obj))
    root = schema_of(obj, crd_schema=crd_schema)
    for path in sorted(paths, key=len):  # an item first: its key fields find it
        _remove(out, path, root)
    return out


def _remove(container: Any, path: FieldPath, node: SchemaNode | None) -> bool:
    """Remove ``path`` under ``container``; True when ``container`` is left empty."""
    element = path[0]
    kind, _, rest = element.partition(":")
    if kind == "f":
        if not isinstance(container, dict) or rest not in container:
            return False
        if len(path) == 1 or _remove(container[rest], path[1:], _child(node, rest)):
            del container[rest]
        return not container
    if not isinstance(container, list):
        return False
    shape, keys = _list_shape(node)
    for index, item in enumerate(container):
        key = f"i:{index}" if kind == "i" else _item_key(item, shape, keys)
        if key != element:
            continue
        element_node = node.element if node is not None else None
        if len(path) == 1 or _remove(item, path[1:], element_node):
            del container[index]
        break
    return not container


def extract_fields(
    obj: Mapping[str, Any], paths: Iterable[FieldPath], *,
    crd_schema: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The part of ``obj`` at ``paths`` (with ``apiVersion``, ``kind``, name and namespace):
    what a manager that owns ``paths`` applied, as kubectl's ``ExtractInto`` reads it."""
    meta = obj.get("metadata") or {}
    out: dict[str, Any] = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                           "metadata": {k: meta[k] for k in ("name", "namespace") if k in meta}}
    root = schema_of(obj, crd_schema=crd_schema)
    for path in sorted(paths):
        _copy_path(obj, out, path, root)
    return out


def _copy_path(source: Any, target: Any, path: FieldPath, node: SchemaNode | None) -> None:
    element = path[0]
    value, child = _step(source, element, node)
    if value is FIELD_MISSING:
        return
    kind, _, rest = element.partition(":")
    last = len(path) == 1
    if kind == "f":
        if not isinstance(target, dict):
            return
        if last:
            target[rest] = copy.deepcopy(value)
            return
        holder = target.setdefault(rest, [] if isinstance(value, list) else {})
        _copy_path(value, holder, path[1:], child)
        return
    if not isinstance(target, list):
        return
    shape, keys = _list_shape(node)
    if last or not isinstance(value, Mapping):
        if value not in target:
            target.append(copy.deepcopy(value))
        return
    existing = next((item for item in target
                     if _item_key(item, shape, keys) == element), None)
    if existing is None:
        existing = {key: copy.deepcopy(value[key]) for key in keys if key in value}
        target.append(existing)
    _copy_path(value, existing, path[1:], child)


def fields_to_v1(paths: Iterable[FieldPath]) -> dict[str, Any]:
    """``FieldsV1`` of a field set (a path that has children as well is marked ``"."``)."""
    tree: dict[str, Any] = {}
    members = set(paths)
    for path in sorted(members):
        node = tree
        for element in path:
            node = node.setdefault(element, {})
    for path in members:
        node = tree
        for element in path:
            node = node[element]
        if node and "." not in node:
            node["."] = {}
    return tree


def fields_from_v1(tree: Any, prefix: FieldPath = ()) -> frozenset[FieldPath]:
    """The field set a ``FieldsV1`` tree records."""
    found: set[FieldPath] = set()
    if not isinstance(tree, Mapping):
        return frozenset(found)
    for key, child in tree.items():
        if key == ".":
            found.add(prefix)
            continue
        path = (*prefix, str(key))
        if isinstance(child, Mapping) and child:
            found |= fields_from_v1(child, path)
        else:
            found.add(path)
    return frozenset(found)
