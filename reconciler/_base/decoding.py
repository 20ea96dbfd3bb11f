"""JSON decoding of API responses and watch events, with ``orjson`` as an optional fast path.

``loads`` is what ``reconciler._client.kubernetes`` decodes every response body and watch line
with. When ``orjson`` is installed (the ``fast`` extra) it decodes faster than the standard
library; a document ``orjson`` refuses (an integer beyond 64 bits, say) is decoded by ``json``
instead, so the result never depends on which decoder ran. Without ``orjson`` it is ``json.loads``.
Encoding stays with ``json``: request bodies are small and their bytes must not change.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["FAST", "loads"]


def _standard(data: bytes | str) -> Any:
    return json.loads(data)


def _load_fast() -> Callable[[bytes | str], Any] | None:
    try:
        import orjson  # optional: the `fast` extra
    except ImportError:
        return None
    fast_loads = orjson.loads
    refused = orjson.JSONDecodeError

    def loads(data: bytes | str) -> Any:
        try:
            return fast_loads(data)
        except refused:
            return json.loads(data)  # the standard decoder's answer, or its ValueError

    return loads


_fast = _load_fast()

#: Whether the ``orjson`` fast path is in use.
FAST: bool = _fast is not None

#: Decode one JSON document (``bytes`` or ``str``); raises ``ValueError`` when it is not JSON.
loads: Callable[[bytes | str], Any] = _fast or _standard
