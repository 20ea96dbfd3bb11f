"""Overrides: strategic-merge a partial object onto a built one (operator-tools typeoverride).

Operators let their users adjust what they build (extra env vars, resources, annotations) with a
partial object in the parent's spec. This module applies such a partial object with
``objectmatcher.apply_patch``: built-in kinds get a strategic merge patch (containers merge by
name, ports by number, ...), custom resources a JSON merge patch. Inputs are never mutated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

import objectmatcher
from builders._compose import ResourceBuilder, WrappingBuilder, evaluate
from builders._convert import to_plain, to_plain_object
from builders._errors import InvalidSpecError
from builders._identity import identity_of
from builders._state import DesiredState, KubeObject

__all__ = ["overrides", "with_overrides"]

_REDACTED = "<redacted>"


def overrides(
    obj: KubeObject, patch: Mapping[str, Any] | None, *, kubernetes_version: str | None = None
) -> dict[str, Any]:
    """``obj`` with the partial object ``patch`` merged onto it, as a new dict.

    ``patch`` may be a dict or an official client model (unset fields are ignored); ``None`` or
    ``{}`` changes nothing. Lists with a patch merge key merge item by item; ``null`` removes a
    field; strategic-merge directives (``$patch: delete``) work. A patch that cannot apply, or one
    that changes the object's identity, raises InvalidSpecError naming the object.
    """
    plain = to_plain_object(obj)
    if not patch:
        return plain
    partial = to_plain(patch)
    ref = identity_of(plain)
    api_version, kind, namespace, name = ref.api_version, ref.kind, ref.namespace, ref.name
    patch_type = (
        objectmatcher.STRATEGIC_MERGE_PATCH
        if objectmatcher.has_builtin_schema(api_version, kind, kubernetes_version)
        else objectmatcher.MERGE_PATCH
    )
    shown = _REDACTED if kind == "Secret" else partial  # Secret data never in clear text
    where = f"overrides of {kind} {namespace + '/' if namespace else ''}{name}"
    try:
        merged = objectmatcher.apply_patch(
            plain, partial, patch_type=patch_type, kubernetes_version=kubernetes_version
        )
    except objectmatcher.PatchError as exc:
        reason = "the patch does not apply" if shown is _REDACTED else str(exc)
        raise InvalidSpecError(field=where, value=shown, reason=reason) from exc
    if identity_of(merged) != ref:
        raise InvalidSpecError(
            field=where,
            value=shown,
            reason="overrides must not change apiVersion, kind, name or namespace",
        )
    return merged


@attrs.frozen(kw_only=True, eq=False)
class _Overridden(WrappingBuilder):
    wrapper_label: ClassVar[str] = "with_overrides"
    builder: ResourceBuilder
    patch: Mapping[str, Any] | None
    kubernetes_version: str | None

    def __call__(self) -> tuple[KubeObject, DesiredState]:
        obj, state = evaluate(self.builder)
        if state.is_absent:
            return obj, state
        return overrides(obj, self.patch, kubernetes_version=self.kubernetes_version), state


def with_overrides(
    builder: ResourceBuilder,
    patch: Mapping[str, Any] | None,
    *,
    kubernetes_version: str | None = None,
) -> ResourceBuilder:
    """A builder that applies :func:`overrides` to what ``builder`` builds (ABSENT stubs as is)."""
    return _Overridden(builder=builder, patch=patch, kubernetes_version=kubernetes_version)
