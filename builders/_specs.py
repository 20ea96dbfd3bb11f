"""Typed parent specs: an attrs class declares a spec; values convert to and from its JSON dict.

A spec class is a frozen attrs class whose fields are ``str``, ``int``, ``float``, ``bool``,
``list[T]``/``tuple[T, ...]``, ``dict[str, T]``, ``Any`` (kept as sent), ``Literal[...]``, an
``enum.Enum``, another spec class, or ``T | None`` (an optional block: None means absent).
:func:`spec_field` attaches what JSON Schema can say about a field (description, pattern, range,
lengths, item counts, its JSON name) to the attrs field's metadata. This module is the one
reading of that declaration: converting a parent's ``spec`` dict into an instance
(:func:`spec_of`, which validates and names the field of the parent that fails), back
(:func:`to_spec_dict`), and the type analysis that ``builders._crds`` turns into a structural
schema. Pure: no cluster, no I/O.
"""

from __future__ import annotations

import copy
import enum
import functools
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import attrs

from builders._errors import SpecFieldError, UnsupportedSpecTypeError

__all__ = [
    "CelRule", "FieldInfo", "fields_of", "json_value", "spec_field", "spec_of", "to_spec_dict",
    "unwrap",
]

T = TypeVar("T")
_META_KEY = "optk.dev/spec-field"


