"""``PatchResult``: what ``calculate_patch`` found, shown without ever showing the patch.

Kept apart from the comparison (``_matching``) so that module stays about deciding; this one is
about reporting: the one-line and multi-line accounts, and the cut-down footprints of a patch over
which the diff is computed.
"""

from __future__ import annotations

from typing import Any

import attrs

from objectmatcher._annotations import ORIGINAL_RECORDED
from objectmatcher._diffs import DiffItem, format_diff
from objectmatcher._types import is_map

__all__ = ["PatchResult", "footprints"]


@attrs.frozen(kw_only=True, repr=False)
class PatchResult:
    """What ``calculate_patch`` found: the patch taking ``current`` to ``desired``, and why.

    ``patch`` is ``{}`` when nothing needs writing (``is_empty``). A non-empty patch also refreshes
    the last-applied annotation. ``fallback_reason`` is ``None`` for a three-way comparison, or
    says why the annotation could not be used (absent, corrupt, recording another object): then
    the comparison was two-way and never deletes. ``original_status`` says the same as a value
    to branch on: ``"recorded"`` (three-way), ``"absent"`` (no annotation: an adopted object),
    ``"unreadable"`` (corrupt, oversized or too deeply nested) or ``"foreign"`` (it records
    another object); the last two deserve a warning naming the object. ``diff`` lists the field
    changes the patch makes, Secret values redacted; ``repr``/``str`` never show the patch itself.
    """

    patch: dict[str, Any]
    patch_type: str
    diff: tuple[DiffItem, ...] = ()
    fallback_reason: str | None = None
    object_ref: str = ""
    original_status: str = ORIGINAL_RECORDED

    @property
    def is_empty(self) -> bool:
        """Whether no write is needed."""
        return not self.patch

    def _head(self) -> str:
        head = f"{self.object_ref}: " + ("unchanged" if self.is_empty else
                                         f"{len(self.diff)} field change(s) ({self.patch_type})")
        if self.fallback_reason:
            head += f"; two-way comparison because {self.fallback_reason}"
        return head

    def explain(self) -> str:
        """A multi-line account: the object, the comparison used, then one line per field."""
        head = self._head()
        return head if self.is_empty else f"{head}\n{format_diff(self.diff)}"

    def __str__(self) -> str:
        """The same account on one line, for a log line."""
        head = self._head()
        return head if self.is_empty else f"{head}: " + "; ".join(map(str, self.diff))

    def __repr__(self) -> str:
        return (f"PatchResult(object_ref={self.object_ref!r}, is_empty={self.is_empty}, "
                f"patch_type={self.patch_type!r}, diff={list(map(str, self.diff))!r}, "
                f"fallback_reason={self.fallback_reason!r}, "
                f"original_status={self.original_status!r})")


def footprints(before: Any, after: Any, patch: Any) -> tuple[Any, Any]:
    """``before`` and ``after`` cut down to the fields ``patch`` touches (paths preserved).

    The diff is then computed over the patched fields only, not the whole (often large, with
    ``managedFields``) live object.
    """
    if not (is_map(patch) and is_map(before)
            and is_map(after)) or "$retainKeys" in patch or "$patch" in patch:
        return before, after
    cut_before: dict[str, Any] = {}
    cut_after: dict[str, Any] = {}
    for key, value in patch.items():
        if key.startswith("$"):
            key = key.partition("/")[2]
            value = None
        for side, cut in ((before, cut_before), (after, cut_after)):
            if key in side:
                cut[key] = side[key]
        if is_map(value) and key in cut_before and key in cut_after:
            cut_before[key], cut_after[key] = footprints(before[key], after[key], value)
    return cut_before, cut_after
