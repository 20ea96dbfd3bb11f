"""``/openapi/v2`` and ``/openapi/v3``, built from the schemas shipped in ``kubernetes-validate``
(read through ``objectmatcher.schema_definitions``, the one schema loader).

kubectl reads these for strategic-merge metadata (``x-kubernetes-patch-merge-key``/``-strategy``)
and for ``kubectl explain``. ``kubernetes-validate`` ships JSON Schema (draft 2020-12); this module
converts it to the OpenAPI dialect Kubernetes serves: ``#/definitions/...`` (v2) or
``#/components/schemas/...`` (v3) references, one non-null ``type``, ``int-or-string`` formats, and
``x-kubernetes-group-version-kind`` on every served kind. The built-in definitions are built once
per process. A served CRD version's ``openAPIV3Schema`` is described too, as a real server does
(``kubectl explain <kind>``): named ``<reversed group>.<version>.<Kind>``, ``metadata`` a reference
to ``ObjectMeta``, in ``/openapi/v2`` and in its group-version's v3 document, whose hash follows
the CRD's content so that kubectl's cache sees a changed schema.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from objectmatcher import schema_definitions, schema_directory
from reconciler.embedded._kinds import KindRegistry

__all__ = ["CustomResourceDefinitions", "openapi_v2", "openapi_v3_document", "openapi_v3_index"]

CustomResourceDefinitions = Callable[[], Iterable[Mapping[str, Any]]]
"""The stored CRDs, read when a document is asked for (their schemas describe custom kinds)."""

_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

# The schemas of objectmatcher's DEFAULT_KUBERNETES_VERSION, whose folder name ("v1.25.0-local")
# also seeds the documents' hashes.
_SCHEMA_VERSION = schema_directory().name
_V3_PREFIX = "#/components/schemas/"
_KEPT = frozenset({
    "description", "type", "format", "items", "properties", "additionalProperties", "$ref",
    "required", "enum", "default",
})


def _convert(node: Any, ref_prefix: str) -> Any:
    if isinstance(node, list):
        return [_convert(v, ref_prefix) for v in node]
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref":
            out["$ref"] = str(value).replace("#/$defs/", ref_prefix)
        elif key == "type":
            types = [value] if isinstance(value, str) else [t for t in value if t != "null"]
            if set(types) == {"integer", "string"}:
                out["type"], out["format"] = "string", "int-or-string"
            elif types:
                out["type"] = types[0]
        elif key == "enum":
            values = [v for v in value if v is not None]
            if values:
                out["enum"] = values
        elif key in ("properties",):
            out[key] = {k: _convert(v, ref_prefix) for k, v in value.items()}
        elif key.startswith("x-kubernetes-") or key in _KEPT:
            out[key] = _convert(value, ref_prefix)
        elif key in ("oneOf", "anyOf") and "type" not in node:
            kinds = {t for alt in value if isinstance(alt, Mapping)
                     for t in ([alt.get("type")] if isinstance(alt.get("type"), str)
                               else alt.get("type") or ())}
            if {"integer", "string"} <= kinds:
                out["type"], out["format"] = "string", "int-or-string"
    return out


@functools.lru_cache(maxsize=2)
def _definitions(ref_prefix: str) -> dict[str, Any]:
    raw: Mapping[str, Any] = schema_definitions()["$defs"]
    converted: dict[str, Any] = {}
    for name, schema in raw.items():
        doc = _convert(schema, ref_prefix)
        props = schema.get("properties") or {}
        api_versions = (props.get("apiVersion") or {}).get("enum") or []
        kinds = (props.get("kind") or {}).get("enum") or []
        if api_versions and kinds and api_versions[0] and kinds[0]:
            group, _, version = str(api_versions[0]).rpartition("/")
            doc["x-kubernetes-group-version-kind"] = [
                {"group": group, "version": version, "kind": kinds[0]}
            ]
        converted[name] = doc
    return converted


def _custom_definitions(
    registry: KindRegistry, crds: CustomResourceDefinitions, ref_prefix: str
) -> dict[str, dict[str, Any]]:
    """Per group-version path (``apis/example.com/v1``), the schemas of the custom kinds served
    there, by definition name."""
    found: dict[str, dict[str, Any]] = {}
    for crd in crds():
        spec = crd.get("spec") or {}
        group, kind = str(spec.get("group") or ""), str((spec.get("names") or {}).get("kind"))
        for version in spec.get("versions") or ():
            name = str(version.get("name") or "")
            rt = registry.by_kind(f"{group}/{name}", kind)
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            if rt is None or not rt.is_custom or not isinstance(schema, Mapping):
                continue
            doc = _convert(schema, ref_prefix)
            properties = doc.setdefault("properties", {})
            properties["metadata"] = {"$ref": ref_prefix + _OBJECT_META}
            for field, text in (("apiVersion", "APIVersion defines the versioned schema of this "
                                 "representation of an object."),
                                ("kind", "Kind is a string value representing the REST resource "
                                 "this object represents.")):
                properties.setdefault(field, {"type": "string", "description": text})
            doc["x-kubernetes-group-version-kind"] = [
                {"group": group, "version": name, "kind": kind}]
            definition = ".".join([*reversed(group.split(".")), name, kind])
            found.setdefault(f"apis/{group}/{name}", {})[definition] = doc
    return found


def _referenced(definitions: Mapping[str, Any], roots: Iterable[str], ref_prefix: str) -> set[str]:
    """``roots`` and every definition they reference, transitively."""
    seen: set[str] = set()
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in seen or name not in definitions:
            continue
        seen.add(name)
        text = json.dumps(definitions[name])
        for part in text.split(f'"$ref": "{ref_prefix}')[1:]:
            pending.append(part.split('"', 1)[0])
    return seen


def _with_object_meta(custom: Mapping[str, Any], ref_prefix: str) -> dict[str, Any]:
    """Custom schemas and the built-in definitions their ``metadata`` refers to."""
    builtin = _definitions(ref_prefix)
    needed = _referenced(builtin, [_OBJECT_META], ref_prefix)
    return {**{name: builtin[name] for name in sorted(needed)}, **custom}


def openapi_v2(registry: KindRegistry, crds: CustomResourceDefinitions) -> dict[str, Any]:
    """The Swagger 2.0 document (definitions only; paths are not needed by clients)."""
    definitions = dict(_definitions("#/definitions/"))
    for custom in _custom_definitions(registry, crds, "#/definitions/").values():
        definitions.update(custom)
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.25.0-optk"},
        "paths": {},
        "definitions": definitions,
    }


def _group_versions(registry: KindRegistry) -> list[str]:
    paths = set()
    for rt in registry.all_types():
        if rt.is_custom:
            continue
        paths.add(f"apis/{rt.group}/{rt.version}" if rt.group else "api/v1")
    return sorted(paths)


def _hash(path: str, content: Any = None) -> str:
    text = f"{_SCHEMA_VERSION}/{path}"
    if content is not None:
        text += json.dumps(content, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32].upper()


def openapi_v3_index(registry: KindRegistry, crds: CustomResourceDefinitions) -> dict[str, Any]:
    """``/openapi/v3``: where each group-version's document lives."""
    hashes = {path: _hash(path) for path in _group_versions(registry)}
    for path, custom in _custom_definitions(registry, crds, _V3_PREFIX).items():
        hashes.setdefault(path, _hash(path, custom))
    return {"paths": {
        path: {"serverRelativeURL": f"/openapi/v3/{path}?hash={hashes[path]}"}
        for path in sorted(hashes)
    }}


