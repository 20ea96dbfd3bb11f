"""Shared helpers of the objectmatcher tests: live objects as a server would hold them."""

from __future__ import annotations

import copy
from typing import Any

from objectmatcher import (
    LAST_APPLIED_ANNOTATION,
    PatchResult,
    apply_patch,
    calculate_patch,
    set_last_applied,
)
from tests.conftest import load_fixture


def live_from_fixture(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(desired, live)``: what was sent, and what the server returned, with our annotation."""
    recording = load_fixture(name)
    desired = recording["sent"]
    return desired, with_annotation(recording["returned"], desired)


def with_annotation(live: dict[str, Any], applied: dict[str, Any]) -> dict[str, Any]:
    """``live`` carrying the last-applied annotation of ``applied`` (a new dict)."""
    result = copy.deepcopy(live)
    annotation = set_last_applied(applied)["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
    result["metadata"].setdefault("annotations", {})[LAST_APPLIED_ANNOTATION] = annotation
    return result


def apply_result(live: dict[str, Any], result: PatchResult) -> dict[str, Any]:
    """``live`` after the server applied ``result.patch``."""
    return apply_patch(live, result.patch, patch_type=result.patch_type)


def converge(live: dict[str, Any], desired: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Patch ``live`` towards ``desired``; assert a second comparison then finds nothing."""
    result = calculate_patch(live, desired, **kwargs)
    assert not result.is_empty
    after = apply_result(live, result)
    again = calculate_patch(after, desired, **kwargs)
    assert again.is_empty, f"did not converge: {again.patch}"
    return after
