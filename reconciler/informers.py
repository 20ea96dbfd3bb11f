"""Informers and what reads from them: list+watch caches of one resource type, their indexed
store, the cache-backed reader and the own-write recorder, and the label selector they parse.

An operator built with ``Operator`` never needs these (the runtime runs its informers); they are
public for tools, benchmarks and tests that drive the pieces directly. This public module only
re-exports (the implementation is private); see ``docs/driver.md``.
"""

from __future__ import annotations

from reconciler._cache.children import InformerManager
from reconciler._cache.informers import WATCH_INACTIVITY_TIMEOUT, Informer, WatchOptions
from reconciler._cache.readers import InformerReader
from reconciler._cache.recording import RecordingClient
from reconciler._cache.selectors import LabelSelector
from reconciler._cache.stores import IndexedCache
from reconciler._client.caches import ForwardingReader, PassThroughCache, ReadCache

__all__ = [
    "WATCH_INACTIVITY_TIMEOUT",
    "ForwardingReader",
    "IndexedCache",
    "Informer",
    "InformerManager",
    "InformerReader",
    "LabelSelector",
    "PassThroughCache",
    "ReadCache",
    "RecordingClient",
    "WatchOptions",
]