@attrs.frozen(kw_only=True)
class CelRule:
    """A CEL validation rule of a field (``x-kubernetes-validations``), evaluated by the API server.

    ``rule`` sees the field's value as ``self`` (and, in a transition rule, the stored value as
    ``oldSelf``: such a rule runs only on updates where both exist); ``message`` is what the
    refusal says. Honoured by kube-apiserver 1.25 and later (beta, on by default) and by the
    embedded API server; ``spec_of`` does not evaluate it (see docs/specs.md).
    """

    rule: str
    message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The rule as the CRD schema holds it."""
        out = {"rule": self.rule}
        if self.message:
            out["message"] = self.message
        return out


@attrs.frozen(kw_only=True)
class FieldInfo:
    """What :func:`spec_field` declared about one field (the schema-side facts)."""

    description: str | None = None
    pattern: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    min_items: int | None = None
    max_items: int | None = None
    json_name: str | None = None
    server_default: bool = True
    rules: tuple[CelRule, ...] = ()
    list_map_keys: tuple[str, ...] = ()


def spec_field(
    *,
    default: Any = attrs.NOTHING,
    factory: Callable[[], Any] | None = None,
    description: str | None = None,
    pattern: str | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    min_length: int | None = None,
    max_length: int | None = None,
    min_items: int | None = None,
    max_items: int | None = None,
    name: str | None = None,
    server_default: bool = True,
    rules: Sequence[CelRule] = (),
    list_map_keys: Sequence[str] = (),
) -> Any:
    """An attrs field of a spec class, with what its CRD schema says about it.

    ``default``/``factory`` as in attrs (a field without either is required); the default is
    also the schema's ``default`` (the API server stores it in the parent) unless
    ``server_default=False``, which keeps it the operator's: filled in by :func:`spec_of` only, so
    a later release's default reaches existing parents. ``pattern`` (a regular expression,
    searched as the API server does), ``min_length``/``max_length`` (characters) and
    ``minimum``/``maximum`` (inclusive) constrain a string or number, or each item of a list of
    them; ``min_items``/``max_items`` a list's length. ``name`` is the JSON key (default: the
    attribute name in camelCase). ``rules`` are CEL rules the API server checks (the
    field's ``x-kubernetes-validations``). ``list_map_keys`` (the JSON names of fields of the
    items, e.g. ``("name",)``) makes a list of spec objects a map keyed by them
    (``x-kubernetes-list-type: map``): no two items may share their keys, and patches merge
    items by key. Values are checked on construction too.
    """
    if factory is not None and default is not attrs.NOTHING:
        raise TypeError("spec_field: give default or factory, not both")
    if isinstance(list_map_keys, str) or not all(
            isinstance(k, str) and k for k in list_map_keys):
        raise TypeError("spec_field: list_map_keys is a sequence of field names, "
                        f"got {list_map_keys!r}")
    info = FieldInfo(
        description=description, pattern=pattern, minimum=minimum, maximum=maximum,
        min_length=min_length, max_length=max_length, min_items=min_items, max_items=max_items,
        json_name=name, server_default=server_default, rules=tuple(rules),
        list_map_keys=tuple(list_map_keys),
    )
    if pattern is not None:
        re.compile(pattern)  # a bad pattern fails where it is declared
    validator = _field_validator(info)
    if factory is not None:
        return attrs.field(factory=factory, metadata={_META_KEY: info}, validator=validator)
    return attrs.field(default=default, metadata={_META_KEY: info}, validator=validator)


def _field_validator(info: FieldInfo) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        problem = constraint_problem(info, value)
        if problem is not None:
            raise SpecFieldError(
                parent=None, field=f"{type(instance).__name__}.{attribute.name}", value=value,
                reason=problem,
            )
    return check


def _camel(name: str) -> str:
    head, *rest = name.strip("_").split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@attrs.frozen(kw_only=True)
class SpecField:
    """One field of a spec class as the toolkit reads it."""

    attribute: str
    json_name: str
    type: Any
    info: FieldInfo
    required: bool
    default: Any  # attrs.NOTHING when required


def fields_of(cls: type) -> tuple[SpecField, ...]:
    """The fields of spec class ``cls``, types resolved (once per class, cached); raises
    UnsupportedSpecTypeError."""
    return _fields_of(cls)


@functools.cache
def _fields_of(cls: Any) -> tuple[SpecField, ...]:
    if not (isinstance(cls, type) and attrs.has(cls)):
        raise UnsupportedSpecTypeError(spec=repr(cls), field="", reason="not an attrs class")
    try:
        hints = typing.get_type_hints(cls)
    except Exception as err:  # an unresolvable annotation: say which class
        raise UnsupportedSpecTypeError(spec=cls.__name__, field="", reason=str(err)) from err
    found = []
    for a in attrs.fields(cls):
        info = a.metadata.get(_META_KEY) or FieldInfo()
        default = a.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = default.factory() if not default.takes_self else attrs.NOTHING
        found.append(SpecField(
            attribute=a.name, json_name=info.json_name or _camel(a.name), type=hints[a.name],
            info=info, required=a.default is attrs.NOTHING, default=default,
        ))
    return tuple(found)


Shape = Literal["optional", "spec", "list", "tuple", "dict", "literal", "enum", "str", "int",
                "float", "bool", "any"]


def unwrap(tp: Any, *, spec: str = "", field: str = "") -> tuple[Shape, tuple[Any, ...]]:
    """The shape of annotation ``tp`` and its arguments (the item type, the literal values...)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        rest = tuple(a for a in args if a is not type(None))
        if len(rest) == 1 and len(args) == 2:
            return "optional", rest
    elif origin is Literal:
        if args and all(isinstance(v, str | int) and not isinstance(v, bool) for v in args):
            return "literal", args
    elif origin is list and len(args) == 1:
        return "list", args
    elif origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return "tuple", args[:1]
    elif origin is dict and len(args) == 2 and args[0] is str:
        return ("any", ()) if args[1] is Any else ("dict", args[1:])
    elif tp is Any:
        return "any", ()
    elif isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "enum", (tp,)
    elif isinstance(tp, type) and attrs.has(tp):
        return "spec", (tp,)
    elif tp in (str, int, float, bool):
        return typing.cast(Shape, tp.__name__), ()
    raise UnsupportedSpecTypeError(spec=spec, field=field, reason=f"unsupported type {tp!r}")


