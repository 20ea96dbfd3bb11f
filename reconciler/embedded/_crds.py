"""CustomResourceDefinitions: their own defaults and rules, the types they serve, and the
behaviour of the custom resources they define.

A CRD's served versions become ``ResourceType``s (``is_custom=True``, ``has_generation=True``)
with the discovery data of its ``spec.names`` and the subresources each version declares. The
custom-resource strategy applies the version's structural schema as the apiextensions-apiserver
does: pruning of unknown fields (``x-kubernetes-preserve-unknown-fields`` honoured), defaults,
and basic validation (types, required, enum) with the real 422 causes; it also exposes the
schema's list-map keys for the matcher. The registry (``_registry``) decides when these types are
served; this module only derives them from CRD objects.

It is over 500 lines because the CRD's own rules and the custom resources' schema rules are one
concept read against one schema walk: split, each half would need the other's traversal.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

from objectmatcher._validation import (
    Cause,
    invalid,
    json_type_matches,
    json_type_name,
    not_supported,
    required,
    type_invalid,
    validate_uid_update,
)
from reconciler.embedded import _cel, _defaulting
from reconciler.embedded._kinds import Invalid, KindStrategy, ResourceType, ServerContext
from reconciler.embedded._names import (
    dns1123_label,
    dns1123_subdomain,
    go_quote,
    validate_metadata,
)
from reconciler.embedded._names import validate_metadata_name as _validate_name
from reconciler.embedded._times import now_timestamp

__all__ = [
    "CustomResourceStrategy",
    "custom_types",
    "default_crd",
    "default_from_schema",
    "established_status",
    "list_map_keys",
    "prune",
    "updated_status",
    "validate_against_schema",
    "validate_crd",
    "validate_crd_update",
]

ListMapKeys = dict[tuple[str, ...], tuple[str, ...]]
_ITEMS = "*"  # path element for "every item of this list / every value of this map"


# --- the CRD object itself -------------------------------------------------------------------


def default_crd(obj: dict[str, Any]) -> None:
    """``names.singular`` and ``listKind`` from the kind, and ``conversion: {strategy: None}``."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    names = spec.get("names")
    if isinstance(names, dict) and names.get("kind"):
        names.setdefault("singular", str(names["kind"]).lower())
        names.setdefault("listKind", f"{names['kind']}List")
    conversion = spec.setdefault("conversion", {})
    if isinstance(conversion, dict):
        conversion.setdefault("strategy", "None")


def _accepted_names(obj: Mapping[str, Any]) -> dict[str, Any]:
    names = (obj.get("spec") or {}).get("names") or {}
    keys = ("plural", "singular", "shortNames", "kind", "listKind", "categories")
    return {key: copy.deepcopy(names[key]) for key in keys if key in names}


def _storage_version(obj: Mapping[str, Any]) -> str | None:
    for version in (obj.get("spec") or {}).get("versions") or ():
        if version.get("storage"):
            return str(version.get("name"))
    return None


