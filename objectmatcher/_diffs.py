"""Readable field diffs of a patch, with Secret values and the annotation redacted.

``PatchResult.diff`` says, field by field, what applying the patch changes in the live object: it
is ``dictdiffer.diff`` of the live object and the patched one, flattened to one
:class:`DiffItem` per field. Values of a Secret's ``data``/``stringData`` never appear: they are
replaced by :data:`REDACTED_VALUE` here, at the only place diffs are built, so logs, reprs and
``optk plan`` output are safe by construction. The recorded annotation is shown as a marker too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

import attrs

from objectmatcher._annotations import LAST_APPLIED_ANNOTATION, is_secret
from objectmatcher._types import KubeObject, Path

__all__ = ["REDACTED_VALUE", "DiffItem", "compute_diff", "format_diff"]

#: How a Secret value appears in a diff.
REDACTED_VALUE: Final = "<redacted>"
_ANNOTATION_VALUE: Final = "<last-applied>"
_MAX_SHOWN: Final = 80


@attrs.frozen(kw_only=True)
class DiffItem:
    """One changed field: ``op`` is ``"add"``, ``"change"`` or ``"remove"``.

    ``path`` is the field's path (keys and list indexes); ``old`` is ``None`` for an addition and
    ``new`` is ``None`` for a removal. Secret values are :data:`REDACTED_VALUE`.
    """

    op: Literal["add", "change", "remove"]
    path: Path
    old: Any = None
    new: Any = None

    @property
    def dotted_path(self) -> str:
        """The path as ``spec.template.spec.containers[0].image``."""
        text = ""
        for part in self.path:
            if isinstance(part, int):
                text += f"[{part}]"
            else:
                text += f".{part}" if text else str(part)
        return text

    def __str__(self) -> str:
        if self.op == "add":
            return f"+ {self.dotted_path}: {_show(self.new)}"
        if self.op == "remove":
            return f"- {self.dotted_path}: {_show(self.old)}"
        return f"~ {self.dotted_path}: {_show(self.old)} -> {_show(self.new)}"


def _show(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def format_diff(items: Iterable[DiffItem]) -> str:
    """The diff on one line per field (``"~ spec.replicas: 1 -> 3"``), or ``"no changes"``."""
    lines = [str(item) for item in items]
    return "\n".join(lines) if lines else "no changes"


def _redacted(path: Path, value: Any, secret: bool) -> Any:
    if secret and path and path[0] in ("data", "stringData"):
        if len(path) >= 2:
            return REDACTED_VALUE
        if isinstance(value, Mapping):
            return {key: REDACTED_VALUE for key in value}
    if path[:3] == ("metadata", "annotations", LAST_APPLIED_ANNOTATION):
        return _ANNOTATION_VALUE
    if path[:2] == ("metadata", "annotations") and len(path) == 2 and isinstance(value, Mapping):
        return {k: _ANNOTATION_VALUE if k == LAST_APPLIED_ANNOTATION else v
                for k, v in value.items()}
    return value


def compute_diff(
    before: KubeObject, after: KubeObject, *, secret: bool | None = None
) -> tuple[DiffItem, ...]:
    """The field changes from ``before`` to ``after`` (dictdiffer), Secret values redacted.

    ``secret`` says whether the objects are a Secret (default: read from their ``kind``; pass it
    when ``before``/``after`` are cut-down parts of an object).
    """
    import dictdiffer  # lazy: it imports numpy when installed (start-up cost)

    if secret is None:
        secret = is_secret(before) or is_secret(after)
    items: list[DiffItem] = []
    for op, raw_path, change in dictdiffer.diff(before, after, dot_notation=False):
        base: Path = tuple(raw_path) if isinstance(raw_path, list) else (raw_path,)
        if raw_path == "":
            base = ()
        if op == "change":
            old, new = change
            items.append(DiffItem(op="change", path=base, old=_redacted(base, old, secret),
                                  new=_redacted(base, new, secret)))
            continue
        for key, value in change:
            path = (*base, key)
            shown = _redacted(path, value, secret)
            if op == "add":
                items.append(DiffItem(op="add", path=path, new=shown))
            else:
                items.append(DiffItem(op="remove", path=path, old=shown))
    return tuple(items)
