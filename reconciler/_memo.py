"""The resync memo: a child whose desired object and live version are as they were at its last
``UNCHANGED`` reconcile is unchanged again, without matching or encoding anything.

A periodic resync of an unchanged parent rebuilds its children (builders are cheap and may read
things outside the parent, so they always run) but need not compare each built child with its
live object again: ``ChildMemo`` remembers, per (parent uid, child), a digest of the built child
and the live child's uid and ``resourceVersion`` at the last reconcile that found nothing to do,
and answers that result again while all of them are equal. Any change to the built child (a
builder reading new outside state included) or to the live object (its version changes on every
write) misses the memo and takes the full path. Only results that made no request, wrote nothing
and asked for no requeue are remembered, and never for states with hooks (a hook may decide
differently on the same inputs). Pure bookkeeping: no I/O.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import attrs

from builders import DesiredState, ObjectRef
from reconciler._reconciling import Action, ReconcileResult

__all__ = ["ChildMemo"]

_Key = tuple[str, ObjectRef]
_Entry = tuple[bytes, DesiredState, str, str, ReconcileResult]


def _digest(obj: Mapping[str, Any]) -> bytes | None:
    """128 bits of BLAKE2b over the sorted-key JSON (kept small: one entry per child)."""
    try:
        text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return None
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def _version(live: Mapping[str, Any]) -> tuple[str, str]:
    meta = live.get("metadata") or {}
    return str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")


class ChildMemo:
    """Per-child outcomes of the last reconcile that found nothing to do, at most ``size`` of
    them (least recently used dropped first). Thread-safe."""

    def __init__(self, *, size: int = 100_000) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[_Key, _Entry] = OrderedDict()
        self.hits = 0

    def lookup(
        self, parent_uid: str, ref: ObjectRef, obj: Mapping[str, Any], state: DesiredState,
        live: Mapping[str, Any],
    ) -> tuple[ReconcileResult | None, bytes | None]:
        """The remembered result for this built child and live object, or None; and the built
        child's digest (to pass to :meth:`remember`)."""
        if state.create_hooks or state.update_hooks or state.delete_hooks:
            return None, None
        digest = _digest(obj)
        uid, version = _version(live)
        if digest is None or not version:
            return None, digest
        with self._lock:
            entry = self._entries.get((parent_uid, ref))
            if entry is None or entry[0] != digest or entry[1] != state or entry[2:4] != (
                uid, version
            ):
                return None, digest
            self._entries.move_to_end((parent_uid, ref))
            self.hits += 1
        return attrs.evolve(entry[4], live=live), digest

    def remember(
        self, parent_uid: str, ref: ObjectRef, digest: bytes | None, state: DesiredState,
        live: Mapping[str, Any], result: ReconcileResult,
    ) -> None:
        """Keep ``result`` if it is an ``UNCHANGED`` one that made no request; else forget."""
        key = (parent_uid, ref)
        uid, version = _version(live)
        keep = (digest is not None and version and result.action is Action.UNCHANGED
                and not result.api_calls and result.requeue_after is None and not result.dry_run
                and not (state.create_hooks or state.update_hooks or state.delete_hooks))
        with self._lock:
            if not keep:
                self._entries.pop(key, None)
                return
            assert digest is not None
            # Without its live object: the cache's next version must not be kept alive here.
            self._entries[key] = (digest, state, uid, version, attrs.evolve(result, live=None))
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