def established_status(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The status of a CRD whose names were accepted and which is established."""
    now = now_timestamp()
    storage = _storage_version(obj)
    return {
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "NoConflicts",
                "message": "no conflicts found",
            },
            {
                "type": "Established",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
            },
        ],
        "acceptedNames": _accepted_names(obj),
        "storedVersions": [storage] if storage else [],
    }


def updated_status(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """After a spec update: the new names accepted, a new storage version recorded."""
    status = copy.deepcopy(dict(old.get("status") or established_status(new)))
    status["acceptedNames"] = _accepted_names(new)
    stored = list(status.get("storedVersions") or [])
    storage = _storage_version(new)
    if storage and storage not in stored:
        stored.append(storage)
    status["storedVersions"] = stored
    return status


def validate_crd(obj: Mapping[str, Any]) -> list[Cause]:
    """The rules of ``ValidateCustomResourceDefinition`` a client is likely to meet."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    names = spec.get("names") or {}
    group = str(spec.get("group") or "")
    plural = str(names.get("plural") or "")
    causes: list[Cause] = []
    name = str(meta.get("name") or "")
    if name and plural and group and name != f"{plural}.{group}":
        causes.append(invalid("metadata.name", go_quote(name),
                              'must be spec.names.plural+"."+spec.group'))
    if not group:
        causes.append(required("spec.group"))
    elif "." not in group:
        causes.append(invalid("spec.group", go_quote(group),
                              "should be a domain with at least one dot"))
    elif _is_protected(group) and _APPROVAL not in (meta.get("annotations") or {}):
        causes.append(required(
            f"metadata.annotations[{_APPROVAL}]",
            f'protected groups must have approval annotation "{_APPROVAL}", see '
            "https://github.com/kubernetes/enhancements/pull/1111",
        ))
    scope = spec.get("scope")
    if not scope:
        causes.append(required("spec.scope"))
    elif scope not in ("Cluster", "Namespaced"):
        causes.append(not_supported("spec.scope", str(scope), ["Cluster", "Namespaced"]))
    if not plural:
        causes.append(required("spec.names.plural"))
    else:
        causes += [invalid("spec.names.plural", go_quote(plural), m) for m in dns1123_label(plural)]
    if not names.get("kind"):
        causes.append(required("spec.names.kind"))
    versions = spec.get("versions") or []
    if not versions:
        causes.append(required("spec.versions"))
    elif sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(invalid("spec.versions", json.dumps(versions, sort_keys=True),
                              "must have exactly one version marked as storage version"))
    for index, version in enumerate(versions):
        if not version.get("name"):
            causes.append(required(f"spec.versions[{index}].name"))
        if not (version.get("schema") or {}).get("openAPIV3Schema"):
            causes.append(required(f"spec.versions[{index}].schema.openAPIV3Schema",
                                   "schemas are required"))
    return causes


_APPROVAL = "api-approved.kubernetes.io"


def _is_protected(group: str) -> bool:
    return any(group == domain or group.endswith(f".{domain}")
               for domain in ("k8s.io", "kubernetes.io"))


def validate_crd_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
    """A CRD's ``spec.group`` and ``spec.scope`` never change."""
    causes = []
    for key in ("group", "scope"):
        old_value = (old.get("spec") or {}).get(key)
        new_value = (new.get("spec") or {}).get(key)
        if old_value != new_value:
            causes.append(invalid(f"spec.{key}", go_quote(str(new_value)), "field is immutable"))
    return causes


# --- structural schemas ----------------------------------------------------------------------


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    props = schema.get("properties")
    return props if isinstance(props, Mapping) else {}


def prune(
    value: Any,
    schema: Mapping[str, Any] | None,
    *,
    root: bool = False,
    dropped: list[str] | None = None,
    path: str = "",
) -> Any:
    """``value`` without the fields its structural schema does not specify (a new object).

    Fields under ``x-kubernetes-preserve-unknown-fields: true`` are kept; at the root (and in
    embedded resources) ``apiVersion``, ``kind`` and ``metadata`` always are. The paths of the
    dropped fields are appended to ``dropped`` when given.
    """
    if schema is None:
        return copy.deepcopy(value)
    if isinstance(value, dict):
        props = _properties(schema)
        additional = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        embedded = root or bool(schema.get("x-kubernetes-embedded-resource"))
        result: dict[str, Any] = {}
        for key, item in value.items():
            child = _join(path, str(key))
            if key in props:
                result[key] = prune(item, props[key], dropped=dropped, path=child)
            elif isinstance(additional, Mapping):
                result[key] = prune(item, additional, dropped=dropped, path=child)
            elif preserve or additional is True or (
                embedded and key in ("apiVersion", "kind", "metadata")
            ):
                result[key] = copy.deepcopy(item)
            elif dropped is not None:
                dropped.append(child)
        return result
    if isinstance(value, list):
        items = schema.get("items")
        return [
            prune(item, items if isinstance(items, Mapping) else None, dropped=dropped,
                  path=f"{path}[{index}]")
            for index, item in enumerate(value)
        ]
    return value


def default_from_schema(value: Any, schema: Mapping[str, Any] | None) -> Any:
    """``value`` with the schema's ``default``s filled in where fields are absent (a new object).

    A ``null`` of a non-nullable field with a default is defaulted too, as since Kubernetes 1.20.
    """
    if schema is None:
        return value
    if isinstance(value, dict):
        result = dict(value)
        for key, prop in _properties(schema).items():
            if "default" in prop and (
                key not in result or (result[key] is None and not prop.get("nullable"))
            ):
                result[key] = copy.deepcopy(prop["default"])
            if key in result:
                result[key] = default_from_schema(result[key], prop)
        additional = schema.get("additionalProperties")
        if isinstance(additional, Mapping):
            for key in set(result) - set(_properties(schema)):
                result[key] = default_from_schema(result[key], additional)
        return result
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            return [default_from_schema(item, items) for item in value]
    return value


def validate_against_schema(
    value: Any, schema: Mapping[str, Any] | None, path: str = ""
) -> list[Cause]:
    """The causes a real server gives for ``value`` against a structural schema.

    Checks ``type`` (``x-kubernetes-int-or-string`` honoured), ``nullable``, ``required``,
    ``enum``, numeric bounds, string length and ``pattern``, and list length, at every depth.
    ``path`` is the field path of ``value`` (``spec.size``).
    """
    if schema is None:
        return []
    name = path or "<root>"
    expected = schema.get("type")
    if value is None:
        if expected and not schema.get("nullable"):
            return [type_invalid(path, "null", str(expected))]
        return []
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            actual = json_type_name(value)
            return [type_invalid(path, actual, "integer,string")]
    elif expected and not json_type_matches(value, str(expected)):
        return [type_invalid(path, json_type_name(value), str(expected))]
    causes: list[Cause] = []
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        causes.append(not_supported(path, _enum_repr(value), [_enum_repr(e) for e in enum]))
    causes += [invalid(path, _value_repr(value), f"{name} in body {problem}")
               for problem in _bound_problems(value, schema)]
    if isinstance(value, dict):
        for key in schema.get("required") or ():
            if key not in value:
                causes.append(required(_join(path, str(key))))
        props = _properties(schema)
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            child = props.get(key)
            if child is None and isinstance(additional, Mapping):
                child = additional
            if child is not None:
                causes += validate_against_schema(item, child, _join(path, key))
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index, item in enumerate(value):
                causes += validate_against_schema(item, items, f"{path}[{index}]")
    return causes


def list_type_causes(value: Any, schema: Mapping[str, Any] | None, path: str = "") -> list[Cause]:
    """The duplicates a real server refuses in lists the schema declares
    ``x-kubernetes-list-type: map`` (items equal in their ``x-kubernetes-list-map-keys``) or
    ``set`` (equal items), at every depth: one ``FieldValueDuplicate`` per repeated item, at
    its index, worded as kube-apiserver's (Go's ``%#v`` of the keys or the item)."""
    if schema is None or value is None:
        return []
    causes: list[Cause] = []
    if isinstance(value, dict):
        props = _properties(schema)
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            child = props.get(key)
            if child is None and isinstance(additional, Mapping):
                child = additional
            if isinstance(child, Mapping):
                causes += list_type_causes(item, child, _join(path, key))
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index, item in enumerate(value):
                causes += list_type_causes(item, items, f"{path}[{index}]")
        list_type = schema.get("x-kubernetes-list-type")
        keys = [str(k) for k in schema.get("x-kubernetes-list-map-keys") or ()]
        seen: list[Any] = []
        for index, item in enumerate(value):
            if list_type == "map" and keys and isinstance(item, dict):
                identity: Any = {k: item[k] for k in keys if k in item}
                shown = "map[string]interface {}{" + ", ".join(
                    f"{go_quote(k)}:{_go_value(v)}" for k, v in sorted(identity.items())) + "}"
            elif list_type == "set":
                identity, shown = item, _go_value(item)
            else:
                continue
            if identity in seen:
                causes.append({"reason": "FieldValueDuplicate", "field": f"{path}[{index}]",
                               "message": f"Duplicate value: {shown}"})
            else:
                seen.append(identity)
    return causes


def _go_value(value: Any) -> str:
    """Go's ``%#v`` of a scalar of decoded JSON (strings quoted, numbers and booleans bare)."""
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return json.dumps(value)


def _value_repr(value: Any) -> str:
    # Go's %v of the value in "Invalid value: ...": strings quoted, numbers bare.
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, list):
        return str(len(value))
    return json.dumps(value)


