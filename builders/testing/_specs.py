"""Hypothesis strategies of typed spec instances, drawn from the spec class itself.

``spec_instances(SpecClass)`` draws instances that satisfy every declared constraint (pattern,
lengths, ranges, item counts, enums, the unique keys of a list-map, CEL rules), with optional
blocks present or absent and defaulted fields left out or set; ``to_spec_dict`` of one is a spec
the generated CRD accepts. Patterns are searched as the API server does (no multi-line ``$``:
strings with a newline are left out). A field's CEL rules filter what is drawn for it: up to
``RULE_TRIES`` values are drawn, and a rule none of them satisfies raises
``UnsupportedSpecTypeError`` naming the field and the rule (narrow the field's other
constraints, or its rule).
"""

from __future__ import annotations

import re
import string
from typing import Any, TypeVar

import attrs
from hypothesis import reject
from hypothesis import strategies as st

from builders._errors import UnsupportedSpecTypeError
from builders._specs import (
    CelRule,
    FieldInfo,
    constraint_problem,
    fields_of,
    json_value,
    list_map_key,
    unwrap,
)

__all__ = ["RULE_TRIES", "spec_instances"]

RULE_TRIES = 100
"""How many values ``spec_instances`` draws for a field with CEL rules, none of them meeting
them, before it gives up with ``UnsupportedSpecTypeError`` (across examples; once a value met
them, an example whose values do not is only rejected)."""
_TRIES_PER_EXAMPLE = 10

T = TypeVar("T")
_JSON_SCALARS = st.one_of(
    st.booleans(), st.integers(min_value=-(2**31), max_value=2**31),
    st.text(string.ascii_letters + string.digits + " -_.", max_size=8),
)


def _string(info: FieldInfo) -> st.SearchStrategy[str]:
    if info.pattern is None:
        return st.text(min_size=info.min_length or 0,
                       max_size=info.max_length if info.max_length is not None else 16)
    pattern = re.compile(info.pattern)
    return st.from_regex(pattern).filter(
        lambda s: "\n" not in s and constraint_problem(info, s) is None)


def _number(info: FieldInfo, *, integer: bool) -> st.SearchStrategy[Any]:
    if integer:
        low = int(info.minimum) if info.minimum is not None else -(2**53)
        high = int(info.maximum) if info.maximum is not None else 2**53
        return st.integers(min_value=low, max_value=high)
    return st.floats(min_value=info.minimum, max_value=info.maximum, allow_nan=False,
                     allow_infinity=False, width=64)


def _value(tp: Any, info: FieldInfo, depth: int) -> st.SearchStrategy[Any]:
    shape, args = unwrap(tp)
    if shape == "optional":
        return st.none() | _value(args[0], info, depth)
    if shape == "spec":
        return spec_instances(args[0], _depth=depth + 1)
    if shape in ("list", "tuple"):
        map_keys = info.list_map_keys
        items = st.lists(_value(args[0], info, depth), min_size=info.min_items or 0,
                         max_size=info.max_items if info.max_items is not None else 3,
                         unique_by=(lambda item: list_map_key(item, map_keys)) if map_keys
                         else None)
        return items if shape == "list" else items.map(tuple)
    if shape == "dict":
        keys = st.text(string.ascii_letters + string.digits + "-_.", min_size=1, max_size=12)
        return st.dictionaries(keys, _value(args[0], FieldInfo(), depth), max_size=3)
    if shape == "any":
        keys = st.text(string.ascii_lowercase, min_size=1, max_size=8)
        return st.dictionaries(keys, _JSON_SCALARS | st.lists(_JSON_SCALARS, max_size=2),
                               max_size=3)
    if shape == "literal":
        return st.sampled_from(args)
    if shape == "enum":
        return st.sampled_from(list(args[0]))
    if shape == "str":
        return _string(info)
    if shape == "bool":
        return st.booleans()
    return _number(info, integer=shape == "int")


def spec_instances(cls: type[T], *, _depth: int = 0) -> st.SearchStrategy[T]:
    """Valid instances of spec class ``cls``: every field drawn within its constraints, fields
    with a default sometimes left to it."""
    if _depth > 8:
        raise UnsupportedSpecTypeError(spec=cls.__name__, field="",
                                       reason="nests more than 8 levels (a recursive class?)")
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for f in fields_of(cls):
        strategy = _value(f.type, f.info, _depth)
        if f.info.rules:
            strategy = _satisfying(strategy, f.info.rules, where=f"{cls.__name__}.{f.attribute}")
        (required if f.default is attrs.NOTHING else optional)[f.attribute] = strategy
    return st.fixed_dictionaries(required, optional=optional).map(lambda kw: cls(**kw))


def _satisfying(strategy: st.SearchStrategy[Any], rules: tuple[CelRule, ...], *,
                where: str) -> st.SearchStrategy[Any]:
    """Values of ``strategy`` for which every CEL rule holds (None, an absent field, is not
    checked); ``UnsupportedSpecTypeError`` after ``RULE_TRIES`` values that all break one."""
    from builders.testing._cel import prepare, rule_problem

    for rule in rules:
        prepare(rule.rule)

    def broken(value: Any) -> tuple[CelRule, str] | None:
        if value is None:
            return None
        as_json = json_value(value, server_defaults_only=False)
        for rule in rules:
            problem = rule_problem(rule.rule, as_json)
            if problem is not None:
                return rule, problem
        return None

    tried = {"values": 0, "held": False}  # across examples: has the rule ever held?

    @st.composite
    def draw(data: st.DrawFn) -> Any:
        last: tuple[CelRule, str] | None = None
        for _ in range(_TRIES_PER_EXAMPLE):
            value = data(strategy)
            last = broken(value)
            if last is None:
                tried["held"] = True
                return value
            tried["values"] += 1
        assert last is not None
        if not tried["held"] and tried["values"] >= RULE_TRIES:
            rule, problem = last
            raise UnsupportedSpecTypeError(
                spec=where.partition(".")[0], field=where.partition(".")[2],
                reason=f"no value drawn in {tried['values']} tries satisfies the CEL rule "
                       f"{rule.rule!r} (last: {problem}); narrow the field's constraints so "
                       "the rule can hold, or fix the rule")
        reject()  # this example only: the next one draws afresh

    return draw()
