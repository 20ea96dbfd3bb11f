"""The object store: one global ``resourceVersion``, an event log with a bounded window, indexes.

This is the embedded server's etcd. Objects are JSON-shaped dicts that are never changed once
stored (every write stores a new dict), so events, list snapshots and watchers can share them
without copying. Every write takes the next global ``resourceVersion`` and appends one event to
the log; the log keeps the last ``history_size`` events and at most about ``history_bytes`` of
their objects (estimated once per write by ``estimate_size``), and a watch or an exact list from
a version older than that window is answered with 410 Expired (``TooOld``), as a compacted etcd
would. Indexes by ``uid`` and by owner ``uid`` serve the garbage collector.

The store knows no HTTP and no per-kind rules (``_operations`` has those). One re-entrant lock
guards every method, so the API handlers, the garbage collector and Python callers never race.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from reconciler.embedded._errors import EmbeddedServerError

__all__ = ["DEFAULT_HISTORY_BYTES", "Bucket", "Key", "Storage", "StoredEvent", "TooOld",
           "estimate_size"]

Bucket = tuple[str, str]
"""``(group, plural)``: where the objects of one resource live, whatever version serves them."""

Key = tuple[str, str, str, str]
"""``(group, plural, namespace, name)``; the namespace is "" for cluster-scoped objects."""


DEFAULT_HISTORY_BYTES = 64 * 1024 * 1024
"""The event log's default bound in bytes (estimated JSON size of the events' objects)."""


def estimate_size(obj: Any, *, depth: int = 0) -> int:
    """About how many bytes ``obj`` takes as JSON, without encoding it.

    Strings count their length plus quotes, every key, value and container a few bytes; past a
    depth of 64 (deeper bodies are refused before they are stored) a node counts as 64 bytes.
    """
    if isinstance(obj, str):
        return len(obj) + 2
    if isinstance(obj, Mapping):
        if depth > 64:
            return 64
        return 2 + sum(len(str(k)) + 4 + estimate_size(v, depth=depth + 1)
                       for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        if depth > 64:
            return 64
        return 2 + sum(1 + estimate_size(v, depth=depth + 1) for v in obj)
    return 8


@attrs.frozen(kw_only=True)
class StoredEvent:
    """One committed write: ``ADDED``, ``MODIFIED`` or ``DELETED`` with the object before it."""

    type: str
    resource_version: int
    bucket: Bucket
    obj: Mapping[str, Any]
    old: Mapping[str, Any] | None
    size: int = 0
    """The estimated bytes of ``obj`` (what the log's byte bound counts)."""


class TooOld(EmbeddedServerError):
    """The requested ``resourceVersion`` is older than the retained window."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def key_of(bucket: Bucket, obj: Mapping[str, Any]) -> Key:
    """The storage key of ``obj`` in ``bucket``."""
    meta = _meta(obj)
    return (bucket[0], bucket[1], str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def _owner_uids(obj: Mapping[str, Any]) -> set[str]:
    refs = _meta(obj).get("ownerReferences") or ()
    return {str(r["uid"]) for r in refs if isinstance(r, Mapping) and r.get("uid")}


class Storage:
    """Versioned objects by bucket, with the event log and watcher subscriptions."""

    def __init__(
        self, *, history_size: int = 20_000, history_bytes: int = DEFAULT_HISTORY_BYTES
    ) -> None:
        if history_size < 1 or history_bytes < 1:
            raise ValueError(
                f"history_size and history_bytes must be positive, got {history_size} and "
                f"{history_bytes}"
            )
        self.lock = threading.RLock()
        self._buckets: dict[Bucket, dict[tuple[str, str], Mapping[str, Any]]] = {}
        self._rv = 0
        self._history: deque[StoredEvent] = deque()
        self._history_size = history_size
        self._history_limit = history_bytes
        self._history_bytes = 0
        self._floor = 0  # events with resourceVersion > floor are all retained
        self._subscribers: list[Callable[[StoredEvent], None]] = []
        self._by_uid: dict[str, Key] = {}
        self._dependents: dict[str, set[Key]] = {}
        self._by_namespace: dict[str, set[Key]] = {}

    # -- versions -------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The latest committed ``resourceVersion``."""
        return self._rv

    @property
    def history_bytes(self) -> int:
        """The estimated bytes of the events the log holds now."""
        with self.lock:
            return self._history_bytes

    @property
    def oldest_resource_version(self) -> int:
        """The oldest version a watch may start from (older ones get 410)."""
        return self._floor

    def next_resource_version(self) -> int:
        """The version the next write will carry (not yet committed)."""
        return self._rv + 1

    # -- reads ----------------------------------------------------------------------------

    def get(self, bucket: Bucket, *, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The stored object or None."""
        with self.lock:
            return self._buckets.get(bucket, {}).get((namespace, name))

    def lookup(self, key: Key) -> Mapping[str, Any] | None:
        """The stored object at ``key`` or None."""
        return self.get((key[0], key[1]), namespace=key[2], name=key[3])

    def get_by_uid(self, uid: str) -> tuple[Key, Mapping[str, Any]] | None:
        """The stored object with this ``uid`` and its key, or None."""
        with self.lock:
            key = self._by_uid.get(uid)
            if key is None:
                return None
            obj = self._buckets.get((key[0], key[1]), {}).get((key[2], key[3]))
            return (key, obj) if obj is not None else None

    def dependents(self, owner_uid: str) -> list[Key]:
        """Keys of the objects whose ``ownerReferences`` name ``owner_uid``."""
        with self.lock:
            return sorted(self._dependents.get(owner_uid, ()))

    def items(self, bucket: Bucket, namespace: str | None = None) -> list[Mapping[str, Any]]:
        """The objects of a bucket (one namespace, or all), ordered by namespace and name."""
        with self.lock:
            objects = self._buckets.get(bucket, {})
            keys = sorted(
                k for k in objects if namespace is None or k[0] == namespace
            )
            return [objects[k] for k in keys]

    def size(self, bucket: Bucket) -> int:
        """How many objects a bucket holds (no lock: a writer's fast check)."""
        return len(self._buckets.get(bucket, ()))

    def buckets(self) -> list[Bucket]:
        """Every bucket that holds or held objects."""
        with self.lock:
            return list(self._buckets)

    def in_namespace(self, namespace: str) -> list[tuple[Bucket, Mapping[str, Any]]]:
        """Every object stored in ``namespace``, with its bucket (from an index)."""
        with self.lock:
            found = []
            for key in sorted(self._by_namespace.get(namespace, ())):
                obj = self.lookup(key)
                if obj is not None:
                    found.append(((key[0], key[1]), obj))
            return found

    def count(self) -> int:
        """How many objects are stored."""
        with self.lock:
            return sum(len(objects) for objects in self._buckets.values())

    # -- writes ---------------------------------------------------------------------------

    def commit(
        self,
        bucket: Bucket,
        obj: Mapping[str, Any],
        *,
        event_type: str,
        old: Mapping[str, Any] | None,
    ) -> StoredEvent:
        """Store (or, for ``DELETED``, remove) ``obj``, whose ``resourceVersion`` is the next one.

        The caller sets ``metadata.resourceVersion`` to ``next_resource_version()`` under
        ``lock``; the event is appended to the log and handed to every subscriber.
        """
        with self.lock:
            rv = int(_meta(obj)["resourceVersion"])
            if rv != self._rv + 1:
                raise RuntimeError(f"out-of-order write: {rv} after {self._rv}")
            self._rv = rv
            key = key_of(bucket, obj)
            objects = self._buckets.setdefault(bucket, {})
            if old is not None:
                self._unindex(key, old)
            if event_type == "DELETED":
                objects.pop((key[2], key[3]), None)
            else:
                objects[(key[2], key[3])] = obj
                self._index(key, obj)
            event = StoredEvent(
                type=event_type, resource_version=rv, bucket=bucket, obj=obj, old=old,
                size=estimate_size(obj),
            )
            self._history.append(event)
            self._history_bytes += event.size
            # Oldest first, by count and by bytes; the newest event always stays (a watch from
            # the version before it can still resume).
            while len(self._history) > 1 and (
                len(self._history) > self._history_size
                or self._history_bytes > self._history_limit
            ):
                dropped = self._history.popleft()
                self._history_bytes -= dropped.size
                self._floor = dropped.resource_version
            for subscriber in list(self._subscribers):
                subscriber(event)
            return event

    def _index(self, key: Key, obj: Mapping[str, Any]) -> None:
        uid = _meta(obj).get("uid")
        if uid:
            self._by_uid[str(uid)] = key
        if key[2]:
            self._by_namespace.setdefault(key[2], set()).add(key)
        for owner in _owner_uids(obj):
            self._dependents.setdefault(owner, set()).add(key)

    def _unindex(self, key: Key, obj: Mapping[str, Any]) -> None:
        uid = _meta(obj).get("uid")
        if uid and self._by_uid.get(str(uid)) == key:
            del self._by_uid[str(uid)]
        in_namespace = self._by_namespace.get(key[2])
        if in_namespace is not None:
            in_namespace.discard(key)
            if not in_namespace:
                del self._by_namespace[key[2]]
        for owner in _owner_uids(obj):
            keys = self._dependents.get(owner)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._dependents[owner]

    def compact(self) -> int:
        """Forget the whole event log (as an etcd compaction would); returns the new floor."""
        with self.lock:
            self._history.clear()
            self._history_bytes = 0
            self._floor = self._rv
            return self._floor

    # -- history --------------------------------------------------------------------------

    def subscribe_since(
        self, resource_version: int | None, subscriber: Callable[[StoredEvent], None]
    ) -> list[StoredEvent]:
        """Atomically return the retained events after ``resource_version`` and subscribe.

        ``None`` subscribes from now on. Raises ``TooOld`` when events after the version were
        already dropped from the window (nothing is subscribed then).
        """
        with self.lock:
            replay: list[StoredEvent] = []
            if resource_version is not None:
                if resource_version < self._floor:
                    raise TooOld(resource_version, self._floor)
                replay = [e for e in self._history if e.resource_version > resource_version]
            self._subscribers.append(subscriber)
            return replay

    def unsubscribe(self, subscriber: Callable[[StoredEvent], None]) -> None:
        """Stop handing events to ``subscriber`` (no error when it was not subscribed)."""
        with self.lock, contextlib.suppress(ValueError):
            self._subscribers.remove(subscriber)

    def snapshot(
        self, bucket: Bucket, resource_version: int, *, namespace: str | None = None
    ) -> list[Mapping[str, Any]]:
        """The objects of a bucket as they were at ``resource_version`` (undoing later events).

        Raises ``TooOld`` when the version is older than the retained window.
        """
        with self.lock:
            if resource_version >= self._rv:
                return self.items(bucket, namespace)
            if resource_version < self._floor:
                raise TooOld(resource_version, self._floor)
            state = dict(self._buckets.get(bucket, {}))
            for event in reversed(self._history):
                if event.resource_version <= resource_version:
                    break
                if event.bucket != bucket:
                    continue
                key = key_of(bucket, event.obj)
                if event.old is None or event.type == "ADDED":
                    state.pop((key[2], key[3]), None)
                else:
                    state[(key[2], key[3])] = event.old
            return [
                state[k] for k in sorted(state) if namespace is None or k[0] == namespace
            ]

