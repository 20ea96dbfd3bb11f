"""CustomResourceDefinitions generated from spec classes: what kubebuilder's markers give Go users.

:func:`schema_for` turns a spec class (``builders._specs``) into a structural OpenAPI v3 schema:
types, ``required``, ``default`` (only for defaults declared server-side), ``pattern``,
``minimum``/``maximum``, lengths, item counts, ``enum`` and descriptions (the field's, else its
class docstring's first paragraph); ``x-kubernetes-preserve-unknown-fields`` appears only where
the class says ``Any``. :func:`crd_for` wraps it into an ``apiextensions.k8s.io/v1`` CRD with
names, printer columns (``builders._versions.PrinterColumn``: a column belongs to a version, so
that module owns it and this one reads it) and the status subresource. Pure: the result is a
dict to install with any client.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any, Literal

import attrs

from builders._errors import UnsupportedSpecTypeError
from builders._specs import FieldInfo, constraint_problem, fields_of, json_value, unwrap
from builders._versions import PrinterColumn, Versions

__all__ = ["crd_for", "schema_for"]

_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}


def _doc(cls: type) -> str | None:
    doc = cls.__doc__ and inspect.cleandoc(cls.__doc__)
    return " ".join(doc.split("\n\n")[0].split()) if doc else None


def _constraints(info: FieldInfo, schema: dict[str, Any]) -> None:
    if info.rules:
        schema["x-kubernetes-validations"] = [rule.to_dict() for rule in info.rules]
    target = schema["items"] if schema.get("type") == "array" else schema
    if schema.get("type") == "array":
        if info.min_items is not None:
            schema["minItems"] = info.min_items
        if info.max_items is not None:
            schema["maxItems"] = info.max_items
    kind = target.get("type")
    if kind == "string":
        for key, value in (("pattern", info.pattern), ("minLength", info.min_length),
                           ("maxLength", info.max_length)):
            if value is not None:
                target[key] = value
    elif kind in ("integer", "number"):
        for key, bound in (("minimum", info.minimum), ("maximum", info.maximum)):
            if bound is not None:
                target[key] = int(bound) if kind == "integer" else bound


_SCALARS = ("string", "integer", "number", "boolean")


def _list_map(schema: dict[str, Any], keys: tuple[str, ...], *, spec: str, field: str) -> None:
    """``schema`` (a list) as a list-map keyed by ``keys``; UnsupportedSpecTypeError unless its
    items are objects whose keys are scalar fields, each required or defaulted (what
    kube-apiserver asks of ``x-kubernetes-list-map-keys``)."""
    items = schema.get("items") or {}
    if schema.get("type") != "array" or items.get("type") != "object" or "properties" not in items:
        raise UnsupportedSpecTypeError(
            spec=spec, field=field, reason="list_map_keys needs a list of spec objects")
    for key in keys:
        prop = items["properties"].get(key)
        if prop is None:
            raise UnsupportedSpecTypeError(
                spec=spec, field=field, reason=f"list-map key {key!r} is not a field of the items "
                f"(their fields: {', '.join(items['properties'])})")
        if prop.get("type") not in _SCALARS:
            raise UnsupportedSpecTypeError(
                spec=spec, field=field, reason=f"list-map key {key!r} must be a string, number or "
                f"boolean, not {prop.get('type')}")
        if key not in (items.get("required") or ()) and "default" not in prop:
            raise UnsupportedSpecTypeError(
                spec=spec, field=field,
                reason=f"list-map key {key!r} must be required or have a (server) default")
    schema["x-kubernetes-list-type"] = "map"
    schema["x-kubernetes-list-map-keys"] = list(keys)


def _type_schema(tp: Any, *, spec: str, field: str) -> dict[str, Any]:
    shape, args = unwrap(tp, spec=spec, field=field)
    if shape == "optional":
        return _type_schema(args[0], spec=spec, field=field)
    if shape == "spec":
        return _object_schema(args[0])
    if shape in ("list", "tuple"):
        return {"type": "array", "items": _type_schema(args[0], spec=spec, field=f"{field}[]")}
    if shape == "dict":
        return {"type": "object",
                "additionalProperties": _type_schema(args[0], spec=spec, field=f"{field}{{}}")}
    if shape == "any":
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if shape in ("literal", "enum"):
        values = list(args) if shape == "literal" else [m.value for m in args[0]]
        kinds = {type(v) for v in values}
        if len(kinds) != 1 or not kinds <= {str, int}:
            raise UnsupportedSpecTypeError(spec=spec, field=field,
                                           reason="enum values must be all strings or all integers")
        return {"type": "string" if kinds == {str} else "integer", "enum": values}
    return {"type": _TYPES[shape]}


def schema_for(cls: type) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of spec class ``cls`` (an object schema)."""
    try:
        return _object_schema(cls)
    except RecursionError:  # a structural schema cannot refer to itself
        raise UnsupportedSpecTypeError(spec=cls.__name__, field="",
                                       reason="the class contains itself") from None


