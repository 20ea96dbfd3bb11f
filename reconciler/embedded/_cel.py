"""CEL validation rules of CRD schemas (``x-kubernetes-validations``), evaluated as kube-apiserver
1.25 evaluates them on a custom resource's create and update.

Each rule of a schema node is evaluated with the node's value as ``self``; a rule that names
``oldSelf`` (a transition rule) only on an update where the old object has a value at the same
path (through properties and map values; list items are not correlated, so their transition
rules are skipped). A rule that is false, or cannot be evaluated, gives a ``FieldValueInvalid``
cause with the rule's ``message`` (else ``failed rule: RULE``), as the real server words it.
The evaluator is ``cel-python`` (pure Python, the ``embedded`` extra); without it no rule is
evaluated (the known difference docs/embedded-apiserver.md names). Compiled programs are cached
by rule text. The boundary: ``_crds.CustomResourceStrategy`` calls :func:`rule_causes`; this
module knows nothing else of the server.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from objectmatcher._validation import Cause, invalid, json_type_name

__all__ = ["available", "rule_causes"]

_OLD = re.compile(r"\boldSelf\b")
_ABSENT = object()


@functools.cache
def available() -> bool:
    """Whether ``cel-python`` can be imported."""
    try:
        import celpy  # noqa: F401
    except ImportError:
        return False
    return True


@functools.lru_cache(maxsize=512)
def _program(rule: str) -> Any:
    import celpy

    environment = celpy.Environment()
    return environment.program(environment.compile(rule))


def _evaluate(rule: str, value: Any, old: Any) -> bool | str:
    """True when the rule holds; else False, or the evaluation error's text."""
    from celpy.adapter import json_to_cel

    activation = {"self": json_to_cel(value)}
    if old is not _ABSENT:
        activation["oldSelf"] = json_to_cel(old)
    try:
        result = _program(rule).evaluate(activation)
    except Exception as err:  # a rule that fails to compile or evaluate refuses, as it does
        return str(err)       # on a real server
    if isinstance(result, Exception):  # celpy returns CELEvalError values
        return str(result)
    return bool(result)


def rule_causes(schema: Mapping[str, Any] | None, new: Any, old: Any = _ABSENT, *,
                path: str = "") -> list[Cause]:
    """The causes of the rules ``new`` breaks under ``schema`` (``old``: the stored object of
    an update, absent on create)."""
    if schema is None or not available():
        return []
    return _walk(schema, new, old, path)


def _walk(schema: Mapping[str, Any], value: Any, old: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for entry in schema.get("x-kubernetes-validations") or ():
        rule = str(entry.get("rule") or "")
        if not rule or (_OLD.search(rule) and old is _ABSENT):
            continue
        verdict = _evaluate(rule, value, old)
        if verdict is True:
            continue
        detail = entry.get("message") or f"failed rule: {rule}"
        if verdict is not False:
            detail = f"{detail}: {verdict}"
        causes.append(invalid(path, f'"{json_type_name(value)}"', str(detail)))
    if isinstance(value, Mapping):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        old_map = old if isinstance(old, Mapping) else {}
        for key, item in value.items():
            child = properties.get(key) if key in properties else (
                extra if isinstance(extra, Mapping) else None)
            if child is None or item is None:
                continue
            where = f"{path}.{key}" if path else str(key)
            causes += _walk(child, item, old_map.get(key, _ABSENT), where)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            causes += _walk(schema["items"], item, _ABSENT, f"{path}[{index}]")
    return causes