def constraint_problem(info: FieldInfo, value: Any) -> str | None:
    """Why ``value`` breaks the field's declared constraints, or None."""
    if isinstance(value, list | tuple):
        if info.min_items is not None and len(value) < info.min_items:
            return f"fewer than {info.min_items} items"
        if info.max_items is not None and len(value) > info.max_items:
            return f"more than {info.max_items} items"
        if info.list_map_keys:
            seen = set()
            for index, item in enumerate(value):
                key = list_map_key(item, info.list_map_keys)
                if key in seen:
                    shown = ", ".join(f"{k}={v!r}" for k, v in zip(info.list_map_keys, key,
                                                                   strict=True))
                    return f"item {index} repeats the keys of another ({shown})"
                seen.add(key)
        for item in value:
            problem = constraint_problem(info, item)
            if problem is not None:
                return f"item {item!r}: {problem}"
        return None
    if isinstance(value, str):
        if info.min_length is not None and len(value) < info.min_length:
            return f"shorter than {info.min_length} characters"
        if info.max_length is not None and len(value) > info.max_length:
            return f"longer than {info.max_length} characters"
        if info.pattern is not None and re.search(info.pattern, value) is None:
            return f"does not match {info.pattern!r}"
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if info.minimum is not None and value < info.minimum:
            return f"below the minimum {info.minimum:g}"
        if info.maximum is not None and value > info.maximum:
            return f"above the maximum {info.maximum:g}"
    return None


def list_map_key(item: Any, keys: Sequence[str]) -> tuple[Any, ...]:
    """The values of ``keys`` (JSON names) of a list-map item, a spec instance or a dict (as
    JSON: an enum by its value); None for a key the item lacks."""
    if attrs.has(type(item)):
        by_json = {f.json_name: f.attribute for f in fields_of(type(item))}
        values = [getattr(item, by_json[k]) if k in by_json else None for k in keys]
    elif isinstance(item, Mapping):
        values = [item.get(k) for k in keys]
    else:
        values = [None for _ in keys]
    plain = [v.value if isinstance(v, enum.Enum) else v for v in values]
    return tuple(v if isinstance(v, str | int | float | bool | None) else repr(v) for v in plain)


class _Converter:
    """Converts a JSON value to a spec value, raising SpecFieldError with the full path."""

    def __init__(self, parent: str | None) -> None:
        self.parent = parent

    def fail(self, path: str, value: Any, reason: str) -> SpecFieldError:
        return SpecFieldError(parent=self.parent, field=path, value=value, reason=reason)

    def value(self, tp: Any, value: Any, path: str) -> Any:
        shape, args = unwrap(tp, field=path)
        if shape == "optional":
            return None if value is None else self.value(args[0], value, path)
        if shape == "spec":
            return self.spec(args[0], value, path)
        if shape in ("list", "tuple"):
            if not isinstance(value, list | tuple):
                raise self.fail(path, value, "expected a list")
            items = [self.value(args[0], v, f"{path}[{i}]") for i, v in enumerate(value)]
            return items if shape == "list" else tuple(items)
        if shape == "dict":
            if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
                raise self.fail(path, value, "expected an object with string keys")
            return {k: self.value(args[0], v, f"{path}[{k!r}]") for k, v in value.items()}
        if shape == "any":
            return copy.deepcopy(value)
        if shape == "literal":
            if value not in args or isinstance(value, bool):
                raise self.fail(path, value, f"not one of {list(args)}")
            return value
        if shape == "enum":
            try:
                return args[0](value)
            except ValueError:
                allowed = [m.value for m in args[0]]
                raise self.fail(path, value, f"not one of {allowed}") from None
        return self.scalar(shape, value, path)

    def scalar(self, shape: Shape, value: Any, path: str) -> Any:
        if shape == "bool" and isinstance(value, bool):
            return value
        if shape == "str" and isinstance(value, str):
            return value
        if shape == "int" and isinstance(value, int) and not isinstance(value, bool):
            return value
        if shape == "float" and isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        names = {"bool": "a boolean", "str": "a string", "int": "an integer", "float": "a number"}
        raise self.fail(path, value, f"expected {names[shape]}")

    def spec(self, cls: type[T], value: Any, path: str) -> T:
        if not isinstance(value, Mapping):
            raise self.fail(path, value, "expected an object")
        fields = fields_of(cls)
        known = {f.json_name for f in fields}
        for key in value:
            if key not in known:
                raise self.fail(f"{path}.{key}", value[key], f"unknown field of {cls.__name__}")
        kwargs: dict[str, Any] = {}
        for f in fields:
            where = f"{path}.{f.json_name}"
            raw = value.get(f.json_name)
            if raw is None:
                if f.required and unwrap(f.type, field=where)[0] != "optional":
                    raise self.fail(where, raw, "required")
                if f.required:
                    kwargs[f.attribute] = None
                continue
            converted = self.value(f.type, raw, where)
            problem = constraint_problem(f.info, converted)
            if problem is not None:
                raise self.fail(where, raw, problem)
            kwargs[f.attribute] = converted
        return cls(**kwargs)