def _object_schema(cls: type) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for f in fields_of(cls):
        schema = _type_schema(f.type, spec=cls.__name__, field=f.attribute)
        _constraints(f.info, schema)
        if f.info.list_map_keys:
            _list_map(schema, f.info.list_map_keys, spec=cls.__name__, field=f.attribute)
        shape, args = unwrap(f.type)
        inner = args[0] if shape == "optional" else f.type
        description = f.info.description or (
            _doc(inner) if isinstance(inner, type) and attrs.has(inner) else None)
        if description:
            schema["description"] = description
        else:
            schema.pop("description", None)
        if f.required and shape != "optional":
            required.append(f.json_name)
        elif f.default is not attrs.NOTHING and f.default is not None and f.info.server_default:
            schema["default"] = _default(cls, f.attribute, f.info, f.default)
        properties[f.json_name] = schema
    out: dict[str, Any] = {"type": "object"}
    doc = _doc(cls)
    if doc:
        out["description"] = doc
    out["properties"] = properties
    if required:
        out["required"] = required
    return out


def _default(cls: type, attribute: str, info: FieldInfo, value: Any) -> Any:
    problem = constraint_problem(info, value)
    if problem is not None:  # the API server refuses a CRD whose default is invalid
        raise UnsupportedSpecTypeError(spec=cls.__name__, field=attribute,
                                       reason=f"default {value!r}: {problem}")
    return json_value(value)


def _plural(kind: str) -> str:
    word = kind.lower()
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and word[-2:-1] not in tuple("aeiou"):
        return word[:-1] + "ies"
    return word + "s"


def _version_entry(
    *,
    name: str,
    spec: type,
    status: type | None,
    status_subresource: bool,
    printer_columns: Sequence[PrinterColumn],
    storage: bool,
    served: bool = True,
    deprecated: bool = False,
    deprecation_warning: str | None = None,
) -> dict[str, Any]:
    status_schema: dict[str, Any] = (
        schema_for(status) if status is not None else {"type": "object"})
    status_schema["x-kubernetes-preserve-unknown-fields"] = True
    entry: dict[str, Any] = {"name": name, "served": served, "storage": storage}
    if deprecated:
        entry["deprecated"] = True
        if deprecation_warning:
            entry["deprecationWarning"] = deprecation_warning
    entry["schema"] = {"openAPIV3Schema": {
        "type": "object",
        "properties": {"spec": schema_for(spec), "status": status_schema},
    }}
    if status_subresource:
        entry["subresources"] = {"status": {}}
    if printer_columns:
        columns = [c.to_dict() for c in printer_columns]
        if not any(c.name == "Age" for c in printer_columns):
            columns.append(PrinterColumn(
                name="Age", json_path=".metadata.creationTimestamp", type="date").to_dict())
        entry["additionalPrinterColumns"] = columns
    return entry


def crd_for(
    spec: type | Versions,
    *,
    group: str | None = None,
    kind: str | None = None,
    version: str | None = None,
    plural: str | None = None,
    short_names: Sequence[str] = (),
    scope: Literal["Namespaced", "Cluster"] = "Namespaced",
    status: type | None = None,
    status_subresource: bool = True,
    printer_columns: Sequence[PrinterColumn] = (),
) -> dict[str, Any]:
    """The ``apiextensions.k8s.io/v1`` CRD of kind ``kind`` whose ``spec`` is spec class ``spec``.

    One served and stored ``version``; ``plural`` defaults to the English plural of the kind in
    lower case. ``status`` is the status's spec class: its schema keeps unknown fields too, as
    the toolkit writes its own (``conditions``, ``observedGeneration``, ``lastReconcileTime``)
    there; without it the status is an open object. ``status_subresource`` adds the status
    subresource (the toolkit writes status through it). ``printer_columns`` are the
    ``kubectl get`` columns, followed by ``Age`` unless one is named so.

    With a :class:`~builders.specs.Versions` instead of a class, ``group``, ``kind`` and the
    versions come from it (``version`` must be left out): every version is emitted with its
    own schema, flags and columns (``printer_columns`` for those that declare none), the hub
    is the storage version, and the conversion strategy is ``None`` until the operator injects
    its webhook (``reconciler.webhooks``).
    """
    if isinstance(spec, Versions):
        if version is not None or (group not in (None, spec.group)) or (
                kind not in (None, spec.kind)):
            raise UnsupportedSpecTypeError(
                spec=spec.kind, field="version",
                reason="with Versions, the group, kind and versions come from it")
        group, kind = spec.group, spec.kind
        entries = [_version_entry(
            name=v.name, spec=v.spec, status=v.status or status,
            status_subresource=status_subresource,
            printer_columns=v.printer_columns or printer_columns, storage=v.name == spec.hub,
            served=v.served, deprecated=v.deprecated, deprecation_warning=v.deprecation_warning,
        ) for v in spec.versions]
    else:
        if group is None or kind is None or version is None:
            raise UnsupportedSpecTypeError(spec=spec.__name__, field="",
                                           reason="crd_for needs group, kind and version")
        entries = [_version_entry(
            name=version, spec=spec, status=status, status_subresource=status_subresource,
            printer_columns=printer_columns, storage=True,
        )]
    plural = plural or _plural(kind)
    names: dict[str, Any] = {
        "plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List",
    }
    if short_names:
        names["shortNames"] = list(short_names)
    crd_spec: dict[str, Any] = {"group": group, "scope": scope, "names": names,
                                "versions": entries}
    if len(entries) > 1:
        crd_spec["conversion"] = {"strategy": "None"}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": crd_spec,
    }
