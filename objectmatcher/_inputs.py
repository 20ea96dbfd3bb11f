"""The inputs of a comparison made ready: checked, pruned of ignored fields, as the server holds
them (a Secret's ``stringData`` folded into ``data``), and the record checked to be of this object.

Pure helpers of ``calculate_patch``; no comparison happens here.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, Final

from objectmatcher._annotations import object_ref
from objectmatcher._errors import InvalidObjectError
from objectmatcher._options import WILDCARD, Trie, sub_trie
from objectmatcher._types import KubeObject, is_map

__all__ = ["check_same_object", "fold_string_data", "foreign", "prune"]


def check_same_object(current: KubeObject, desired: KubeObject) -> None:
    if current["kind"] != desired["kind"]:
        raise InvalidObjectError(
            f"current is a {current['kind']!r} but desired a {desired['kind']!r}",
            field="kind", object_ref=object_ref(desired))
    group = current["apiVersion"].rpartition("/")[0]
    if group != desired["apiVersion"].rpartition("/")[0]:
        raise InvalidObjectError(
            f"current is in API group {group!r} but desired in "
            f"{desired['apiVersion'].rpartition('/')[0]!r}",
            field="apiVersion", object_ref=object_ref(desired))
    for field in ("name", "namespace"):
        have, want = current["metadata"].get(field), desired["metadata"].get(field)
        if have and want and have != want:
            raise InvalidObjectError(f"current has {field} {have!r} but desired {want!r}",
                                     field=f"metadata.{field}", object_ref=object_ref(desired))


def prune(value: Any, trie: Trie | None) -> Any:
    """``value`` without the ignored paths of ``trie`` (``value`` itself when none is present)."""
    if trie is None or not isinstance(value, Mapping | list):
        return value
    if isinstance(value, list):
        sub = trie.get(WILDCARD)
        if sub is True:
            return []
        pruned_items = [prune(item, sub) for item in value]
        same = all(new is old for new, old in zip(pruned_items, value, strict=True))
        return value if same else pruned_items
    keys = value.keys() if WILDCARD in trie else [key for key in trie if key in value]
    changes: dict[str, Any] = {}
    for key in keys:
        sub = sub_trie(trie, key)
        if sub is True:
            changes[key] = _DROP
        elif isinstance(sub, dict):
            pruned = prune(value[key], sub)
            if pruned is not value[key]:
                changes[key] = pruned
    if not changes:
        return value
    return {key: changes.get(key, item) for key, item in value.items()
            if changes.get(key) is not _DROP}


_DROP: Final = object()


def fold_string_data(secret: KubeObject) -> KubeObject:
    """A Secret as the server stores it: ``stringData`` base64-encoded into ``data``."""
    string_data = secret.get("stringData")
    if not is_map(string_data):
        return secret
    data = dict(secret.get("data") or {})
    for key, value in string_data.items():
        if isinstance(value, str):
            data[key] = base64.b64encode(value.encode()).decode("ascii")
    result = {k: v for k, v in secret.items() if k != "stringData"}
    result["data"] = data
    return result


def foreign(original: Mapping[str, Any], desired: KubeObject) -> str | None:
    meta = original.get("metadata")
    name = meta.get("name") if is_map(meta) else None
    if original.get("kind") != desired["kind"] or name != desired["metadata"]["name"]:
        return (f"the last-applied annotation records {original.get('kind')!s} {name!s}, "
                f"not {desired['kind']} {desired['metadata']['name']}")
    return None
