"""Label and field selectors: parsed once per request, matched against stored objects.

Label selectors follow ``k8s.io/apimachinery/pkg/labels``: ``=``/``==``, ``!=``, ``in (...)``,
``notin (...)``, ``key`` (exists) and ``!key`` (does not exist), comma-separated. Field selectors
support ``metadata.name`` and ``metadata.namespace`` for every kind, plus the few per-kind fields a
real server indexes (``status.phase`` of Pods, ``type`` of Secrets, ``involvedObject.*`` of Events,
...). Parse errors raise ``ApiStatusError`` 400 with the real messages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from reconciler.embedded._statuses import bad_request

__all__ = [
    "FieldSelector",
    "LabelSelector",
    "label_selector_of",
    "parse_field_selector",
    "parse_label_selector",
]

_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


@attrs.frozen(kw_only=True)
class _Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin" match objects without the key, as Kubernetes does
        return not present or labels[self.key] not in self.values


@attrs.frozen(kw_only=True)
class LabelSelector:
    """A parsed label selector; the empty selector matches everything."""

    requirements: tuple[_Requirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj``'s ``metadata.labels`` satisfy every requirement."""
        if not self.requirements:
            return True
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        """True when the selector selects everything."""
        return not self.requirements


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _check_key(key: str, text: str) -> str:
    if not _KEY.match(key) or len(key.split("/")[-1]) > 63:
        raise bad_request(
            f"unable to parse requirement: invalid label key \"{key}\": in selector {text!r}"
        )
    return key


def _parse_requirement(part: str, text: str) -> _Requirement:
    part = part.strip()
    set_match = re.fullmatch(r"(\S+)\s+(in|notin)\s*\((.*)\)", part)
    if set_match:
        key, op, raw = set_match.groups()
        values = frozenset(v.strip() for v in raw.split(",") if v.strip())
        return _Requirement(key=_check_key(key, text), op=op, values=values)
    for op in ("==", "!=", "="):
        if op in part:
            key, _, value = part.partition(op)
            return _Requirement(
                key=_check_key(key.strip(), text),
                op="!=" if op == "!=" else "=",
                values=frozenset({value.strip()}),
            )
    if part.startswith("!"):
        return _Requirement(key=_check_key(part[1:].strip(), text), op="!")
    return _Requirement(key=_check_key(part, text), op="exists")


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse a ``labelSelector`` query value; None or blank selects everything."""
    if not text or not text.strip():
        return LabelSelector()
    return LabelSelector(requirements=tuple(
        _parse_requirement(part, text) for part in _split_top_level(text) if part.strip()
    ))


_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


def label_selector_of(selector: Any) -> LabelSelector | None:
    """A ``metav1.LabelSelector`` object (``matchLabels``, ``matchExpressions``) as a
    ``LabelSelector``; None (absent) or ``{}`` selects everything; None is returned for a
    selector that cannot be read (an unknown operator), which selects nothing."""
    if selector is None:
        return LabelSelector()
    if not isinstance(selector, Mapping):
        return None
    requirements = [_Requirement(key=str(k), op="=", values=frozenset({str(v)}))
                    for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or ():
        op = _OPERATORS.get(str((expr or {}).get("operator")))
        if op is None:
            return None
        requirements.append(_Requirement(key=str(expr.get("key")), op=op, values=frozenset(
            str(v) for v in expr.get("values") or ())))
    return LabelSelector(requirements=tuple(requirements))


# Fields a real kube-apiserver accepts in field selectors, beyond metadata.name/namespace.
_EXTRA_FIELDS: dict[str, frozenset[str]] = {
    "Pod": frozenset({"spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                      "spec.serviceAccountName", "status.phase", "status.podIP",
                      "status.nominatedNodeName"}),
    "Secret": frozenset({"type"}),
    "Namespace": frozenset({"status.phase"}),
    "Event": frozenset({"involvedObject.kind", "involvedObject.namespace",
                        "involvedObject.name", "involvedObject.uid",
                        "involvedObject.apiVersion", "involvedObject.resourceVersion",
                        "involvedObject.fieldPath", "reason", "reportingComponent", "source",
                        "type"}),
    "ReplicaSet": frozenset({"status.replicas"}),
    "Job": frozenset({"status.successful"}),
}


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if path == "source" and isinstance(value, Mapping):
        value = value.get("component")
    return "" if value is None else str(value)


@attrs.frozen(kw_only=True)
class FieldSelector:
    """A parsed field selector: ``(path, equal?, value)`` terms, all of which must hold."""

    terms: tuple[tuple[str, bool, str], ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether every term holds for ``obj``."""
        return all((_field_value(obj, path) == value) == equal for path, equal, value in self.terms)

    def name(self) -> str | None:
        """The name this selector pins with ``metadata.name=x``, if any (a fast path)."""
        for path, equal, value in self.terms:
            if path == "metadata.name" and equal:
                return value
        return None


def parse_field_selector(text: str | None, kind: str) -> FieldSelector:
    """Parse a ``fieldSelector``; unsupported fields answer 400 as a real server does."""
    if not text or not text.strip():
        return FieldSelector()
    allowed = {"metadata.name", "metadata.namespace"} | _EXTRA_FIELDS.get(kind, frozenset())
    terms = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        for op in ("!=", "==", "="):
            if op in part:
                path, _, value = part.partition(op)
                path = path.strip()
                break
        else:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        if path not in allowed:
            raise bad_request(f'field label not supported: {path}')
        terms.append((path, op != "!=", value.strip()))
    return FieldSelector(terms=tuple(terms))
