"""Shared type aliases of ``objectmatcher``.

Objects are JSON-shaped mappings everywhere in the toolkit (DESIGN.md section 1); this module names
that shape once so every module and the other layers spell it the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias, TypeGuard

__all__ = ["KubeObject", "Path", "is_map"]

#: A Kubernetes object as parsed JSON: ``{"apiVersion": ..., "kind": ..., "metadata": ...}``.
KubeObject: TypeAlias = Mapping[str, Any]

#: A field path inside an object: mapping keys (``str``) and list indexes (``int``).
Path: TypeAlias = tuple[str | int, ...]


def is_map(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, fast for the common ``dict``."""
    return type(value) is dict or isinstance(value, Mapping)