def _describe(parent: Mapping[str, Any]) -> str:
    meta = parent.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p)
    return f"{parent.get('kind') or 'parent'} {name or '<unnamed>'}"


def spec_of(parent: Mapping[str, Any], cls: type[T], *, key: str = "spec") -> T:
    """The parent's ``spec`` (or ``key``) as an instance of spec class ``cls``, validated.

    Absent fields take the class defaults; ``null`` is absent; unknown fields, wrong types and
    broken constraints raise :class:`SpecFieldError` naming the parent and the field path (the
    API server prunes unknown fields and rejects the rest, so a live parent converts cleanly).
    """
    raw = parent.get(key)
    return _Converter(_describe(parent)).spec(cls, {} if raw is None else raw, key)


def from_spec_dict(cls: type[T], value: Mapping[str, Any], *, path: str = "spec") -> T:
    """``value`` (a spec dict, no parent around it) as an instance of ``cls``, validated."""
    return _Converter(None).spec(cls, value, path)


def to_spec_dict(
    spec: Any, *, server_defaults_only: bool = False, keep_operator_defaults: bool = True,
) -> dict[str, Any]:
    """The JSON dict of spec instance ``spec``: JSON names, None fields left out, enums as values.

    ``spec_of(parent, type(s))`` of a parent with this dict as its spec is ``s`` again.
    ``server_defaults_only`` leaves out fields declared ``server_default=False`` (what a schema
    default may hold); ``keep_operator_defaults=False`` leaves out such a field only while it
    holds its default (what a conversion writes, so that the operator's defaults stay its own).
    """
    if not attrs.has(type(spec)):
        raise UnsupportedSpecTypeError(spec=repr(type(spec)), field="", reason="not an attrs class")
    return typing.cast(dict[str, Any], _dump(spec, server_defaults_only, keep_operator_defaults))


def json_value(value: Any, *, server_defaults_only: bool = True) -> Any:
    """A value of a spec field as JSON: by default what a schema default holds (server defaults
    only); with ``server_defaults_only=False`` as :func:`to_spec_dict` writes it."""
    return _dump(value, server_defaults_only, True)


def _dump(value: Any, server_only: bool, keep_defaults: bool) -> Any:
    if attrs.has(type(value)):
        out = {}
        for f in fields_of(type(value)):
            item = getattr(value, f.attribute)
            if item is None or (server_only and not f.info.server_default):
                continue
            if not keep_defaults and not f.info.server_default and item == f.default:
                continue
            out[f.json_name] = _dump(item, server_only, keep_defaults)
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [_dump(v, server_only, keep_defaults) for v in value]
    if isinstance(value, Mapping):
        return {k: _dump(v, server_only, keep_defaults) for k, v in value.items()}
    return copy.deepcopy(value)