def _bound_problems(value: Any, schema: Mapping[str, Any]) -> list[str]:
    """kube-openapi's wording for each violated bound of ``value``."""
    problems = []
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        minimum, maximum = schema.get("minimum"), schema.get("maximum")
        if minimum is not None:
            if schema.get("exclusiveMinimum") and value <= minimum:
                problems.append(f"should be greater than {_number(minimum)}")
            elif value < minimum:
                problems.append(f"should be greater than or equal to {_number(minimum)}")
        if maximum is not None:
            if schema.get("exclusiveMaximum") and value >= maximum:
                problems.append(f"should be less than {_number(maximum)}")
            elif value > maximum:
                problems.append(f"should be less than or equal to {_number(maximum)}")
    if isinstance(value, str):
        if schema.get("minLength") is not None and len(value) < schema["minLength"]:
            problems.append(f"should be at least {schema['minLength']} chars long")
        if schema.get("maxLength") is not None and len(value) > schema["maxLength"]:
            problems.append(f"should be at most {schema['maxLength']} chars long")
        pattern = schema.get("pattern")
        if pattern is not None and not _pattern_matches(str(pattern), value):
            problems.append(f"should match '{pattern}'")
    if isinstance(value, list):
        if schema.get("minItems") is not None and len(value) < schema["minItems"]:
            problems.append(f"should have at least {schema['minItems']} items")
        if schema.get("maxItems") is not None and len(value) > schema["maxItems"]:
            problems.append(f"should have at most {schema['maxItems']} items")
    return problems


