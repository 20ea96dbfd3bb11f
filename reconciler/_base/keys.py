"""Keys and metadata views every layer of the driver shares: a parent's key, an object's metadata.

``ParentKey`` is what the work queue, the schedule, the caches' namespaced names and the shard
assignment call a parent; ``meta_of`` reads ``metadata`` without trusting its shape. They live
here, below every concept that uses them, so that sharding and the caches need not import the
driver's trigger rules to name a parent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ParentKey", "meta_of"]

ParentKey = tuple[str, str]
"""``(namespace, name)`` of a parent (namespace ``""`` for cluster-scoped parents)."""


def meta_of(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``obj``'s ``metadata`` mapping, empty when absent or malformed."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}
