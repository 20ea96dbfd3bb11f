"""JSON encoding of stored objects, memoised: stored objects never change, so neither does
their encoding.

A GET of a popular object, or one event fanned out to twenty watchers, is encoded once: the
watch line of an event, framed as one HTTP chunk, is built once and the same bytes are written
to every watcher that sees the event the same way. The cache holds a reference to each encoded
object (so its ``id`` cannot be reused while cached) and is cleared when it grows past its size
in entries or in bytes (``max_bytes``, 64 MiB by default).
It is used only on the server's event loop thread.

Decoding request bodies is bounded here too: ``load_yaml`` refuses documents whose aliases
expand past a small budget (a "billion laughs" of a few hundred bytes, refused by a real
server since CVE-2019-11253 with "yaml: document contains excessive aliasing"), and
``nesting_path`` finds values nested deeper than the server processes (``MAX_DEPTH``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from reconciler.embedded._errors import EmbeddedServerError

__all__ = [
    "MAX_ALIAS_EXPANSION",
    "MAX_DEPTH",
    "EncodeCache",
    "ExcessiveAliasingError",
    "encode",
    "http_chunk",
    "load_yaml",
    "nesting_path",
]

MAX_ALIAS_EXPANSION = 10_000
"""How many nodes YAML aliases may add to a document once expanded (beyond its own nodes)."""

MAX_DEPTH = 100
"""The deepest nesting of objects and arrays a request body may have (deeper answers 422)."""

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ExcessiveAliasingError(EmbeddedServerError, yaml.YAMLError, ValueError):
    """A YAML document whose aliases expand past ``MAX_ALIAS_EXPANSION`` nodes."""

    def __init__(self, expanded: int) -> None:
        super().__init__("yaml: document contains excessive aliasing")
        self.expanded = expanded


def _expanded_size(root: yaml.Node, *, budget: int) -> tuple[int, int]:
    """(nodes once aliases are expanded, distinct nodes), stopping once past ``budget``.

    Iterative and memoised by node identity (an alias is the same node object), so a deep or
    a self-referencing document costs at most one visit per distinct node.
    """
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    on_stack: set[int] = set()
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        if not children_done:
            if key in on_stack:  # a recursive alias: it never ends once expanded
                return budget + 1, len(sizes)
            on_stack.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        on_stack.discard(key)
        total = 1 + sum(sizes.get(id(child), budget + 1) for child in children)
        sizes[key] = min(total, budget + 1)
    return sizes.get(id(root), 0), len(sizes)


class _BoundedLoader(_Loader):  # type: ignore[misc,valid-type]
    """A safe loader that refuses documents whose aliases expand too far."""

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        if node is not None:
            expanded, distinct = _expanded_size(node, budget=10**9)
            if expanded > distinct + MAX_ALIAS_EXPANSION:
                raise ExcessiveAliasingError(expanded)
        return node


def load_yaml(raw: bytes | str) -> Any:
    """``yaml.safe_load`` of one document, refusing excessive aliasing.

    Raises ``ExcessiveAliasingError`` (a ``yaml.YAMLError``) for an alias bomb and the usual
    ``yaml.YAMLError`` for malformed YAML.
    """
    loader = _BoundedLoader(raw)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def nesting_path(value: Any, *, limit: int = MAX_DEPTH) -> str | None:
    """The path (``spec.a[0].b``) where ``value`` nests deeper than ``limit``, or None.

    Iterative: it never recurses, whatever the depth.
    """
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        current, depth, path = stack.pop()
        if isinstance(current, Mapping):
            items: Any = ((f"{path}.{k}" if path else str(k), v) for k, v in current.items())
        elif isinstance(current, list):
            items = ((f"{path}[{i}]", v) for i, v in enumerate(current))
        else:
            continue
        if depth >= limit:
            return path
        stack.extend((child, depth + 1, child_path) for child_path, child in items
                     if isinstance(child, Mapping | list))
    return None


def encode(value: Any) -> bytes:
    """Compact JSON bytes, as the API server sends them."""
    return json.dumps(value, separators=(",", ":")).encode()


def http_chunk(data: bytes) -> bytes:
    """``data`` framed as one chunk of a ``Transfer-Encoding: chunked`` body."""
    return b"%x\r\n%b\r\n" % (len(data), data)


class EncodeCache:
    """Encodings of immutable stored objects, by identity."""

    def __init__(self, size: int = 4096, *, chunk_size: int = 256,
                 max_bytes: int = 64 * 1024 * 1024) -> None:
        self._size = size
        self._entries: dict[int, tuple[Mapping[str, Any], bytes]] = {}
        self._chunk_size = chunk_size
        self._chunks: dict[tuple[str, str, int], tuple[Mapping[str, Any], bytes]] = {}
        self._max_bytes = max_bytes
        self._entry_bytes = 0
        self._chunk_bytes = 0

    def encode(self, obj: Mapping[str, Any]) -> bytes:
        """The JSON bytes of ``obj`` (a stored object, never mutated)."""
        hit = self._entries.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        data = encode(obj)
        if len(self._entries) >= self._size or self._entry_bytes + len(data) > self._max_bytes:
            self._entries.clear()
            self._entry_bytes = 0
        self._entries[id(obj)] = (obj, data)
        self._entry_bytes += len(data)
        return data

    def event_line(self, event_type: str, obj: Mapping[str, Any]) -> bytes:
        """One watch line: ``{"type":...,"object":...}`` and a newline."""
        return b'{"type":"' + event_type.encode() + b'","object":' + self.encode(obj) + b"}\n"

    def event_chunk(
        self,
        event_type: str,
        stored: Mapping[str, Any],
        *,
        served: Callable[[Mapping[str, Any]], Mapping[str, Any]],
        version: str,
    ) -> bytes:
        """``event_line`` of ``served(stored)`` framed as one HTTP chunk.

        Built once per stored object, event type and served ``version`` (a custom resource
        served at a version is a new dict each time, so the key is the stored object) and
        shared by every watcher that sees the event that way.
        """
        key = (event_type, version, id(stored))
        hit = self._chunks.get(key)
        if hit is not None and hit[0] is stored:
            return hit[1]
        data = http_chunk(self.event_line(event_type, served(stored)))
        if (len(self._chunks) >= self._chunk_size
                or self._chunk_bytes + len(data) > self._max_bytes):
            self._chunks.clear()
            self._chunk_bytes = 0
        self._chunks[key] = (stored, data)
        self._chunk_bytes += len(data)
        return data
