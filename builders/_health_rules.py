"""Health rules of one's own: pure functions, and JSONPath expressions over the object.

Why it exists: kstatus (``builders._health``) knows the built-in kinds and the generic
conditions; a custom resource whose readiness is a field of its own (``status.phase ==
'Bound'``, ``status.readyReplicas >= spec.replicas``) needs a rule its author writes, where the
children are composed. A :data:`HealthRule` is any pure function of the object returning a
:class:`~builders._health.Health`, a bool or a reason (:func:`as_health` reads all of them);
:func:`jsonpath_rule` makes one from a JSONPath expression (``jsonpath-ng``'s extended syntax,
filters included), checked when the rule is made so that a typo fails at import, not at
reconcile time.

Boundary: rules decide on one object; which rule applies to which child, and what the parent
makes of the verdicts, is the caller's (``reconciler._reconcile.readiness``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping
from typing import Any

from builders._errors import InvalidSpecError
from builders._health import Health, HealthStatus

__all__ = ["HealthRule", "as_health", "jsonpath_rule"]

KubeObject = Mapping[str, Any]
HealthRule = Callable[[KubeObject], "Health | bool | str | None"]
"""A pure rule over one object: a :class:`Health`, or ``True``/``None`` (Current), ``False``
(InProgress, "not ready") or a string (InProgress, the string says why)."""

_UNSET: Any = object()


def as_health(verdict: Health | bool | str | None) -> Health:
    """A rule's verdict as a :class:`Health` (see :data:`HealthRule` for what each value means)."""
    if isinstance(verdict, Health):
        return verdict
    if verdict is None or verdict is True:
        return Health.ok()
    if verdict is False:
        return Health.in_progress("not ready", "NotReady")
    return Health.in_progress(str(verdict), "NotReady")


def _parse(path: str) -> Any:
    if not isinstance(path, str) or not path.strip():
        raise InvalidSpecError(field="jsonpath", value=path, reason="must be a non-empty string")
    return _parsed(path)


@functools.lru_cache(maxsize=512)
def _parsed(path: str) -> Any:
    """The parsed expression (about 2 ms to parse: a rule made in ``build`` parses once)."""
    from jsonpath_ng.ext.parser import parse  # imported when a rule is made

    try:
        return parse(path)
    except Exception as exc:  # the parser raises its own errors, the lexer others
        raise InvalidSpecError(field="jsonpath", value=path,
                               reason=f"not a JSONPath expression: {exc}") from exc


def _values(expression: Any, obj: KubeObject) -> list[Any]:
    try:
        return [match.value for match in expression.find(obj)]
    except Exception:  # a filter over a malformed object: no value
        return []


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def jsonpath_rule(
    path: str,
    *,
    equals: Any = _UNSET,
    at_least: int | float | str | None = None,
    failed_if: Any = _UNSET,
    message: str | None = None,
) -> HealthRule:
    """A rule that reads ``path`` (a JSONPath expression, ``$.status.phase``) from the object.

    Current when the path finds at least one value and every value found passes: equals
    ``equals`` when given; is a number at least ``at_least`` when given (a number, or another
    JSONPath whose first value is the bound, e.g. ``"$.spec.replicas"``); else is truthy.
    Failed when a value found equals ``failed_if`` (or is one of them, for a list, tuple or set).
    Otherwise InProgress, with ``message`` or a sentence naming the path and what was found.

    ``jsonpath_rule("$.status.phase", equals="Bound", failed_if="Lost")``;
    ``jsonpath_rule("$.status.readyReplicas", at_least="$.spec.replicas")``;
    ``jsonpath_rule("$.status.conditions[?(@.type=='Available')].status", equals="True")``.
    A malformed expression raises ``InvalidSpecError`` (field ``jsonpath``) here, at once.
    """
    expression = _parse(path)
    bound_path = _parse(at_least) if isinstance(at_least, str) else None
    if at_least is not None and bound_path is None and _number(at_least) is None:
        raise InvalidSpecError(field="at_least", value=at_least,
                               reason="must be a number or a JSONPath expression")
    failing: Collection[Any] = (
        () if failed_if is _UNSET
        else failed_if if isinstance(failed_if, list | tuple | set | frozenset)
        else (failed_if,))

    def rule(obj: KubeObject) -> Health:
        found = _values(expression, obj)
        bad = [v for v in found if v in failing]
        if bad:
            return Health(status=HealthStatus.FAILED, reason="RuleFailed",
                          message=message or f"{path} is {bad[0]!r}")
        if not found:
            return Health.in_progress(message or f"{path} has no value yet", "RuleNotMet")
        if equals is not _UNSET:
            wrong = [v for v in found if v != equals]
            if wrong:
                return Health.in_progress(
                    message or f"{path} is {wrong[0]!r}, waiting for {equals!r}", "RuleNotMet")
        if at_least is not None:
            bound = _number(at_least) if bound_path is None else next(
                (n for v in _values(bound_path, obj) if (n := _number(v)) is not None), None)
            if bound is None:
                return Health.in_progress(message or f"{at_least} has no number yet",
                                          "RuleNotMet")
            short = [v for v in found if (n := _number(v)) is None or n < bound]
            if short:
                return Health.in_progress(
                    message or f"{path} is {short[0]!r}, waiting for at least {bound:g}",
                    "RuleNotMet")
        if equals is _UNSET and at_least is None and not all(found):
            return Health.in_progress(message or f"{path} is {found[0]!r}", "RuleNotMet")
        return Health.ok(f"{path} as wanted")

    rule.__name__ = rule.__qualname__ = f"jsonpath_rule({path!r})"
    return rule
