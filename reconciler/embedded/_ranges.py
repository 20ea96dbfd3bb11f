"""Integer range checks for built-in kinds: an ``int32`` field holding 2**40 is refused.

A real server decodes a built-in object into Go structs, so a number that does not fit its
field's Go type fails decoding: ``json: cannot unmarshal number 1099511627776 into Go struct
field DeploymentSpec.spec.replicas of type int32``. The field formats (``int32``, ``int64``)
come from the OpenAPI definitions shipped in ``kubernetes-validate``, loaded only when a body
holds an integer outside the int32 range (the common body never pays for them). Custom
resources are validated by their own schemas, not here.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import kubernetes_validate

__all__ = ["RangeError", "find_range_error"]

_SCHEMA_VERSION = "v1.25.0-local"
_LIMITS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


@attrs.frozen(kw_only=True)
class RangeError:
    """A number that does not fit its field: where, what and the Go type it has."""

    struct: str
    path: str
    value: int
    go_type: str

    @property
    def message(self) -> str:
        """The Go decoder's message."""
        return (f"json: cannot unmarshal number {self.value} into Go struct field "
                f"{self.struct}.{self.path} of type {self.go_type}")


def _has_large_int(value: Any) -> bool:
    stack = [value]
    low, high = _LIMITS["int32"]
    while stack:
        current = stack.pop()
        if isinstance(current, bool):
            continue
        if isinstance(current, int):
            if not low <= current <= high:
                return True
        elif isinstance(current, Mapping):
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
    return False


@functools.lru_cache(maxsize=1)
def _definitions() -> tuple[dict[str, Any], dict[tuple[str, str, str], str]]:
    path = (Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
            / _SCHEMA_VERSION / "_definitions.json")
    defs: dict[str, Any] = json.loads(path.read_text())["$defs"]
    by_kind: dict[tuple[str, str, str], str] = {}
    for name, schema in defs.items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or ():
            by_kind.setdefault((gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", "")),
                               name)
    return defs, by_kind


def _resolve(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> tuple[Mapping[str, Any],
                                                                          str | None]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref[len("#/$defs/"):]
        return defs.get(name) or {}, name
    return schema, None


def find_range_error(
    obj: Any, *, group: str, version: str, kind: str
) -> RangeError | None:
    """The first integer of ``obj`` (a built-in kind's body) outside its field's range."""
    if not _has_large_int(obj):
        return None
    defs, by_kind = _definitions()
    root = by_kind.get((group, version, kind))
    if root is None:
        return None
    struct = root.rsplit(".", 1)[-1]
    stack: list[tuple[Any, Mapping[str, Any], str, str]] = [(obj, defs[root], "", struct)]
    while stack:
        value, schema, path, owner = stack.pop()
        schema, name = _resolve(schema, defs)
        if name is not None:
            owner = name.rsplit(".", 1)[-1]
        fmt = schema.get("format")
        if isinstance(value, int) and not isinstance(value, bool) and fmt in _LIMITS:
            low, high = _LIMITS[fmt]
            if not low <= value <= high:
                return RangeError(struct=owner, path=path, value=value, go_type=fmt)
        elif isinstance(value, Mapping):
            properties = schema.get("properties") or {}
            extra = schema.get("additionalProperties")
            for key, child in value.items():
                sub = properties.get(key) if key in properties else extra
                if isinstance(sub, Mapping):
                    stack.append((child, sub, f"{path}.{key}" if path else str(key), owner))
        elif isinstance(value, list):
            items = schema.get("items")
            if isinstance(items, Mapping):
                stack.extend((child, items, path, owner) for child in value)
    return None
