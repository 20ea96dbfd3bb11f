"""``calculate_patch``: the three-way comparison of live, desired and last-applied objects.

As ``kubectl apply`` does it (DESIGN.md section 3): additions and changes come from ``current``
vs ``desired``; deletions from the recorded ``original`` vs ``desired``; fields only ``current``
has (server defaults, other controllers, status) are left alone. Built-in kinds get a strategic
merge patch whose list semantics come from the Kubernetes schemas; custom resources get a JSON
merge patch (lists atomic, or matched by list-map keys when a CRD schema is given).

The walk visits ``desired`` (the small side) once and stops at the first difference of each
subtree, so the unchanged case allocates nothing but the result. The dictdiffer-based ``diff`` is
only computed for a non-empty patch (the empty patch's diff is empty by definition).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from objectmatcher._annotations import (
    LAST_APPLIED_ANNOTATION,
    ORIGINAL_FOREIGN,
    compact,
    encode_compacted,
    is_secret,
    object_ref,
    read_original,
    validate_object,
    without_annotation,
)
from objectmatcher._diffs import compute_diff
from objectmatcher._inputs import check_same_object, fold_string_data, foreign, prune
from objectmatcher._options import WILDCARD, MatchOption, Trie, ignore_trie
from objectmatcher._options import sub_trie as _sub_trie
from objectmatcher._patches import (
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    deep_copy,
    json_merge,
    strategic_merge,
)
from objectmatcher._quantities import quantities_equal
from objectmatcher._results import PatchResult, footprints
from objectmatcher._schemas import (
    SchemaNode,
    crd_schema_node,
    custom_resource_node,
    kind_schema,
)
from objectmatcher._types import KubeObject
from objectmatcher._types import is_map as _is_map

__all__ = ["PatchResult", "calculate_patch"]

_RESOURCE_MAPS: Final = frozenset({"limits", "requests"})
_QUANTITY_MAP: Final = SchemaNode("map", element=SchemaNode("quantity"))


class _Same:
    """Marker: the subtree needs no patch."""


_SAME: Final = _Same()


@attrs.frozen
class _ListEntries:
    """A list's patch spread over several keys (the list plus its directives)."""

    entries: dict[str, Any]


class _Walk:
    """The settings of one comparison (below one key of the root, for custom resources).

    ``go_typed`` says the server decodes these values into Go structs, whose ``omitempty`` drops
    zero values: built-in kinds, and the ``metadata`` of custom resources (the rest of a custom
    resource is stored as sent). ``roots`` is set on a custom resource's root walk only: the
    walks for its keys (``metadata``, and every other key).
    """

    __slots__ = ("custom", "go_typed", "roots", "strategic")

    def __init__(self, *, strategic: bool, custom: bool, go_typed: bool,
                 roots: tuple[_Walk, _Walk] | None = None) -> None:
        self.strategic = strategic
        self.custom = custom
        self.go_typed = go_typed
        self.roots = roots

    def enter(self, key: str) -> _Walk:
        """The walk below ``key``."""
        roots = self.roots
        if roots is None:
            return self
        return roots[0] if key == "metadata" else roots[1]

    def child(self, node: SchemaNode | None, key: str) -> SchemaNode | None:
        found = node.field(key) if node is not None else None
        if self.custom and key in _RESOURCE_MAPS and (found is None or found.kind in ("map",
                                                                                      "any")):
            return _QUANTITY_MAP
        return found


def _blank_as_absent(value: Any, node: SchemaNode | None) -> bool:
    """Whether desired's ``value`` equals an absent live field.

    ``None``, an empty list or a map of blanks is what a server drops (Go's ``omitempty`` on maps
    and slices). A struct the schema knows (``emptyDir: {}``) is a value: the server keeps it.
    """
    return (node is None or node.kind != "object") and _is_blank(value)


def _is_blank(value: Any) -> bool:
    """``None``, an empty list, or a map holding only blanks: what a server drops."""
    if value is None:
        return True
    if _is_map(value):
        return all(_is_blank(item) for item in value.values())
    if isinstance(value, list):
        return not value
    return False


