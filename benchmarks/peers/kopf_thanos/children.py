"""What the kopf peer does to a parent's children: pure decisions, no kopf and no client.

``desired(parent)`` runs the example's own builders (``examples.thanos.builders.build``) and keys
each child by ``(kind, name)``; ``matches(desired, live)`` is the comparison a kopf user writes
by hand: every field the operator sets has that value in the live object (fields the server or
others added are left alone); ``plan(parent, live)`` lists the writes that take the live
children to the desired ones. ``handlers`` performs them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from examples.thanos import builders as thanos

ChildKey = tuple[str, str]
"""``(kind, name)`` of a child inside its parent's namespace."""


@attrs.frozen(kw_only=True)
class Write:
    """One write to a child: ``verb`` is ``create``, ``patch`` or ``delete``."""

    verb: str
    obj: Mapping[str, Any]


def child_key(obj: Mapping[str, Any]) -> ChildKey:
    """The ``(kind, name)`` of ``obj``."""
    return str(obj.get("kind")), str((obj.get("metadata") or {}).get("name"))


def desired(parent: Mapping[str, Any]) -> dict[ChildKey, tuple[dict[str, Any], bool]]:
    """Every child the parent should have (True) or not have (False), keyed by kind and name."""
    result: dict[ChildKey, tuple[dict[str, Any], bool]] = {}
    for builder in thanos.build(parent):
        obj, state = builder()
        result[child_key(obj)] = (dict(obj), not state.is_absent)
    return result


def matches(want: Any, live: Any) -> bool:
    """Whether ``live`` holds every field of ``want`` with the same value (lists item by item)."""
    if isinstance(want, Mapping):
        return isinstance(live, Mapping) and all(
            matches(value, live.get(key)) for key, value in want.items()
        )
    if isinstance(want, list):
        return (
            isinstance(live, list) and len(live) == len(want)
            and all(matches(w, v) for w, v in zip(want, live, strict=True))
        )
    return bool(want == live)


def plan_child(
    want: Mapping[str, Any], present: bool, live: Mapping[str, Any] | None
) -> Write | None:
    """The write that takes one live child (None: missing) to what is wanted, or None."""
    if not present:
        return Write(verb="delete", obj=want) if live is not None else None
    if live is None:
        return Write(verb="create", obj=want)
    return None if matches(want, live) else Write(verb="patch", obj=want)


def plan(parent: Mapping[str, Any], live: Iterable[Mapping[str, Any]]) -> list[Write]:
    """The writes that take the parent's live children to its desired ones, in build order."""
    by_key = {child_key(obj): obj for obj in live}
    writes = []
    for key, (want, present) in desired(parent).items():
        write = plan_child(want, present, by_key.get(key))
        if write is not None:
            writes.append(write)
    return writes
