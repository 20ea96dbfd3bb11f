"""Comparison options: which fields ``calculate_patch`` leaves to someone else.

The defaults are the behaviour (server defaults, quantities, ordering never cause diffs); options
exist for what users deliberately hand over: a field an autoscaler owns
(``ignore_field("spec.replicas")``), or the type meta and status a StatefulSet's volume claim
templates get from the server. An ignored field is neither compared, nor patched, nor deleted.
Options are frozen values; the set in force for a kind compiles once into a path trie that the
comparison walks alongside the objects.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Final

import attrs

from objectmatcher._annotations import LAST_APPLIED_ANNOTATION
from objectmatcher._errors import InvalidOptionError

__all__ = [
    "WILDCARD",
    "InvalidOptionError",
    "MatchOption",
    "ignore_field",
    "ignore_pvc_template_type_meta_and_status",
    "ignore_status_fields",
    "ignore_trie",
    "sub_trie",
]

#: A path segment matching any key of a map or any item of a list.
WILDCARD: Final = "*"

#: Metadata the server manages; never compared (DESIGN.md section 3).
SERVER_MANAGED_METADATA: Final = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)


@attrs.frozen(kw_only=True)
class MatchOption:
    """One comparison option: field paths to ignore, optionally only for some kinds.

    ``paths`` are tuples of keys; :data:`WILDCARD` (``"*"``) matches any map key or list item.
    ``kinds`` limits the option to those kinds (``None``: every kind).
    """

    name: str
    paths: tuple[tuple[str, ...], ...]
    kinds: frozenset[str] | None = None

    def applies_to(self, kind: str) -> bool:
        """Whether the option is in force for objects of ``kind``."""
        return self.kinds is None or kind in self.kinds


def ignore_status_fields() -> MatchOption:
    """Ignore ``status`` (on by default: ``status`` is written through its own subresource)."""
    return MatchOption(name="ignore_status_fields", paths=(("status",),))


def _parse_path(path: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(path, str):
        parts = tuple(path.replace("[*]", ".*").split("."))
    elif isinstance(path, Sequence) and all(isinstance(part, str) for part in path):
        parts = tuple(path)
    else:
        raise InvalidOptionError("a path is a dotted string or a sequence of keys", path=path)
    if not parts or any(not part for part in parts):
        raise InvalidOptionError("empty path or empty segment", path=path)
    return parts


def ignore_field(path: str | Sequence[str], *, kinds: Sequence[str] | None = None) -> MatchOption:
    """Ignore one field: ``"spec.replicas"``, ``"spec.template.spec.containers.*.image"``.

    ``path`` is dotted (``[*]`` or ``*`` for any list item or map key) or, for keys containing
    dots (label and annotation names), a sequence of keys:
    ``("metadata", "annotations", "example.com/owner")``. ``kinds`` limits it to some kinds.
    Raises :class:`InvalidOptionError` (a ``ValueError``) for an empty path or segment.
    """
    return MatchOption(
        name=f"ignore_field({path!r})",
        paths=(_parse_path(path),),
        kinds=frozenset(kinds) if kinds is not None else None,
    )


def ignore_pvc_template_type_meta_and_status() -> MatchOption:
    """Ignore ``apiVersion``, ``kind`` and ``status`` of a StatefulSet's volume claim templates.

    The server fills these in; the default comparison already tolerates that, this option also
    tolerates a ``desired`` that sets them differently.
    """
    base = ("spec", "volumeClaimTemplates", WILDCARD)
    return MatchOption(
        name="ignore_pvc_template_type_meta_and_status",
        paths=tuple((*base, field) for field in ("apiVersion", "kind", "status")),
        kinds=frozenset({"StatefulSet"}),
    )


_DEFAULT_PATHS: Final = (
    ("status",),
    *(("metadata", field) for field in SERVER_MANAGED_METADATA),
    ("metadata", "annotations", LAST_APPLIED_ANNOTATION),
)

#: A node of the compiled trie: ``True`` ends an ignored path.
Trie = dict[str, Any]


def ignore_trie(options: tuple[MatchOption, ...], kind: str) -> Trie:
    """The ignored paths of ``options`` (plus the defaults) for ``kind``, as a nested dict.

    Raises :class:`InvalidOptionError` for anything that is not a :class:`MatchOption`.
    """
    for option in options:
        if not isinstance(option, MatchOption):
            raise InvalidOptionError("options are MatchOption values, e.g. ignore_field(...)",
                                     path=option)
    return _compiled_trie(options, kind)


@functools.lru_cache(maxsize=256)
def _compiled_trie(options: tuple[MatchOption, ...], kind: str) -> Trie:
    trie: Trie = {}
    paths = list(_DEFAULT_PATHS)
    for option in options:
        if option.applies_to(kind):
            paths.extend(option.paths)
    for path in paths:
        node = trie
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if child is True:
                break
            node = child
        else:
            node[path[-1]] = True
    return trie


def sub_trie(trie: Trie | None, key: str) -> Trie | bool | None:
    """The trie below ``key`` (a ``*`` entry matches any key); ``True`` means ignored."""
    if trie is None:
        return None
    found = trie.get(key)
    if found is None:
        found = trie.get(WILDCARD)
    return found