_WRITE_PARAMETERS = ("dryRun", "fieldManager", "fieldValidation", "force")


def _paths(registry: KindRegistry, path: str) -> dict[str, Any]:
    """PATCH operations per kind, carrying the query parameters the server supports.

    kubectl looks for ``fieldValidation`` (and ``dryRun``) among a kind's PATCH parameters to
    decide that the server validates fields itself; without it it would download ``/openapi/v2``
    as protobuf for client-side validation.
    """
    paths: dict[str, Any] = {}
    for rt in registry.all_types():
        gv_path = f"apis/{rt.group}/{rt.version}" if rt.group else "api/v1"
        if gv_path != path:
            continue
        scope = "/namespaces/{namespace}" if rt.namespaced else ""
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        parameters = [
            {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
            for name in _WRITE_PARAMETERS
        ]
        paths[f"/{gv_path}{scope}/{rt.plural}/{{name}}"] = {"patch": {
            "operationId": f"patch{rt.kind}",
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
            "parameters": parameters,
            "responses": {"200": {"description": "OK"}},
        }}
    return paths


def openapi_v3_document(
    registry: KindRegistry, crds: CustomResourceDefinitions, path: str
) -> dict[str, Any] | None:
    """``/openapi/v3/<api/v1 | apis/group/version>``, or None when not served."""
    path = path.strip("/")
    if path in _group_versions(registry):
        schemas = _definitions(_V3_PREFIX)
    else:
        custom = _custom_definitions(registry, crds, _V3_PREFIX).get(path)
        if custom is None:
            return None
        schemas = _with_object_meta(custom, _V3_PREFIX)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.25.0-optk"},
        "paths": _paths(registry, path),
        "components": {"schemas": schemas},
    }
