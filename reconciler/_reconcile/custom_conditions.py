"""Conditions of one's own: the types a status function may add to the parent, checked.

Why it exists: ``Reporting(status=fn)`` may return ``conditions`` (``Available``, ``Degraded``)
that are merged with the toolkit's own; a type the toolkit writes, or a malformed condition,
would fight the toolkit's status or be refused by the API server on every reconcile. So the
types an operator declares (``Reporting(condition_types=...)``) are checked when the ``Operator``
is built, and what the function returns is checked at each reconcile; there a bad condition is
a permanent failure (``Stalled``, no retry until the parent changes), never a hot retry loop.

Boundary: pure checks of names and shapes; merging into the status is
``reconciler._reconcile.readiness``' (with ``conditions.merge_conditions``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from reconciler._base.errors import ReconcilerUsageError, ReconcilerUsageTypeError

__all__ = [
    "TOOLKIT_CONDITION_TYPES",
    "checked_conditions",
    "condition_type_problem",
    "declared_status",
]

TOOLKIT_CONDITION_TYPES = frozenset({"Ready", "Reconciled", "Reconciling", "Stalled", "Cleanup"})
"""The condition types the toolkit writes on a parent; a status function may not set them."""

# metav1.Condition's validation: type is a qualified name, reason CamelCase.
_TYPE = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                   r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")
_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_STATUSES = ("True", "False", "Unknown")
_MAX_TYPE, _MAX_REASON, _MAX_MESSAGE = 316, 1024, 32768


def condition_type_problem(name: Any) -> str | None:
    """Why ``name`` cannot be a condition type of one's own, or None when it can."""
    if not isinstance(name, str) or not name:
        return f"condition type {name!r} must be a non-empty string"
    if name in TOOLKIT_CONDITION_TYPES:
        return (f"condition type {name!r} is the toolkit's own (it writes "
                f"{', '.join(sorted(TOOLKIT_CONDITION_TYPES))}); choose another name")
    if len(name) > _MAX_TYPE or not _TYPE.match(name):
        return (f"condition type {name!r} is not a valid type (CamelCase such as 'Available', "
                "optionally prefixed by a DNS subdomain and '/')")
    return None


def _problem(cond: Any, declared: Collection[str]) -> str | None:
    if not isinstance(cond, Mapping):
        return f"a condition must be a dict, got {type(cond).__name__}"
    name = cond.get("type")
    if (why := condition_type_problem(name)) is not None:
        return why
    if declared and name not in declared:
        return (f"condition type {name!r} is not among the declared "
                f"Reporting(condition_types=...): {', '.join(sorted(declared))}")
    if cond.get("status") not in _STATUSES:
        return f"condition {name!r}: status must be one of True, False, Unknown"
    reason = cond.get("reason")
    if reason is not None and not (isinstance(reason, str) and len(reason) <= _MAX_REASON
                                   and (reason == "" or _REASON.match(reason))):
        return f"condition {name!r}: reason {reason!r} must be CamelCase"
    message = cond.get("message")
    if message is not None and not (isinstance(message, str) and len(message) <= _MAX_MESSAGE):
        return f"condition {name!r}: message must be a string of at most {_MAX_MESSAGE} chars"
    return None


def checked_conditions(
    value: Any, *, generation: Any, declared: Collection[str] = (),
) -> list[dict[str, Any]]:
    """A status function's ``conditions``, checked (types of one's own, well formed, each once,
    among ``declared`` when some are declared) and with ``observedGeneration`` filled in when
    missing; ``ReconcilerUsageError`` naming the first problem otherwise."""
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        raise ReconcilerUsageTypeError(
            f"status function's conditions must be a list, got {type(value).__name__}")
    seen: set[str] = set()
    checked: list[dict[str, Any]] = []
    for cond in value:
        if (why := _problem(cond, declared)) is not None:
            raise ReconcilerUsageError(f"status function returned a bad condition: {why}")
        if cond["type"] in seen:
            raise ReconcilerUsageError(
                f"status function returned condition {cond['type']!r} twice")
        seen.add(cond["type"])
        checked.append({"observedGeneration": generation, **cond})
    return checked


def declared_status(
    function: Callable[[Mapping[str, Any], Sequence[Mapping[str, Any]]], Mapping[str, Any]],
    condition_types: Collection[str],
) -> Callable[[Mapping[str, Any], Sequence[Mapping[str, Any]]], Mapping[str, Any]]:
    """``function`` (a ``Reporting(status=...)``) held to the condition types its operator
    declared: a condition of another type is refused (``ReconcilerUsageError``) at reconcile time
    as a permanent failure, never written."""
    declared = frozenset(condition_types)

    def status(parent: Mapping[str, Any],
               children: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
        value = function(parent, children)
        if isinstance(value, Mapping) and "conditions" in value:
            checked_conditions(value["conditions"], generation=None, declared=declared)
        return value

    status.__qualname__ = getattr(function, "__qualname__", "status")
    return status
