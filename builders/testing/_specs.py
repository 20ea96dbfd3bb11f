"""Hypothesis strategies of typed spec instances, drawn from the spec class itself.

``spec_instances(SpecClass)`` draws instances that satisfy every declared constraint (pattern,
lengths, ranges, item counts, enums), with optional blocks present or absent and defaulted fields
left out or set; ``to_spec_dict`` of one is a spec the generated CRD accepts. Patterns are
searched as the API server does (no multi-line ``$``: strings with a newline are left out).
"""

from __future__ import annotations

import re
import string
from typing import Any, TypeVar

import attrs
from hypothesis import strategies as st

from builders._errors import UnsupportedSpecTypeError
from builders._specs import FieldInfo, constraint_problem, fields_of, unwrap

__all__ = ["spec_instances"]

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
        items = st.lists(_value(args[0], info, depth), min_size=info.min_items or 0,
                         max_size=info.max_items if info.max_items is not None else 3)
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
        (required if f.default is attrs.NOTHING else optional)[f.attribute] = strategy
    return st.fixed_dictionaries(required, optional=optional).map(lambda kw: cls(**kw))