def _number(bound: Any) -> str:
    return str(int(bound)) if isinstance(bound, float) and bound.is_integer() else str(bound)


def _pattern_matches(pattern: str, value: str) -> bool:
    try:
        return re.search(pattern, value) is not None
    except re.error:  # an ECMA-262 construct Python does not know: not enforced
        return True


def _enum_repr(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def list_map_keys(schema: Mapping[str, Any] | None) -> ListMapKeys:
    """Where the schema declares ``x-kubernetes-list-type: map``: path -> list-map keys.

    Paths are tuples of field names, ``"*"`` standing for every item of a list or value of a
    map: ``("spec", "ports")`` -> ``("name",)``; ``("spec", "groups", "*", "rules")`` -> ...
    """
    found: ListMapKeys = {}

    def walk(node: Mapping[str, Any], path: tuple[str, ...]) -> None:
        if node.get("x-kubernetes-list-type") == "map" and node.get("x-kubernetes-list-map-keys"):
            found[path] = tuple(str(k) for k in node["x-kubernetes-list-map-keys"])
        for key, child in _properties(node).items():
            if isinstance(child, Mapping):
                walk(child, (*path, str(key)))
        for key in ("items", "additionalProperties"):
            child = node.get(key)
            if isinstance(child, Mapping):
                walk(child, (*path, _ITEMS))

    if schema is not None:
        walk(schema, ())
    return found


# --- custom resources ------------------------------------------------------------------------


class CustomResourceStrategy(KindStrategy):
    """The behaviour of one served version of a custom resource.

    Create and update: prune unknown fields, fill schema defaults, validate against the schema.
    With a status subresource the main resource ignores ``status`` and generation follows every
    change but metadata and status; without one, status changes bump generation too.
    """

    def __init__(self, resource_type: ResourceType, *, schema: Mapping[str, Any] | None) -> None:
        super().__init__(resource_type)
        self.schema: Mapping[str, Any] | None = schema
        self._list_map_keys = list_map_keys(schema)

    @property
    def has_status_subresource(self) -> bool:
        """Whether the CRD version declares ``subresources.status``."""
        return "status" in self.resource_type.subresources

    def list_map_keys(self) -> Mapping[tuple[str, ...], tuple[str, ...]]:
        """The schema's list-map keys by field path (see ``list_map_keys``)."""
        return self._list_map_keys

    def unknown_fields(self, obj: Mapping[str, Any]) -> list[str]:
        """The paths of the fields pruning would drop (none without a schema)."""
        dropped: list[str] = []
        if self.schema is not None:
            prune(obj, self.schema, root=True, dropped=dropped)
        return dropped

    def _structural(self, obj: dict[str, Any]) -> None:
        # In place, and with the same metadata dict: the caller may hold on to it.
        metadata = obj.get("metadata")
        shaped = default_from_schema(prune(obj, self.schema, root=True), self.schema)
        obj.clear()
        obj.update(shaped)
        if metadata is not None:
            obj["metadata"] = metadata

    def prepare_create(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        """Decode metadata, drop ``status`` (status subresource), prune and default."""
        _defaulting.decode_metadata(obj)
        if self.has_status_subresource:
            obj.pop("status", None)
        self._structural(obj)

    def validate_create(self, obj: dict[str, Any]) -> None:
        """Name (DNS-1123 subdomain), schema and its CEL rules."""
        causes = (
            _validate_name(obj, dns1123_subdomain) + validate_metadata(obj)
            + self._schema_causes(obj)
        )
        if not causes:
            causes = self._rule_causes(obj, None)
        if causes:
            raise Invalid(causes)

    def _schema_causes(self, obj: Mapping[str, Any]) -> list[Cause]:
        body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
        schema = self.schema
        if schema is not None:
            schema = {**schema, "properties": {
                k: v for k, v in _properties(schema).items()
                if k not in ("apiVersion", "kind", "metadata")
            }}
        return validate_against_schema(body, schema) + list_type_causes(body, schema)

    def _rule_causes(self, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        """The CEL rules ``obj`` breaks (``_cel``), spec and status alike."""
        if self.schema is None:
            return []
        causes: list[Cause] = []
        for key in ("spec", "status"):
            child = _properties(self.schema).get(key)
            if child is None or obj.get(key) is None:
                continue
            if old is None or old.get(key) is None:
                causes += _cel.rule_causes(child, obj[key], path=key)
            else:
                causes += _cel.rule_causes(child, obj[key], old[key], path=key)
        return causes

    def prepare_update(
        self, old: Mapping[str, Any], new: dict[str, Any], ctx: ServerContext
    ) -> None:
        """Decode metadata, keep the stored status (status subresource) and creationTimestamp;
        prune, default."""
        _defaulting.decode_metadata(new)
        _defaulting.keep_server_fields(
            old, new, status_subresource=self.has_status_subresource
        )
        self._structural(new)

    def validate_update(self, old: Mapping[str, Any], new: dict[str, Any]) -> None:
        """``metadata.uid``, the schema and its CEL rules (transition rules against ``old``)."""
        causes = (
            validate_uid_update(old, new) + validate_metadata(new) + self._schema_causes(new)
        )
        if not causes:
            causes = self._rule_causes(new, old)
        if causes:
            raise Invalid(causes)

    def prepare_status_update(self, old: Mapping[str, Any], new: dict[str, Any]) -> None:
        """Through ``/status``: keep everything but ``status``; prune and default it."""
        _defaulting.keep_all_but_status(old, new)
        self._structural(new)

    def spec_changed(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        """Any change outside ``metadata`` (and ``status``, with a status subresource)."""
        ignored = {"metadata", "status"} if self.has_status_subresource else {"metadata"}
        return {k: v for k, v in old.items() if k not in ignored} != {
            k: v for k, v in new.items() if k not in ignored
        }


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
