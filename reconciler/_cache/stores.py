"""The indexed store: the objects of one resource type as an informer holds them in memory.

``IndexedCache`` answers by namespace/name, by ``metadata.uid``, by the parents an object names
(controller owner reference or ``optk.dev/owner-uid``) and by label, under one lock. It holds
what an informer (``reconciler._cache.informers``) lists and watches, plus what the toolkit's own
writes write through (``reconciler._cache.recording``); it neither reads the cluster nor runs
threads. It keys objects by ``builders.ObjectRef.of(obj).namespaced_name`` and finds parents with
``builders.names.owner_uids``: identity has one owner, in ``builders``.

What it stores is a compact copy of what it is given (``compact``): ``metadata.managedFields``
is dropped but for its ``Apply`` entries (server bookkeeping: change detection treats it as
volatile, the matcher ignores it; server-side apply's planner reads who applied what) and every
key and short string value is interned, so the
thousands of copies of ``apiVersion``, label keys and values, namespaces and field names share
one string each. The caller's object is never changed; readers get plain dicts and lists.

An object once seen deleted never comes back at a version from before its deletion (issue 21: a
late answer revived a deleted parent, which was then reconciled for ever, its children re-created
and collected again). Two rules, both checked by a Hypothesis state machine
(tests/driver/test_cache_state_machine.py):

- the stream's high-water mark: the cache knows every change up to the newest version the stream
  delivered (an event, a bookmark: ``advance``, a relist's version). An own write's answer at or
  below it is already reflected, so it is written through only onto the same object at an older
  version, never to add an object the cache does not hold (deleted meanwhile);
- tombstones: every deletion (a DELETED event, an object a relist no longer has, an own delete
  or a 404: ``forget``) keeps the uid with the version it was deleted at, and a later ``upsert``
  of that uid is refused unless its version is newer (an object a label selector let go of and
  took back). The newest ``_MAX_TOMBSTONES`` are kept.

The module is over 500 lines because the store is one concept under one lock: its indexes, its
compact copies, the streamed versions and the rules that keep deleted objects from coming back
all answer what the cache holds, and each part reads the others' private state.

It also answers which version of an object the list or watch last delivered
(``streamed_version``), which the informer compares a relist with. That is the cached version
except while an own write has moved the cache ahead of the stream (until its echo arrives) or
dropped an object the stream still has: only those few differences are kept, so the answer
costs no memory per object.
"""

from __future__ import annotations

import builtins
import contextlib
import sys
import threading
from collections.abc import Iterable
from typing import Any, TypeVar

from builders import ObjectRef
from builders.names import owner_uids
from reconciler._cache.selectors import LabelSelector
from reconciler._client.protocol import KubeObject

__all__ = [
    "IndexedCache",
    "compact",
    "resource_version",
]

_SHORT = 64
"""String values up to this length are interned (names, labels, enums, images, uids); longer
ones (annotations such as the last-applied one, config data) are kept as they are."""
_MAX_LEAVES = 65_536
"""Distinct leaves (dicts and lists) remembered for sharing, the oldest forgotten first: a bound
on what the memo keeps alive beyond the cached objects (a few MiB at most)."""
_intern = sys.intern
_SCALARS = (int, bool, float)
_T = TypeVar("_T")


class _Leaf:
    """A leaf as a memo key: equal when the values are equal item by item, in order and type
    (``True``, ``1`` and ``1.0`` are equal in Python, not in JSON)."""

    __slots__ = ("_hash", "value")

    def __init__(self, value: Any, identity: tuple[Any, ...]) -> None:
        self.value, self._hash = value, hash(identity)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Leaf):
            return NotImplemented
        a, b = self.value, other.value
        if type(a) is not type(b) or a != b:
            return False
        if type(a) is dict:
            return list(a) == list(b) and list(map(type, a.values())) == list(map(type, b.values()))
        return list(map(type, a)) == list(map(type, b))


_leaves: dict[_Leaf, Any] = {}


