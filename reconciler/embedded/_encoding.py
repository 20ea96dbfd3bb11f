"""JSON encoding of stored objects, memoised: stored objects never change, so neither does
their encoding.

A GET of a popular object, or one event fanned out to twenty watchers, is encoded once. The
cache holds a reference to each encoded object (so its ``id`` cannot be reused while cached) and
is cleared when it grows past its size. It is used only on the server's event loop thread.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["EncodeCache", "encode"]


def encode(value: Any) -> bytes:
    """Compact JSON bytes, as the API server sends them."""
    return json.dumps(value, separators=(",", ":")).encode()


class EncodeCache:
    """Encodings of immutable stored objects, by identity."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._entries: dict[int, tuple[Mapping[str, Any], bytes]] = {}

    def encode(self, obj: Mapping[str, Any]) -> bytes:
        """The JSON bytes of ``obj`` (a stored object, never mutated)."""
        hit = self._entries.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        data = encode(obj)
        if len(self._entries) >= self._size:
            self._entries.clear()
        self._entries[id(obj)] = (obj, data)
        return data

    def event_line(self, event_type: str, obj: Mapping[str, Any]) -> bytes:
        """One watch line: ``{"type":...,"object":...}`` and a newline."""
        return b'{"type":"' + event_type.encode() + b'","object":' + self.encode(obj) + b"}\n"
