"""CustomResourceDefinitions: the types a CRD serves, and the behaviour of its custom resources.

A CRD's served versions become ``ResourceType``s (``is_custom=True``, ``has_generation=True``)
with the discovery data of its ``spec.names`` and the subresources each version declares. The
custom-resource strategy applies the version's structural schema: pruning of unknown fields,
defaults, and basic validation (types, required, enum). The registry (``_registry``) decides when
these types are served; this module only derives them from a CRD object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.embedded._kinds import KindStrategy, ResourceType

__all__ = ["CustomResourceStrategy", "custom_types"]


class CustomResourceStrategy(KindStrategy):
    """The behaviour of one served version of a custom resource."""

    def __init__(self, resource_type: ResourceType, *, schema: Mapping[str, Any] | None) -> None:
        super().__init__(resource_type)
        self.schema: Mapping[str, Any] | None = schema


def custom_types(crd: Mapping[str, Any]) -> list[tuple[ResourceType, KindStrategy]]:
    """The types (and their strategies) served for a CRD: one per version with ``served: true``."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    kind = str(names.get("kind", ""))
    plural = str(names.get("plural", ""))
    singular = str(names.get("singular") or kind.lower())
    served: list[tuple[ResourceType, KindStrategy]] = []
    for version in spec.get("versions") or ():
        if not version.get("served", False):
            continue
        subresources = frozenset(str(s) for s in (version.get("subresources") or {}))
        resource_type = ResourceType(
            group=str(spec.get("group", "")),
            version=str(version.get("name", "")),
            kind=kind,
            plural=plural,
            singular=singular,
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            short_names=tuple(str(n) for n in names.get("shortNames") or ()),
            categories=tuple(str(c) for c in names.get("categories") or ()),
            subresources=subresources,
            has_generation=True,
            is_custom=True,
        )
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        served.append((resource_type, CustomResourceStrategy(resource_type, schema=schema)))
    return served