def compact(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` for a cache: of ``metadata.managedFields`` only the ``Apply`` entries;
    every key and every string value of up to 64 characters interned; and every leaf dict or
    list (one whose values are all short strings, numbers, booleans or None: labels, selectors,
    ports, probes, owner references, arguments) shared with equal leaves of other cached
    objects. ``obj`` itself is not changed. Cached objects are read-only (as every input in
    this project): a shared leaf changed in place would change it in every object that holds
    it."""
    out = _compact_dict(obj, top=True)
    meta = out.get("metadata")
    if type(meta) is dict and "managedFields" in meta:
        # ``meta`` is the copy's own: it holds a dict, not a leaf. Server-side apply's planner
        # reads who applied what (``_reconcile.applying``): only ``Apply`` entries stay.
        applied = [e for e in meta["managedFields"] or ()
                   if type(e) is dict and e.get("operation") == "Apply"]
        if applied:
            meta["managedFields"] = applied
        else:
            del meta["managedFields"]
    return out


def _compact_dict(value: dict[str, Any], *, top: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    leaf = not top
    for key, item in value.items():
        kind = type(item)
        if kind is str:
            if len(item) <= _SHORT:
                item = _intern(item)
            else:
                leaf = False
        elif kind is dict:
            item, leaf = _compact_dict(item), False
        elif kind is list:
            item, leaf = _compact_list(item), False
        elif item is not None and kind not in _SCALARS:
            leaf = False
        out[_intern(key) if type(key) is str else key] = item
    if not leaf:
        return out
    return _share(out, tuple(out.items()))


def _compact_list(value: list[Any]) -> list[Any]:
    out: list[Any] = []
    leaf = True
    for item in value:
        kind = type(item)
        if kind is str:
            if len(item) <= _SHORT:
                item = _intern(item)
            else:
                leaf = False
        elif kind is dict:
            item, leaf = _compact_dict(item), False
        elif kind is list:
            item, leaf = _compact_list(item), False
        elif item is not None and kind not in _SCALARS:
            leaf = False
        out.append(item)
    if not leaf:
        return out
    return _share(out, (list, *out))


def _share(value: _T, identity: tuple[Any, ...]) -> _T:
    """The remembered leaf equal to ``value`` (``identity`` is its items, for the hash), or
    ``value`` itself, then remembered (the oldest forgotten past ``_MAX_LEAVES``)."""
    leaf = _Leaf(value, identity)
    shared: _T = _leaves.setdefault(leaf, leaf).value
    if shared is value and len(_leaves) > _MAX_LEAVES:
        with contextlib.suppress(KeyError, RuntimeError, StopIteration):  # evicted elsewhere
            del _leaves[next(iter(_leaves))]
    return shared


def resource_version(obj: KubeObject | None) -> str:
    """``metadata.resourceVersion`` of ``obj``, ``""`` when absent."""
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")


def _after(candidate: str, current: str) -> bool:
    """Whether ``candidate`` is strictly newer than ``current`` (integers compare; an empty or
    opaque version is not known to be newer)."""
    if candidate.isdigit() and current.isdigit():
        return int(candidate) > int(current)
    return False


def _newer_or_equal(candidate: str, current: str) -> bool:
    """Whether ``candidate`` is not older than ``current`` (integers compare; opaque ones win)."""
    if not current or not candidate:
        return True
    if candidate.isdigit() and current.isdigit():
        return int(candidate) >= int(current)
    return True



_MAX_TOMBSTONES = 10_000


class IndexedCache:
    """The objects of one type, indexed by namespace/name, uid, owner uid and label; thread-safe.

    Returned objects are the cache's own: read them, never mutate them.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._by_uid: dict[str, tuple[str, str]] = {}
        self._by_owner: dict[str, set[tuple[str, str]]] = {}
        self._by_label: dict[tuple[str, str], set[tuple[str, str]]] = {}
        # uid -> the version it was deleted at ("" when not known yet): an object seen deleted
        # is never stored again at a version from before its deletion (``_bury``).
        self._tombstones: dict[str, str] = {}
        # The newest (numeric) version the stream delivered: the cache reflects every change up
        # to it, so an own write's answer at or below it brings nothing new.
        self._high = 0
        # The version the stream last delivered, for the keys where it is not the cached one
        # ("" when the stream never delivered the object): see ``streamed_version``.
        self._streamed: dict[tuple[str, str], str] = {}

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The object named ``namespace/name`` (namespace None or "" for cluster scope)."""
        with self._lock:
            return self._objects.get((namespace or "", name))

    def get_by_uid(self, uid: str) -> dict[str, Any] | None:
        """The object with this ``metadata.uid``."""
        with self._lock:
            key = self._by_uid.get(uid)
            return None if key is None else self._objects.get(key)

    def by_owner_uid(self, uid: str) -> list[dict[str, Any]]:
        """Objects whose controller owner reference or owner-uid label names ``uid``."""
        with self._lock:
            return [self._objects[k] for k in sorted(self._by_owner.get(uid, ()))]

    def by_label(self, key: str, value: str) -> list[dict[str, Any]]:
        """Objects labelled ``key=value``."""
        with self._lock:
            return [self._objects[k] for k in sorted(self._by_label.get((key, value), ()))]

    def list(
        self, *, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        """Objects in ``namespace`` (all when None) matching ``label_selector``."""
        selector = LabelSelector.parse(label_selector)
        with self._lock:
            keys: Iterable[tuple[str, str]] = self._objects
            for key, op, values in selector.requirements:
                if op == "in" and len(values) == 1:  # an equality: start from its index
                    keys = self._by_label.get((key, next(iter(values))), ())
                    break
            return [
                obj for (ns, name) in sorted(keys)
                if (namespace is None or ns == namespace)
                and selector.matches((obj := self._objects[(ns, name)]).get("metadata", {})
                                     .get("labels"))
            ]

    def keys(self) -> builtins.list[tuple[str, str]]:
        """Every ``(namespace, name)`` in the cache."""
        with self._lock:
            return list(self._objects)

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def upsert(
        self, obj: dict[str, Any], *, own_write: bool = False, listed: bool = False
    ) -> tuple[dict[str, Any] | None, bool]:
        """Store a compact copy of ``obj`` (``compact``) unless the cache holds a newer version;
        ``(old, stored)``. The same uid at the same ``resourceVersion`` is the same object (the
        watch echo of a write the cache already holds): the cached copy stays, ``stored`` is
        True. ``own_write``: ``obj`` is what our own write returned, not what the list or watch
        delivered (``streamed_version`` stays where the stream left it). ``listed``: ``obj``
        comes from a complete list (``relist``, which moves the stream's high-water mark once
        it is done). Deleted objects are not revived (see the module docstring)."""
        key = ObjectRef.of(obj).namespaced_name
        uid = _uid(obj)
        version = resource_version(obj)
        with self._lock:
            old = self._objects.get(key)
            if not own_write:
                self._streamed_at(key, version, old)
                if not listed:
                    self._advance(version)
            if self._stale(uid, version, old, own_write=own_write):
                return old, False
            if old is not None:
                current = resource_version(old)
                if not _newer_or_equal(version, current):
                    return old, False
                if version and version == current and uid == _uid(old):
                    return old, True
        stored = compact(obj)  # outside the lock: readers need not wait for the copy
        key = ObjectRef.of(stored).namespaced_name  # the interned name: one copy of it
        with self._lock:
            old = self._objects.get(key)
            if self._stale(uid, version, old, own_write=own_write):  # deleted meanwhile?
                return old, False
            if old is not None and not _newer_or_equal(version, resource_version(old)):
                return old, False
            self._tombstones.pop(uid, None)  # back in scope at a later version, if buried
            if old is not None:
                self._unindex(key, old)
                if (replaced := _uid(old)) and replaced != uid:
                    self._bury(replaced, version)  # its name is taken: it was deleted by then
            if own_write:
                self._keep_streamed(key, old)
            else:
                self._streamed.pop(key, None)  # the stream and the cache agree again
            self._objects[key] = stored
            self._index(key, stored)
            return old, True

    def _stale(self, uid: str, version: str, old: dict[str, Any] | None, *,
               own_write: bool) -> bool:
        """Whether ``uid`` at ``version`` must not be stored (lock held): it was seen deleted
        since (a tombstone), or it is an own write's answer the stream already delivered while
        the cache no longer holds the object (deleted or replaced since)."""
        if uid and uid in self._tombstones and not self._resurrects(uid, version):
            return True
        return own_write and self._known(version) and (old is None or _uid(old) != uid)

    def remove(
        self, obj: KubeObject, *, own_write: bool = False, version: str | None = None
    ) -> dict[str, Any] | None:
        """Drop the object named like ``obj`` (its DELETED event); returns what was cached.
        ``own_write``: our own write took it out of scope before the stream said so. The uid
        is tombstoned at ``version`` (default: ``obj``'s own version, which a DELETED event
        carries as the version of the deletion): no older version of it is stored again."""
        key = ObjectRef.of(obj).namespaced_name
        with self._lock:
            if own_write:
                self._keep_streamed(key, self._objects.get(key))
            else:
                self._streamed.pop(key, None)
            old = self._objects.get(key)
            uid = _uid(obj) or _uid(old or {})
            buried = resource_version(obj) if version is None else version
            if not own_write:
                self._advance(buried)
            if uid:
                self._bury(uid, buried)
            if old is not None and _uid(old) not in ("", uid):
                # The DELETED event of an older object of the same name: the cache already
                # holds its successor (an own create); the stream has not delivered it yet.
                if not own_write:
                    self._streamed[key] = ""
                return None
            if old is None:
                return None
            del self._objects[key]
            self._unindex(key, old)
            return old

    def relist(
        self, items: Iterable[dict[str, Any]], *, version: str, quiet: bool = False
    ) -> builtins.list[tuple[str, dict[str, Any] | None, dict[str, Any]]]:
        """Replace the cache's content with a complete list taken at ``version``; the events
        that turn the old content into the new one, ``(type, old, new)``, for the handlers.

        Each item is compared with what the stream last delivered of it (``streamed_version``),
        not with the cache: the cache may hold this very version written through by an own
        write whose echo the stream lost, carrying a foreign change made before that write. So
        a MODIFIED from a relist has no ``old``: handlers treat it as a change. An item whose
        uid was deleted after ``version`` (a late list) is not stored and yields no event.
        Objects the list no longer has are removed and tombstoned at ``version`` (they were
        gone by then). ``quiet``: store, but report no ADDED/MODIFIED (the first list of an
        informer whose objects merely exist)."""
        events: builtins.list[tuple[str, dict[str, Any] | None, dict[str, Any]]] = []
        seen: builtins.set[tuple[str, str]] = builtins.set()
        for obj in items:
            key = ObjectRef.of(obj).namespaced_name
            seen.add(key)
            streamed = self.streamed_version(*key)
            _, stored = self.upsert(obj, listed=True)
            if not stored and self.is_buried(obj):
                continue
            if quiet or streamed == resource_version(obj):
                continue
            events.append(("ADDED" if streamed is None else "MODIFIED", None, obj))
        for namespace, name in builtins.set(self.keys()) - seen:
            gone = self.get(namespace, name)
            if gone is not None:
                self.remove(gone, version=version)
                events.append(("DELETED", gone, gone))
        self.retain_streamed(seen)
        self.advance(version)
        return events

    def advance(self, version: str) -> None:
        """The stream delivered everything up to ``version`` (a bookmark, a list)."""
        with self._lock:
            self._advance(version)

    def _advance(self, version: str) -> None:
        if version.isdigit() and int(version) > self._high:
            self._high = int(version)

    def _known(self, version: str) -> bool:
        """Whether the stream already delivered ``version`` (lock held)."""
        return version.isdigit() and int(version) <= self._high

    def is_buried(self, obj: KubeObject) -> bool:
        """Whether ``obj``'s uid was seen deleted at or after ``obj``'s version."""
        uid = _uid(obj)
        with self._lock:
            return bool(uid) and uid in self._tombstones and not _after(
                resource_version(obj), self._tombstones[uid])

    def _bury(self, uid: str, version: str) -> None:
        """Remember (lock held) that ``uid`` was deleted at ``version`` ("" when unknown: then
        no version of it comes back), the newest ``_MAX_TOMBSTONES`` only."""
        previous = self._tombstones.pop(uid, None)
        if previous is not None and _after(previous, version):
            version = previous
        self._tombstones[uid] = version
        while len(self._tombstones) > _MAX_TOMBSTONES:
            del self._tombstones[next(iter(self._tombstones))]

    def streamed_version(self, namespace: str | None, name: str) -> str | None:
        """The ``resourceVersion`` the list or watch last delivered of ``namespace/name``;
        None when it never did or last delivered its deletion."""
        key = (namespace or "", name)
        with self._lock:
            version = self._streamed.get(key)
            if version is None:
                cached = self._objects.get(key)
                return None if cached is None else resource_version(cached)
            return version or None

    def retain_streamed(self, keys: builtins.set[tuple[str, str]]) -> None:
        """Forget what the stream delivered of every object not in ``keys`` (a relist's
        answer: the rest is gone)."""
        with self._lock:
            for key in [k for k in self._streamed if k not in keys]:
                del self._streamed[key]

    def _streamed_at(self, key: tuple[str, str], version: str,
                     cached: dict[str, Any] | None) -> None:
        """The stream delivered ``version`` of ``key``: remember it unless the cache will hold
        that very version (``upsert`` drops the entry when it stores it)."""
        if cached is not None and resource_version(cached) == version:
            self._streamed.pop(key, None)
        else:
            self._streamed[key] = version

    def _keep_streamed(self, key: tuple[str, str], cached: dict[str, Any] | None) -> None:
        """An own write is about to change what the cache holds of ``key``: keep what the
        stream last delivered, if that was the cached version."""
        if key not in self._streamed:
            self._streamed[key] = "" if cached is None else resource_version(cached)

    def _resurrects(self, uid: str, version: str) -> bool:
        """Whether ``version`` of buried ``uid`` is newer than its burial (lock held): only an
        object a selector let go of comes back, at a later version; a deleted one never."""
        buried = self._tombstones[uid]
        return bool(buried) and _after(version, buried)

    def forget(self, obj: KubeObject, *, uid: str) -> None:
        """Drop an object that is gone before the stream says so: our own write deleted it, or
        a request for it was answered 404.

        The uid is tombstoned with no version (the deletion's version is not known yet), so
        no version of it is stored again, until its DELETED event (``remove``) records the
        version of the deletion: a reconcile reading the cache right after its delete must not
        see the deleted child as still there, nor a late answer revive a deleted parent.
        """
        key = ObjectRef.of(obj).namespaced_name
        with self._lock:
            if uid not in self._tombstones:
                self._tombstones[uid] = ""
                while len(self._tombstones) > _MAX_TOMBSTONES:
                    del self._tombstones[next(iter(self._tombstones))]
            old = self._objects.get(key)
            if old is not None and str((old.get("metadata") or {}).get("uid") or "") == uid:
                self._keep_streamed(key, old)
                del self._objects[key]
                self._unindex(key, old)

    def _index(self, key: tuple[str, str], obj: KubeObject) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("uid"):
            self._by_uid[str(meta["uid"])] = key
        for uid in owner_uids(obj):
            self._by_owner.setdefault(uid, set()).add(key)
        for label in (meta.get("labels") or {}).items():
            self._by_label.setdefault(label, set()).add(key)

    def _unindex(self, key: tuple[str, str], obj: KubeObject) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("uid") and self._by_uid.get(str(meta["uid"])) == key:
            del self._by_uid[str(meta["uid"])]
        for uid in owner_uids(obj):
            _discard(self._by_owner, uid, key)
        for label in (meta.get("labels") or {}).items():
            _discard(self._by_label, label, key)


def _uid(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _discard(index: dict[Any, set[tuple[str, str]]], entry: Any, key: tuple[str, str]) -> None:
    keys = index.get(entry)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del index[entry]
