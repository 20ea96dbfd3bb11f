"""JSON encoding of stored objects, memoised: stored objects never change, so neither does
their encoding.

A GET of a popular object, or one event fanned out to twenty watchers, is encoded once: the
watch line of an event, framed as one HTTP chunk, is built once and the same bytes are written
to every watcher that sees the event the same way. The cache holds a reference to each encoded
object (so its ``id`` cannot be reused while cached) and is cleared when it grows past its size.
It is used only on the server's event loop thread.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["EncodeCache", "encode", "http_chunk"]


def encode(value: Any) -> bytes:
    """Compact JSON bytes, as the API server sends them."""
    return json.dumps(value, separators=(",", ":")).encode()


def http_chunk(data: bytes) -> bytes:
    """``data`` framed as one chunk of a ``Transfer-Encoding: chunked`` body."""
    return b"%x\r\n%b\r\n" % (len(data), data)


class EncodeCache:
    """Encodings of immutable stored objects, by identity."""

    def __init__(self, size: int = 4096, *, chunk_size: int = 256) -> None:
        self._size = size
        self._entries: dict[int, tuple[Mapping[str, Any], bytes]] = {}
        self._chunk_size = chunk_size
        self._chunks: dict[tuple[str, str, int], tuple[Mapping[str, Any], bytes]] = {}

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
        if len(self._chunks) >= self._chunk_size:
            self._chunks.clear()
        self._chunks[key] = (stored, data)
        return data
