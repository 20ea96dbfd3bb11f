"""Patch metadata of Kubernetes kinds, read from the JSON schemas of ``kubernetes-validate``.

Strategic merge patches and the three-way comparison need, for every field of a built-in kind,
whether it is a list merged item by item (and by which key), a primitive list merged as a set, a
struct with ``retainKeys`` semantics, a resource quantity, or an atomic value. Kubernetes publishes
that in its OpenAPI schemas (``x-kubernetes-patch-merge-key``, ``x-kubernetes-patch-strategy``,
``x-kubernetes-list-map-keys``); ``kubernetes-validate`` ships them per Kubernetes version. This
module turns them into :class:`SchemaNode` trees, loading a version's definitions lazily (once per
process) and resolving each definition once. Custom resources get the same nodes from their CRD's
``openAPIV3Schema`` (:func:`crd_schema_node`), which only knows list-map keys.

This module is also the one owner of the Kubernetes schemas and versions for the whole project:
:data:`DEFAULT_KUBERNETES_VERSION`, the version policy (:func:`normalize_version`: ``"v1.27.3"``,
``"1.27"`` or ``None`` for the default; a version without installed schemas is an
:class:`UnsupportedVersionError` naming it and the available ones, never a silent fallback), the
folder of a version's schema files (:func:`schema_directory`) and the parsed ``_definitions.json``
(:func:`schema_definitions`, loaded once per process). ``builders`` (validation, generation) and
the embedded API server (unknown-field decoding, OpenAPI documents) read their schemas through
these functions, so every layer agrees on which schemas a version means.

The boundary: no comparison or patching happens here, only lookups.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from objectmatcher._errors import UnsupportedVersionError

__all__ = [
    "DEFAULT_KUBERNETES_VERSION",
    "SchemaNode",
    "available_versions",
    "crd_schema_node",
    "custom_resource_node",
    "has_builtin_schema",
    "kind_schema",
    "normalize_version",
    "schema_definitions",
    "schema_directory",
]

#: The version whose schemas are used when none is given: the one the real-apiserver recordings
#: of the project come from, and the oldest the toolkit supports (patch metadata is stable since).
DEFAULT_KUBERNETES_VERSION: Final = "1.25"

_QUANTITY_REF: Final = "io.k8s.apimachinery.pkg.api.resource.Quantity"

_KIND_ANY: Final = "any"
_KIND_OBJECT: Final = "object"
_KIND_MAP: Final = "map"
_KIND_LIST: Final = "list"
_KIND_SCALAR: Final = "scalar"
_KIND_QUANTITY: Final = "quantity"


class SchemaNode:
    """What the schema says about one value: its shape and its patch metadata.

    ``kind`` is ``"object"`` (named fields, see :meth:`field`), ``"map"`` (string keys, values
    described by :attr:`element`), ``"list"`` (items described by :attr:`element`), ``"quantity"``
    (a resource quantity compared by value), ``"scalar"`` or ``"any"`` (no schema: free-form).
    For lists, ``merge_key`` is the strategic-merge key (``None`` for atomic lists and primitive
    sets), ``strategies`` the patch strategies (``"merge"``, ``"retainKeys"``, ``"replace"``) and
    ``list_map_keys`` the keys that identify items of a ``x-kubernetes-list-type: map`` list,
    ``list_type`` the declared ``x-kubernetes-list-type`` (``None`` when undeclared) and
    ``atomic`` an object or map declared ``x-kubernetes-map-type: atomic`` (server-side apply
    owns it as one value).
    Nodes are shared and never change once built; object fields are resolved on first use.
    """

    __slots__ = (
        "_fields",
        "_resolver",
        "atomic",
        "element",
        "kind",
        "list_map_keys",
        "list_type",
        "merge_key",
        "strategies",
    )

    def __init__(
        self,
        kind: str,
        *,
        element: SchemaNode | None = None,
        strategies: frozenset[str] = frozenset(),
        merge_key: str | None = None,
        list_map_keys: tuple[str, ...] = (),
        fields: dict[str, SchemaNode] | None = None,
        resolver: Any = None,
        list_type: str | None = None,
        atomic: bool = False,
    ) -> None:
        self.kind = kind
        self.list_type = list_type
        self.atomic = atomic
        self.element = element
        self.strategies = strategies
        self.merge_key = merge_key
        self.list_map_keys = list_map_keys
        self._fields = fields
        self._resolver = resolver

    def field(self, name: str) -> SchemaNode | None:
        """The node of field ``name`` of an object (``None`` when unknown or not an object)."""
        if self.kind == _KIND_MAP:
            return self.element
        if self.kind != _KIND_OBJECT:
            return None
        fields = self._fields
        if fields is None:
            fields = self._fields = self._resolver()
        return fields.get(name)

    @property
    def merges_items(self) -> bool:
        """A list patched item by item (``merge`` strategy), by ``merge_key`` or as a set."""
        return self.kind == _KIND_LIST and "merge" in self.strategies

    @property
    def retains_keys(self) -> bool:
        """A struct (or list items) patched with ``retainKeys``: unlisted keys are cleared."""
        return "retainKeys" in self.strategies

    @property
    def is_quantity(self) -> bool:
        """A resource quantity: ``"1000m"`` equals ``"1"``."""
        return self.kind == _KIND_QUANTITY

    def __repr__(self) -> str:
        extra = f" merge_key={self.merge_key!r}" if self.merge_key else ""
        return f"<SchemaNode {self.kind}{extra} {sorted(self.strategies)}>"


_ANY = SchemaNode(_KIND_ANY)
_SCALAR = SchemaNode(_KIND_SCALAR)
_QUANTITY = SchemaNode(_KIND_QUANTITY)


def _schemas_root() -> Path:
    import kubernetes_validate

    return Path(kubernetes_validate.__file__).resolve().parent / "kubernetes-json-schema"


@functools.cache
def available_versions() -> tuple[str, ...]:
    """The Kubernetes versions (``"1.25"``, ...) whose schemas are installed, oldest first."""
    found = []
    for entry in _schemas_root().iterdir():
        match = re.fullmatch(r"v(\d+)\.(\d+)\.\d+-local", entry.name)
        if match:
            found.append((int(match.group(1)), int(match.group(2))))
    return tuple(f"{major}.{minor}" for major, minor in sorted(found))


@functools.lru_cache(maxsize=64)
def normalize_version(version: str | None) -> str:
    """``"v1.27.3"``, ``"1.27"`` or ``None`` (the default) as ``"major.minor"``.

    Raises :class:`UnsupportedVersionError` (a ``ValueError``) for a version without schemas.
    """
    if version is None:
        return DEFAULT_KUBERNETES_VERSION
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?", version.strip())
    normalized = f"{match.group(1)}.{match.group(2)}" if match else version
    if normalized not in available_versions():
        raise UnsupportedVersionError(version, available=available_versions())
    return normalized


def schema_directory(kubernetes_version: str | None = None, *, strict: bool = False) -> Path:
    """The folder of ``kubernetes-validate``'s JSON schema files for one Kubernetes version.

    ``kubernetes_version`` is resolved by :func:`normalize_version` (``None``: the default; a
    version without schemas raises :class:`UnsupportedVersionError`). ``strict`` picks the variant
    in which unknown fields are errors (``additionalProperties: false``), for validation.
    """
    version = normalize_version(kubernetes_version)
    return _schemas_root() / f"v{version}.0-local{'-strict' if strict else ''}"


def schema_definitions(
    kubernetes_version: str | None = None, *, strict: bool = False
) -> Mapping[str, Any]:
    """The parsed ``_definitions.json`` of one version (``{"$defs": {name: schema}}``).

    Loaded once per process and variant, and shared by every caller: do not mutate it. The
    version and ``strict`` mean what they mean for :func:`schema_directory`.
    """
    return _load_definitions(normalize_version(kubernetes_version), strict)


@functools.cache
def _load_definitions(version: str, strict: bool) -> Mapping[str, Any]:
    path = schema_directory(version, strict=strict) / "_definitions.json"
    loaded: Mapping[str, Any] = json.loads(path.read_text())
    return loaded


class _Definitions:
    """The ``$defs`` of one Kubernetes version, resolved into nodes on demand."""

    def __init__(self, version: str) -> None:
        self._defs: Mapping[str, Any] = schema_definitions(version)["$defs"]
        self._objects: dict[str, SchemaNode] = {}
        self.kinds: dict[tuple[str, str], str] = {}
        for name, definition in self._defs.items():
            for gvk in definition.get("x-kubernetes-group-version-kind", ()):
                group = gvk.get("group", "")
                api_version = f"{group}/{gvk['version']}" if group else gvk["version"]
                # Watch events, lists and options carry GVKs too; a kind's own def wins.
                if name.rsplit(".", 1)[-1] == gvk["kind"]:
                    self.kinds[(api_version, gvk["kind"])] = name

    def object_node(self, name: str) -> SchemaNode:
        node = self._objects.get(name)
        if node is None:
            definition = self._defs[name]
            node = SchemaNode(
                _KIND_OBJECT,
                resolver=functools.partial(self._fields_of, definition),
                strategies=_strategies(definition),
                atomic=definition.get("x-kubernetes-map-type") == "atomic",
            )
            self._objects[name] = node
        return node

    def _fields_of(self, definition: Mapping[str, Any]) -> dict[str, SchemaNode]:
        props = definition.get("properties") or {}
        return {key: self.node_of(prop) for key, prop in props.items()}

    def node_of(self, prop: Mapping[str, Any]) -> SchemaNode:
        ref = prop.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            if name == _QUANTITY_REF:
                return _QUANTITY
            target = self._defs.get(name, {})
            if "properties" in target:
                node = self.object_node(name)
                strategies = _strategies(prop)
                if strategies and strategies != node.strategies:
                    return SchemaNode(
                        _KIND_OBJECT,
                        resolver=functools.partial(self._fields_of, target),
                        strategies=strategies,
                        atomic=node.atomic,
                    )
                return node
            return self.node_of({**target, **{k: v for k, v in prop.items() if k != "$ref"}})
        types = prop.get("type") or ()
        types = (types,) if isinstance(types, str) else tuple(types)
        if "array" in types:
            items = prop.get("items")
            return SchemaNode(
                _KIND_LIST,
                element=self.node_of(items) if isinstance(items, Mapping) else _ANY,
                strategies=_strategies(prop),
                merge_key=prop.get("x-kubernetes-patch-merge-key"),
                list_map_keys=tuple(prop.get("x-kubernetes-list-map-keys", ())),
                list_type=prop.get("x-kubernetes-list-type"),
            )
        if "object" in types:
            values = prop.get("additionalProperties")
            atomic = prop.get("x-kubernetes-map-type") == "atomic"
            if isinstance(values, Mapping):
                return SchemaNode(_KIND_MAP, element=self.node_of(values), atomic=atomic)
            if "properties" in prop:
                return SchemaNode(
                    _KIND_OBJECT,
                    resolver=functools.partial(self._fields_of, prop),
                    strategies=_strategies(prop),
                    atomic=atomic,
                )
            return _ANY
        return _SCALAR


def _strategies(prop: Mapping[str, Any]) -> frozenset[str]:
    raw = prop.get("x-kubernetes-patch-strategy")
    if not isinstance(raw, str) or not raw:
        return frozenset()
    return frozenset(part.strip() for part in raw.split(","))


@functools.cache
def _definitions(version: str) -> _Definitions:
    return _Definitions(version)


@functools.lru_cache(maxsize=1024)
def kind_schema(
    api_version: str, kind: str, kubernetes_version: str | None = None
) -> SchemaNode | None:
    """The schema node of a built-in kind, or ``None`` when the kind is not built in.

    ``kubernetes_version`` defaults to :data:`DEFAULT_KUBERNETES_VERSION`; schemas load on the
    first call for a version and stay cached for the life of the process.
    """
    definitions = _definitions(normalize_version(kubernetes_version))
    name = definitions.kinds.get((api_version, kind))
    return definitions.object_node(name) if name else None


def crd_schema_node(schema: Mapping[str, Any]) -> SchemaNode:
    """A node tree for a custom resource from its CRD ``openAPIV3Schema``.

    Only what JSON merge patch needs: object fields, maps, and lists with
    ``x-kubernetes-list-type: map`` and their ``x-kubernetes-list-map-keys`` (all other lists are
    atomic; no strategic-merge metadata exists for custom resources).
    """
    return _crd_node(schema)


def _crd_node(prop: Mapping[str, Any]) -> SchemaNode:
    kind = prop.get("type")
    if kind == "array":
        items = prop.get("items")
        keys = tuple(prop.get("x-kubernetes-list-map-keys", ()))
        is_map = prop.get("x-kubernetes-list-type") == "map" and bool(keys)
        return SchemaNode(
            _KIND_LIST,
            element=_crd_node(items) if isinstance(items, Mapping) else _ANY,
            list_map_keys=keys if is_map else (),
            list_type=prop.get("x-kubernetes-list-type") or "atomic",
        )
    if kind == "object" or "properties" in prop:
        atomic = prop.get("x-kubernetes-map-type") == "atomic"
        if "properties" in prop:
            fields = {key: _crd_node(sub) for key, sub in prop["properties"].items()}
            return SchemaNode(_KIND_OBJECT, fields=fields, atomic=atomic)
        values = prop.get("additionalProperties")
        if isinstance(values, Mapping):
            return SchemaNode(_KIND_MAP, element=_crd_node(values), atomic=atomic)
        return _ANY
    if kind is None and not prop.get("x-kubernetes-int-or-string"):
        return _ANY
    return _SCALAR


def has_builtin_schema(api_version: str, kind: str, kubernetes_version: str | None = None) -> bool:
    """Whether ``kind`` of ``api_version`` is a built-in kind (strategic merge patch applies)."""
    return kind_schema(api_version, kind, kubernetes_version) is not None


_OBJECT_META: Final = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def custom_resource_node(
    crd_node: SchemaNode | None, kubernetes_version: str | None = None
) -> SchemaNode:
    """The root node of a custom resource: its CRD schema's fields, and the built-in ObjectMeta.

    Every custom resource has standard ``metadata`` (labels and annotations are maps whose keys
    belong to several actors) whatever its CRD says; the rest comes from ``crd_node`` when given.
    """
    if crd_node is None:
        return _schemaless_custom_resource_node(normalize_version(kubernetes_version))
    meta = _definitions(normalize_version(kubernetes_version)).object_node(_OBJECT_META)

    def fields() -> dict[str, SchemaNode]:
        own = crd_node._fields if crd_node.kind == _KIND_OBJECT else None
        return {**(own or {}), "metadata": meta}

    return SchemaNode(_KIND_OBJECT, resolver=fields)


@functools.cache
def _schemaless_custom_resource_node(version: str) -> SchemaNode:
    meta = _definitions(version).object_node(_OBJECT_META)
    return SchemaNode(_KIND_OBJECT, fields={"metadata": meta})
