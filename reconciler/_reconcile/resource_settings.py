"""How one child is written: ``ResourceReconciler``'s settings, one value.

Why it exists: ``ResourceReconciler`` took 16 parameters (issue 37: no constructor over 10).
:class:`ResourceSettings` says how one child is written (strategy, field manager, recreation,
conflicts, adoption, match options), frozen and keyword-only; the constructor takes what it shares
with others (a client, a reader, a clock, the plan guard) and this value. The flat keywords it
took before still work for this release with a ``DeprecationWarning`` (:func:`moved_into`, shared
with ``reconciler._reconcile.parent_settings``). Boundary: values and their checks; writing is
``reconciler._reconcile.reconciling``'s.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import attrs
from attrs import AttrsInstance

from reconciler._base.errors import ReconcilerUsageError, ReconcilerUsageTypeError
from reconciler._reconcile.applying import ApplyStrategy, ServerSideApply, ThreeWayMerge

__all__ = ["DEFAULT_RECREATE_KINDS", "ResourceSettings", "moved_into"]

DEFAULT_RECREATE_KINDS: frozenset[str] = frozenset({
    "Deployment.apps", "StatefulSet.apps", "DaemonSet.apps", "Job.batch",
    "Service", "ConfigMap", "Secret",
})
"""Kinds (``Kind.group``, or ``Kind`` for the core group) that may be recreated when enabled.

PersistentVolumeClaims are deliberately absent: recreating one loses its data.
"""


def _kinds(value: Iterable[str]) -> frozenset[str]:
    if isinstance(value, str):
        raise ReconcilerUsageTypeError(f"a list of kinds was expected, not the string {value!r}")
    return frozenset(value)


@attrs.frozen(kw_only=True)
class ResourceSettings:
    """How ``ResourceReconciler`` writes one child.

    ``apply``: the write strategy (``ThreeWayMerge()``, the default, or ``ServerSideApply()``);
    ``apply_kinds`` overrides it per kind (``Kind.group``); ``field_manager``: the manager
    server-side apply writes as (None: the client's, the operator's name). ``recreate`` (off)
    lets an update the server refuses on immutable fields delete the object (foreground), wait
    until it is gone (``recreate_timeout``, polling every ``poll_interval``) and create it again,
    for the kinds in ``recreate_kinds`` only. ``conflict_retries`` bounds the re-read-and-retry
    loop on 409 Conflict; ``deleting_requeue``: when to look again at a child being deleted.
    ``adopt`` takes over objects that are not ours; ``match_options`` go to the matcher."""

    apply: ApplyStrategy = attrs.field(factory=ThreeWayMerge)
    apply_kinds: Mapping[str, ApplyStrategy] = attrs.field(factory=dict)
    field_manager: str | None = None
    recreate: bool = False
    recreate_kinds: Collection[str] = attrs.field(default=DEFAULT_RECREATE_KINDS,
                                                  converter=_kinds)
    recreate_timeout: float = 60.0
    poll_interval: float = 0.2
    conflict_retries: int = 3
    deleting_requeue: float = 2.0
    adopt: bool = False
    match_options: Sequence[Any] = attrs.field(default=(), converter=tuple)

    def __attrs_post_init__(self) -> None:
        if self.conflict_retries < 0:
            raise ReconcilerUsageError(
                f"ResourceSettings: conflict_retries must be >= 0, got {self.conflict_retries}")
        for name, strategy in (("apply", self.apply),
                               *((f"apply_kinds[{k!r}]", v) for k, v in self.apply_kinds.items())):
            if not isinstance(strategy, (ThreeWayMerge, ServerSideApply)):
                raise ReconcilerUsageTypeError(
                    f"ResourceSettings: {name} must be ThreeWayMerge() or ServerSideApply(), "
                    f"got {strategy!r}")


_Settings = TypeVar("_Settings", bound=AttrsInstance)


def moved_into(settings: _Settings | None, flat: Mapping[str, Any], *, owner: str,
               kind: type[_Settings]) -> _Settings:
    """``settings`` (default: ``kind()``) with the flat keywords of earlier releases set on it,
    each with a ``DeprecationWarning`` naming the new place; a keyword ``kind`` has no field for
    is a ``TypeError`` as Python's own."""
    base = kind() if settings is None else settings
    if not isinstance(base, kind):
        raise ReconcilerUsageTypeError(
            f"{owner}(settings=...) must be a {kind.__name__}, got {type(base).__name__}")
    if not flat:
        return base
    names = {field.name for field in attrs.fields(kind)}
    for keyword in flat:
        if keyword not in names:
            raise ReconcilerUsageTypeError(
                f"{owner}() got an unexpected keyword argument {keyword!r}")
        warnings.warn(f"{owner}({keyword}=...) is deprecated: use "
                      f"{owner}(settings={kind.__name__}({keyword}=...))",
                      DeprecationWarning, stacklevel=3)
    return kind(**{**attrs.asdict(base, recurse=False), **flat})
