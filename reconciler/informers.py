"""Informers and what reads from them: list+watch caches of one resource type, their indexed
store, the cache-backed reader and the own-write recorder, and the label selector they parse.

An operator built with ``Operator`` never needs these (the runtime runs its informers); they are
public for tools, benchmarks and tests that drive the pieces directly. This public module only
re-exports (the implementation is private); see ``docs/driver.md``.
"""

from __future__ import annotations

from reconciler._caches import PassThroughCache, ReadCache
from reconciler._informers import Informer, InformerManager
from reconciler._readers import InformerReader
from reconciler._recording import RecordingClient
from reconciler._selectors import LabelSelector
from reconciler._stores import IndexedCache

__all__ = [
    "IndexedCache",
    "Informer",
    "InformerManager",
    "InformerReader",
    "LabelSelector",
    "PassThroughCache",
    "ReadCache",
    "RecordingClient",
]