def _clean(value: Any) -> Any:
    """A desired value as it goes into a patch: ``None`` leaves dropped, copied."""
    if _is_map(value):
        return {key: _clean(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_clean(item) for item in value]
    return value


def _scalar_equal(current: Any, desired: Any, node: SchemaNode | None) -> bool:
    if current is desired:
        return True
    if type(current) is type(desired):
        if current == desired:
            return True
        return node is not None and node.is_quantity and quantities_equal(current, desired)
    if isinstance(current, bool) or isinstance(desired, bool):
        return False
    if isinstance(current, int | float) and isinstance(desired, int | float):
        return current == desired
    return node is not None and node.is_quantity and quantities_equal(current, desired)


def _diff_map(
    current: Mapping[str, Any] | None,
    desired: Mapping[str, Any],
    original: Mapping[str, Any] | None,
    node: SchemaNode | None,
    trie: Trie | None,
    walk: _Walk,
) -> dict[str, Any] | None:
    patch: dict[str, Any] | None = None
    for key, want in desired.items():
        if want is None:
            continue
        sub_trie = _sub_trie(trie, key)
        if sub_trie is True:
            continue
        have = current.get(key) if current is not None else None
        was = original.get(key) if original is not None else None
        change = _diff_value(have, want, was, walk.child(node, key), sub_trie or None,
                             walk.enter(key), key)
        if change is _SAME:
            continue
        if patch is None:
            patch = {}
        if isinstance(change, _ListEntries):
            patch.update(change.entries)
        else:
            patch[key] = change
    if original is not None and current is not None:
        for key, was in original.items():
            if was is None or desired.get(key) is not None or current.get(key) is None:
                continue
            sub_trie = _sub_trie(trie, key)
            if sub_trie is True:
                continue
            deletion = _deletion(current[key], was, walk.child(node, key), sub_trie or None,
                                 walk.enter(key), key)
            if deletion:
                patch = {**patch, **deletion} if patch is not None else deletion
    if patch and walk.strategic and node is not None and node.retains_keys:
        patch["$retainKeys"] = sorted(key for key, value in desired.items() if value is not None)
    return patch


def _deletion(
    have: Any, was: Any, node: SchemaNode | None, trie: Trie | None, walk: _Walk, key: str
) -> dict[str, Any]:
    """The patch entries deleting field ``key``, which desired dropped: only what we set goes."""
    if walk.strategic and node is not None and node.merges_items:
        # Our items of a merged list go; others' items stay.
        change = _diff_merged_list(have, [], was, node, trie, walk, key)
        return change.entries if isinstance(change, _ListEntries) else {}
    if node is not None and node.kind == "map" and _is_map(was) and _is_map(have):
        # Our keys of a map (labels, annotations, data) go; others' keys stay.
        sub = _diff_map(have, {}, was, node, trie, walk)
        if sub:
            return {key: sub}
        return {} if have else {key: None}
    # Anything else goes whole, as kubectl deletes it: a struct emptied key by key would stay
    # behind as ``{}`` (and a one-of such as a volume source would then have two members).
    return {key: None}


def _diff_value(
    have: Any,
    want: Any,
    was: Any,
    node: SchemaNode | None,
    trie: Trie | None,
    walk: _Walk,
    key: str,
) -> Any:
    if _is_map(want):
        if _is_map(have):
            sub = _diff_map(have, want, was if _is_map(was) else None, node, trie, walk)
            return sub if sub else _SAME
        if have is None and _blank_as_absent(want, node):
            return _SAME
        return _clean(want)
    if isinstance(want, list):
        if have is None and not want:
            return _SAME
        if walk.strategic and node is not None and node.merges_items:
            return _diff_merged_list(have, want, was, node, trie, walk, key)
        if _agrees(have, want, was, node, trie, walk):
            return _SAME
        return _clean(want)
    if _scalar_equal(have, want, node) or _omitted_zero(have, want, was, walk):
        return _SAME
    return want


_ZERO_TYPES: Final = (str, bool, int, float)


def _omitted_zero(have: Any, want: Any, was: Any, walk: _Walk) -> bool:
    """Whether desired's zero scalar ``want`` (``""``, ``false``, ``0``) against an absent live
    field is Go's ``omitempty`` at work, not a difference.

    Only where the server decodes into Go structs (``walk.go_typed``), and only when the original
    records the same zero value: we wrote it and it is not there, so the server dropped it. Without
    that record the field is written (once: the write records it): a pointer field such as
    ``allowPrivilegeEscalation: false`` is kept by the server and means something else than absent,
    and the schemas do not say which fields are pointers.
    """
    return (have is None and walk.go_typed and type(want) in _ZERO_TYPES and not want
            and type(was) is type(want) and was == want)


def _keyed(items: Any, key: str) -> dict[Any, Any]:
    if not isinstance(items, list):
        return {}
    return {_json_key(item[key]): item for item in items if _is_map(item) and key in item}


def _diff_merged_list(
    have: Any,
    want: list[Any],
    was: Any,
    node: SchemaNode,
    trie: Trie | None,
    walk: _Walk,
    key: str,
) -> Any:
    merge_key = node.merge_key
    if merge_key is None:  # a primitive list merged as a set (finalizers, ...)
        present = have if isinstance(have, list) else []
        added = [item for item in want if item not in present]
        removed = [item for item in (was if isinstance(was, list) else [])
                   if item not in want and item in present]
        entries: dict[str, Any] = {}
        if added:
            entries[key] = added
        if removed:
            entries[f"$deleteFromPrimitiveList/{key}"] = removed
        return _ListEntries(entries) if entries else _SAME
    if not all(_is_map(item) and item.get(merge_key) is not None for item in want):
        if _agrees(have, want, was, node, trie, walk):
            return _SAME
        return [{"$patch": "replace"}, *_clean(want)]
    current, original = _keyed(have, merge_key), _keyed(was, merge_key)
    item_trie = _sub_trie(trie, WILDCARD)
    if item_trie is True:
        return _SAME
    patch_items: list[Any] = []
    for item in want:
        name = _json_key(item[merge_key])
        live = current.get(name)
        if live is None:
            patch_items.append(_clean(item))
            continue
        sub = _diff_map(live, item, original.get(name), node.element, item_trie or None, walk)
        if sub:
            if node.retains_keys:
                sub["$retainKeys"] = sorted(k for k, v in item.items() if v is not None)
            patch_items.append({merge_key: item[merge_key], **sub})
    wanted = {_json_key(item[merge_key]) for item in want}
    for name, old in original.items():
        if name not in wanted and name in current:
            patch_items.append({merge_key: old[merge_key], "$patch": "delete"})
    if not patch_items:
        return _SAME
    return _ListEntries({
        f"$setElementOrder/{key}": [{merge_key: item[merge_key]} for item in want],
        key: patch_items,
    })


def _agrees(
    have: Any,
    want: Any,
    was: Any,
    node: SchemaNode | None,
    trie: Trie | None,
    walk: _Walk,
) -> bool:
    """Whether an atomic value needs no write: ``have`` matches ``want`` on every field ``want``
    sets, and every other field of ``have`` is one the original did not set (a server default)."""
    if want is None:
        return True
    if _is_map(want):
        if not _is_map(have):
            return have is None and _blank_as_absent(want, node)
        for key, value in want.items():
            sub_trie = _sub_trie(trie, key)
            if value is None or sub_trie is True:
                continue
            sub_was = was.get(key) if _is_map(was) else None
            if not _agrees(have.get(key), value, sub_was, walk.child(node, key),
                           sub_trie or None, walk.enter(key)):
                return False
        if _is_map(was):
            for key, value in have.items():
                if (value is not None and want.get(key) is None and was.get(key) is not None
                        and _sub_trie(trie, key) is not True):
                    return False
        return True
    if isinstance(want, list):
        if have is None:
            return not want
        if not isinstance(have, list) or len(have) != len(want):
            return False
        element = node.element if node is not None else None
        item_trie = _sub_trie(trie, WILDCARD)
        if item_trie is True:
            return True
        pairs = _pair_items(have, want, was, node)
        if pairs is None:
            return False
        return all(_agrees(live, item, old, element, item_trie or None, walk)
                   for live, item, old in pairs)
    return _scalar_equal(have, want, node) or _omitted_zero(have, want, was, walk)


def _pair_items(
    have: list[Any], want: list[Any], was: Any, node: SchemaNode | None
) -> list[tuple[Any, Any, Any]] | None:
    """Items of an atomic list matched by list-map keys (when declared) or by position."""
    keys = node.list_map_keys if node is not None else ()
    old_list = was if isinstance(was, list) else []
    if keys and all(_is_map(item) for item in (*have, *want, *old_list)):
        def ident(item: Mapping[str, Any]) -> tuple[Any, ...]:
            return tuple(_json_key(item.get(key)) for key in keys)

        live = {ident(item): item for item in have}
        old = {ident(item): item for item in old_list}
        pairs = []
        for item in want:
            match = live.get(ident(item))
            if match is None:
                return None
            pairs.append((match, item, old.get(ident(item))))
        return pairs
    if len(old_list) != len(want):
        old_list = []
    return [(live, item, old_list[i] if old_list else None)
            for i, (live, item) in enumerate(zip(have, want, strict=True))]


def _json_key(value: Any) -> Any:
    """A hashable stand-in for a JSON value used as a list-map key."""
    return value if isinstance(value, str | int | float | bool) or value is None else repr(value)


def calculate_patch(
    current: KubeObject,
    desired: KubeObject,
    *options: MatchOption,
    crd_schema: Mapping[str, Any] | None = None,
    kubernetes_version: str | None = None,
) -> PatchResult:
    """The patch that takes the live object ``current`` to ``desired``, three-way.

    ``current`` carries the last-applied annotation (the original); ``desired`` is as built and
    needs none. ``options`` (``ignore_field(...)``, ...) add to the defaults (status and
    server-managed metadata are always ignored). ``crd_schema`` is a custom resource's
    ``openAPIV3Schema`` (its list-map keys are honoured); ``kubernetes_version`` picks the
    schemas for built-in kinds. Raises :class:`InvalidObjectError` for a non-object, a missing
    ``apiVersion``/``kind``/``metadata.name``, or current and desired of different kinds or names.
    A corrupt or foreign annotation never raises: the result says so in ``fallback_reason``.
    """
    validate_object(current, role="current")
    validate_object(desired, role="desired")
    check_same_object(current, desired)
    kind = desired["kind"]
    node = kind_schema(desired["apiVersion"], kind, kubernetes_version)
    if node is not None:
        walk = _Walk(strategic=True, custom=False, go_typed=True)
    else:
        walk = _Walk(strategic=False, custom=True, go_typed=False, roots=(
            _Walk(strategic=False, custom=True, go_typed=True),
            _Walk(strategic=False, custom=True, go_typed=False)))
        crd_node = crd_schema_node(crd_schema) if crd_schema is not None else None
        node = custom_resource_node(crd_node, kubernetes_version)
    trie = ignore_trie(options, kind)
    desired = prune(without_annotation(desired), trie)
    original, reason, status = read_original(current)
    if original is not None:
        reason = foreign(original, desired)
        if reason is not None:
            original, status = None, ORIGINAL_FOREIGN
    secret = is_secret(desired)
    wanted = fold_string_data(desired) if secret else desired
    recorded = fold_string_data(original) if secret and original is not None else original
    patch = _diff_map(current, wanted, recorded, node, trie, walk) or {}
    # The record is fresh when it says what desired says, up to the fields we ignore (a record
    # written by ``set_last_applied`` may hold status or fields an option hands to others).
    if original is not None:
        original = prune(original, trie)
    # A readable record is refreshed only along with a field change: a record that is merely
    # stale (it lists a field desired dropped and someone else already removed) is no write.
    stale = original is None or (patch and original != desired)
    record = compact(desired) if stale else None
    if record is not None and original != record:
        meta = patch.setdefault("metadata", {})
        if not isinstance(meta.get("annotations"), dict):
            meta["annotations"] = {}
        meta["annotations"][LAST_APPLIED_ANNOTATION] = encode_compacted(record)
    patch_type = STRATEGIC_MERGE_PATCH if walk.strategic else MERGE_PATCH
    ref = object_ref(desired)
    if not patch:
        return PatchResult(patch={}, patch_type=patch_type, fallback_reason=reason,
                           object_ref=ref, original_status=status)
    patch = deep_copy(patch)
    after = (strategic_merge(current, patch, node, share=True) if walk.strategic
             else json_merge(current, patch))
    return PatchResult(patch=patch, patch_type=patch_type,
                       diff=compute_diff(*footprints(current, after, patch), secret=secret),
                       fallback_reason=reason, object_ref=ref, original_status=status)
