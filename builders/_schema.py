"""Kubernetes JSON schemas for validation and generation, from the ``kubernetes-validate`` package.

Both the object helpers' tests and the testing kit need to know whether an object is valid for
its kind, and ``from_schema`` needs the schema itself. This module reads the schemas shipped in
``kubernetes-validate`` (strict variant: unknown fields are errors) through objectmatcher, the one
owner of schema files and of the Kubernetes version policy (``objectmatcher.schema_directory``,
``objectmatcher.schema_definitions``): an unknown version is an :class:`InvalidSpecError` naming
it and the available ones. It caches one compiled validator per kind, and validates custom
resources against a CRD's structural (OpenAPI v3) schema. It never talks to a cluster.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import kubernetes_validate
import referencing

import objectmatcher
from builders._errors import InvalidSpecError, SchemaValidationError, UnknownKindError

__all__ = [
    "SchemaValidationError",
    "UnknownKindError",
    "builtin_schema",
    "crd_version_schema",
    "definitions",
    "resolve_ref",
    "validate_object",
]

_DEFS_URI = "https://kubernetes.io/api/_definitions.json"


def _schema_dir(kubernetes_version: str | None) -> Path:
    """The strict schema folder of ``kubernetes_version`` (objectmatcher's version policy)."""
    try:
        return objectmatcher.schema_directory(kubernetes_version, strict=True)
    except objectmatcher.UnsupportedVersionError as error:
        raise InvalidSpecError(
            field="kubernetes_version", value=kubernetes_version, reason=str(error)
        ) from error


@functools.cache
def definitions(kubernetes_version: str | None = None) -> Mapping[str, Any]:
    """The shared ``$defs`` of one Kubernetes version (cached; do not mutate)."""
    _schema_dir(kubernetes_version)  # the version policy, with this package's error type
    return objectmatcher.schema_definitions(kubernetes_version, strict=True)


def _api_version_slug(api_version: str) -> str:
    return re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)


@functools.cache
def builtin_schema(
    api_version: str, kind: str, *, kubernetes_version: str | None = None
) -> Mapping[str, Any] | None:
    """The JSON schema of a built-in kind, or None when the version ships none (cached)."""
    path = _schema_dir(kubernetes_version) / f"{kind.lower()}-{_api_version_slug(api_version)}.json"
    try:
        schema: Mapping[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    kinds = schema.get("properties", {}).get("kind", {}).get("enum")
    return schema if kinds == [kind] else None


def resolve_ref(ref: str, kubernetes_version: str | None = None) -> Mapping[str, Any]:
    """The definition a built-in schema's ``$ref`` points at."""
    name = ref.rsplit("/", 1)[-1]
    found: Mapping[str, Any] = definitions(kubernetes_version)["$defs"][name]
    return found


@functools.cache
def _builtin_validator(api_version: str, kind: str, *, kubernetes_version: str | None) -> Any:
    schema = builtin_schema(api_version, kind, kubernetes_version=kubernetes_version)
    if schema is None:
        return None
    defs = referencing.Resource.from_contents(definitions(kubernetes_version))
    registry: referencing.Registry[Any] = referencing.Registry().with_resource(_DEFS_URI, defs)
    registry = referencing.Resource.from_contents(schema) @ registry
    return jsonschema.Draft202012Validator(schema, registry=registry)


def crd_version_schema(crd: Mapping[str, Any], version: str | None = None) -> Mapping[str, Any]:
    """The ``openAPIV3Schema`` of one version of a CustomResourceDefinition (served storage one
    by default). ``crd`` may also be such a schema already, which is returned as it is."""
    if crd.get("kind") != "CustomResourceDefinition":
        return crd
    versions = crd.get("spec", {}).get("versions") or []
    chosen = [v for v in versions if (v.get("name") == version if version else v.get("storage"))]
    if not chosen:
        raise InvalidSpecError(
            field="spec.versions", value=version, reason="the CRD has no such version"
        )
    schema = chosen[0].get("schema", {}).get("openAPIV3Schema")
    if not isinstance(schema, Mapping):
        raise InvalidSpecError(
            field="spec.versions[].schema.openAPIV3Schema",
            value=schema,
            reason="the CRD version has no structural schema",
        )
    return schema


def _openapi_to_jsonschema(schema: Any) -> Any:
    """OpenAPI v3 (structural) to JSON schema: ``nullable``, int-or-string, extensions dropped."""
    if isinstance(schema, list):
        return [_openapi_to_jsonschema(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {k: _openapi_to_jsonschema(v) for k, v in schema.items() if not k.startswith("x-")}
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
        out.pop("additionalProperties", None)
    return out


_CRD_VALIDATORS: dict[int, tuple[Mapping[str, Any], Any]] = {}


def _crd_validator(schema: Mapping[str, Any]) -> Any:
    """One compiled validator per CRD schema object (kept alive with it, so ids stay unique)."""
    cached = _CRD_VALIDATORS.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    validator = jsonschema.Draft7Validator(_openapi_to_jsonschema(copy.deepcopy(dict(schema))))
    if len(_CRD_VALIDATORS) > 256:
        _CRD_VALIDATORS.clear()
    _CRD_VALIDATORS[id(schema)] = (schema, validator)
    return validator


def _format_path(path: Any) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<object>"


def validate_object(
    obj: Mapping[str, Any],
    *,
    kubernetes_version: str | None = None,
    crd_schema: Mapping[str, Any] | None = None,
) -> None:
    """Validate ``obj`` against the schema of its kind; SchemaValidationError names the field.

    Built-in kinds use the ``kubernetes-validate`` schema of ``kubernetes_version`` (default
    ``objectmatcher.DEFAULT_KUBERNETES_VERSION``). Custom resources need ``crd_schema``: a CRD
    object or its ``openAPIV3Schema``. An unknown kind without ``crd_schema`` raises
    UnknownKindError.
    """
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    if crd_schema is not None:
        version = api_version.rsplit("/", 1)[-1]
        validator = _crd_validator(crd_version_schema(crd_schema, version))
    else:
        found = _builtin_validator(api_version, kind, kubernetes_version=kubernetes_version)
        if found is None:
            raise UnknownKindError(
                field="apiVersion/kind",
                value=f"{api_version}/{kind}",
                reason="no schema for this kind in kubernetes-validate "
                f"{kubernetes_validate.__version__} (pass a CRD schema for custom resources)",
            )
        validator = found
    error = jsonschema.exceptions.best_match(validator.iter_errors(obj))
    if error is not None:
        path = list(error.absolute_path)
        if kind == "Secret" and (not path or path[0] in ("data", "stringData")):
            # Secret values never appear in clear text, not even in an error message.
            value, reason = "<redacted>", f"invalid {path[0] if path else 'Secret'} value"
        else:
            value, reason = error.instance, error.message
        raise SchemaValidationError(field=_format_path(path), value=value, reason=reason)
