"""Label selectors: the reconciler's one parser of Kubernetes label selector text.

``LabelSelector.parse("a=b,c!=d,e,!f,g in (h,i),j notin (k)")`` turns the text the API accepts
into requirements, and ``matches(labels)`` answers as the API server does. The informer caches
(``reconciler._cache.stores``) and the informers' scope checks (``reconciler._cache.informers``)
use it. The embedded API server keeps its own parser on purpose: it must not depend on the
reconciler.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

from reconciler._base.errors import ReconcilerUsageError

__all__ = ["LabelSelector"]

_REQUIREMENT = re.compile(
    r"\s*(?P<neg>!)?\s*(?P<key>[A-Za-z0-9._/-]+)\s*"
    r"(?:(?P<op>==|=|!=|\s+in\s+|\s+notin\s+)\s*(?P<value>\([^)]*\)|[A-Za-z0-9._-]*))?\s*"
)


@attrs.frozen(kw_only=True)
class LabelSelector:
    """A parsed Kubernetes label selector (``a=b,c!=d,e,!f,g in (h,i),j notin (k)``)."""

    requirements: tuple[tuple[str, str, frozenset[str]], ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> LabelSelector:
        """Parse ``text``; ``ValueError`` naming the selector when it is malformed."""
        if not text or not text.strip():
            return cls()
        parts: list[str] = []
        depth, start = 0, 0
        for i, char in enumerate(text):
            depth += char == "("
            depth -= char == ")"
            if char == "," and depth == 0:
                parts.append(text[start:i])
                start = i + 1
        parts.append(text[start:])
        requirements = []
        for part in parts:
            match = _REQUIREMENT.fullmatch(part)
            if match is None or (match["neg"] and match["op"]):
                raise ReconcilerUsageError(f"malformed label selector {text!r} at {part!r}")
            key, op = match["key"], (match["op"] or "").strip()
            value = match["value"] or ""
            values = frozenset(v.strip() for v in value.strip("()").split(",") if v.strip())
            if op in ("in", "notin") and not value.startswith("("):
                raise ReconcilerUsageError(
                    f"malformed label selector {text!r}: {op} needs (values)"
                )
            if op in ("=", "=="):
                op, values = "in", frozenset({value})
            elif op == "!=":
                op, values = "notin", frozenset({value})
            elif not op:
                op = "!exists" if match["neg"] else "exists"
            requirements.append((key, op, values))
        return cls(requirements=tuple(requirements))

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with these labels is selected."""
        labels = labels or {}
        for key, op, values in self.requirements:
            present = key in labels
            if op == "exists" and not present:
                return False
            if op == "!exists" and present:
                return False
            if op == "in" and (not present or labels[key] not in values):
                return False
            if op == "notin" and present and labels[key] in values:
                return False
        return True
