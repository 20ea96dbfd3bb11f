"""The resync memos: what a reconcile of an unchanged parent or child need not compute again.

``BuildMemo`` (opt-in: ``Applying(reuse_builds=True)``) keeps, per parent, the evaluated output
of its builders (each child after ``stamp_identity``, its ``DesiredState`` and its digest) with
the parent's uid and ``resourceVersion``, and the component node of each child; a reconcile of
the same parent at the same version (a periodic resync, a child's drift, a dependency that became
ready) reuses them instead of calling the builders; the toolkit's own status write of the
parent carries the build to the version it leaves (``BuildMemo.carry``: it changes nothing a
builder reads), so a parent whose dependency became ready after that write is not built
again. Components' gates (dependencies, preconditions, ``when_served``) are not part of the
build: the reconcile's ordering evaluates them against live state at every write, from the
kept nodes. Any other change to
the parent (spec, labels, annotations, another writer's status: its version changes on every
write) misses it;
builds with a failed builder or a state with hooks are never kept; ``forget()`` (called by
``OperatorRuntime.resync_all()``) drops every build, for outside state the builders read.

``ChildMemo`` then skips the match: it remembers, per (parent uid, child), a digest of the built
child and the live child's uid and ``resourceVersion`` at the last reconcile that found nothing
to do, and answers that result again while all of them are equal. Any change to the built child
(a builder reading new outside state included) or to the live object (its version changes on
every write) misses the memo and takes the full path. Only results that made no request, wrote
nothing and asked for no requeue are remembered, and never for states with hooks (a hook may
decide differently on the same inputs). Pure bookkeeping: no I/O.

``StatusMemo`` skips a status write that would change nothing the server keeps: it remembers,
per parent, the status our last status write left (as the server returned it) and which fields
that write sent; while the parent's status is still exactly that, a write whose kept fields have
the same values (times aside) and whose other fields were all sent then, and dropped, writes
nothing. The parent's status normally answers this itself (nothing changed, nothing written),
but a CRD whose status schema prunes the toolkit's fields (``conditions``,
``observedGeneration``, ``lastReconcileTime``: client-go's ``sample-controller`` Foo keeps only
``availableReplicas``) hands back a status that always looks out of date, and every resync, and
every change of the parent's spec, would write it again.

``RecentKeys`` is a bounded set with the same discipline, for the parents the parent reconcile
must leave alone (their namespace is being deleted). All three are least recently used first out,
under a lock: a hit moves its entry to the back, so what is in use is not the next to be dropped,
and concurrent workers never race a move against an eviction. (The set is kept here, out of
``_parents.py``, whose squeeze under 500 lines once made it first-in-first-out, read unlocked.)
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

import attrs

from builders import DesiredState, ObjectRef
from reconciler._cache.stores import compact
from reconciler._reconcile.reconciling import Action, ReconcileResult

__all__ = ["BuildMemo", "ChildMemo", "KeptBuild", "RecentKeys", "StatusMemo", "digest_of"]

K = TypeVar("K", bound=Hashable)

_Key = tuple[str, ObjectRef]
_Entry = tuple[bytes, DesiredState, str, str, ReconcileResult]


def digest_of(obj: Mapping[str, Any]) -> bytes | None:
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
        live: Mapping[str, Any], digest: bytes | None = None,
    ) -> tuple[ReconcileResult | None, bytes | None]:
        """The remembered result for this built child and live object, or None; and the built
        child's digest (to pass to :meth:`remember`; ``digest`` when given, as ``BuildMemo``
        kept it, else computed)."""
        if state.create_hooks or state.update_hooks or state.delete_hooks:
            return None, None
        if digest is None:
            digest = digest_of(obj)
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


Built = tuple[ObjectRef, dict[str, Any], DesiredState, bytes | None]
"""One evaluated builder: the child's ref, the child (identity stamped), its state, its digest."""


@attrs.frozen(kw_only=True)
class KeptBuild:
    """A parent's evaluated build as ``BuildMemo`` keeps it: the children, and the component
    node each belongs to (``builders.Component``: its dependencies, precondition and
    ``when_served``, which the reconcile's ordering evaluates against live state at each write,
    so a build with gates is kept like any other)."""

    children: tuple[Built, ...]
    nodes: Mapping[ObjectRef, Any] = attrs.field(factory=dict)
    placed: tuple[Any, ...] = ()
    """The children placed in other clusters (``reconciler._reconcile.placement``)."""


@attrs.frozen(kw_only=True)
class _Build:
    uid: str
    version: str
    epoch: int
    kept: KeptBuild


class BuildMemo:
    """The last evaluated build of each parent, keyed by the parent's namespace and name, at
    most ``size`` of them (least recently used dropped first). Thread-safe.

    The children it hands out are shared between reconciles (and their leaves with the caches'
    objects: ``reconciler._cache.stores.compact``): callers must not change them in place
    (``ParentReconciler`` hands the resource reconcile a copy)."""

    def __init__(self, *, size: int = 100_000) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[str, str], _Build] = OrderedDict()
        self._epoch = 0
        self.hits = 0
        self.inputs_key: Callable[[Mapping[str, Any]], str] | None = None
        """The versions of what a parent's builders read besides it (``Operator.inputs``: the
        runtime sets ``InputWatch.versions_of``), part of the key: a build is reused only while
        the parent's and its inputs' ``resourceVersion``s are unchanged."""

    def inputs_of(self, parent: Mapping[str, Any]) -> str:
        """The inputs part of ``parent``'s key now (read before the builders read anything)."""
        return "" if self.inputs_key is None else self.inputs_key(parent)

    @property
    def epoch(self) -> int:
        """Advanced by :meth:`forget` of all; a build begun before is not kept (see remember)."""
        return self._epoch

    def lookup(self, parent: Mapping[str, Any]) -> KeptBuild | None:
        """The build kept for this very parent (same uid and ``resourceVersion``, and the
        same versions of its inputs), or None."""
        key, uid, version = _parent_key(parent)
        if not uid or not version:
            return None
        version += self.inputs_of(parent)
        with self._lock:
            entry = self._entries.get(key)
            if (entry is None or entry.uid != uid or entry.version != version
                    or entry.epoch != self._epoch):
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry.kept

    def remember(
        self, parent: Mapping[str, Any], built: list[Built], *, epoch: int, failed: bool = False,
        inputs: str = "", nodes: Mapping[ObjectRef, Any] | None = None,
        placed: tuple[Any, ...] = (),
    ) -> list[Built]:
        """Keep the children built for ``parent`` by a build begun at ``epoch``, with their
        digests and their component ``nodes``; returns them so. A build that ``failed`` (a
        builder raised), has a state with hooks, or begun before the last :meth:`forget` of all
        is not kept (the entry is dropped).
        ``inputs`` is :meth:`inputs_of` as read before the build: an input that changed during
        the build leaves an entry no later lookup finds."""
        key, uid, version = _parent_key(parent)
        version += inputs
        hooks = any(state.has_hooks for _, _, state, _ in built)
        with self._lock:
            if failed or hooks or not uid or not version or epoch != self._epoch:
                self._entries.pop(key, None)
                return built
        # Kept compact, as the caches keep objects: keys and short strings interned, leaves
        # shared with equal ones of other builds and of the cached children (labels, ports,
        # probes, selectors), so a thousand parents' builds cost what differs between them.
        children = tuple((ref, compact(obj), state, digest_of(obj))
                         for ref, obj, state, _ in built)
        with self._lock:
            if epoch == self._epoch:
                self._entries[key] = _Build(uid=uid, version=version, epoch=epoch,
                                            kept=KeptBuild(children=children,
                                                           nodes=dict(nodes or {}),
                                                           placed=placed))
                self._entries.move_to_end(key)
                while len(self._entries) > self._size:
                    self._entries.popitem(last=False)
        return list(children)

    def carry(self, before: Mapping[str, Any], written: Mapping[str, Any],
              patch: Mapping[str, Any]) -> bool:
        """Keep ``before``'s build for ``written``, the parent as the toolkit's own status write
        of ``patch`` left it (the server's answer), when that write changed nothing a builder
        reads: ``written`` is ``before`` but for its ``resourceVersion``, ``managedFields`` and
        the status fields ``patch`` sent. The next reconcile of the parent at that version (a
        dependency that became ready, a child's drift) then reuses the build; any other change
        (another writer's status field, a label, the spec) leaves the entry at ``before``'s
        version, which no later lookup finds. Whether it was carried."""
        key, uid, version = _parent_key(before)
        new_key, new_uid, new_version = _parent_key(written)
        if not uid or not version or not new_version or (new_key, new_uid) != (key, uid):
            return False
        if not _only_status_written(before, written, patch):
            return False
        inputs = self.inputs_of(before)  # changed since the build: the entry is stale anyway
        with self._lock:
            entry = self._entries.get(key)
            if (entry is None or entry.uid != uid or entry.version != version + inputs
                    or entry.epoch != self._epoch):
                return False
            self._entries[key] = attrs.evolve(entry, version=new_version + inputs)
            return True

    def forget(self, parent: tuple[str, str] | None = None) -> None:
        """Drop the build of ``parent`` (namespace, name: gone, or being deleted); without one,
        drop every build (outside state the builders read changed): the next reconcile of each
        parent calls its builders, and a build begun before this call is not kept."""
        with self._lock:
            if parent is not None:
                self._entries.pop(parent, None)
                return
            self._epoch += 1
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


_SERVER_META = ("resourceVersion", "managedFields")


def _only_status_written(before: Mapping[str, Any], written: Mapping[str, Any],
                         patch: Mapping[str, Any]) -> bool:
    """Whether ``written`` differs from ``before`` only in server-kept metadata and in the
    status fields ``patch`` sent (a merge patch: those fields, nested or not, are the write's)."""
    if before.keys() - {"status"} != written.keys() - {"status"}:
        return False
    for field, value in before.items():
        if field == "metadata":
            meta = written.get("metadata") or {}
            if not isinstance(value, Mapping) or {
                k: v for k, v in value.items() if k not in _SERVER_META} != {
                    k: v for k, v in meta.items() if k not in _SERVER_META}:
                return False
        elif field != "status" and written.get(field) != value:
            return False
    sent = patch.get("status")
    sent = sent if isinstance(sent, Mapping) else {}
    old = before.get("status")
    old = old if isinstance(old, Mapping) else {}
    new = written.get("status")
    new = new if isinstance(new, Mapping) else {}
    return all(old.get(k) == new.get(k) for k in (old.keys() | new.keys()) - sent.keys())


def _parent_key(parent: Mapping[str, Any]) -> tuple[tuple[str, str], str, str]:
    meta = parent.get("metadata") or {}
    key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    return key, str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")


class RecentKeys(Generic[K]):
    """A set of at most ``size`` keys, the least recently used dropped first. Thread-safe.

    ``add`` and a ``touch`` that finds its key both make the key the most recently used; ``in``
    only looks."""

    def __init__(self, *, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._keys: OrderedDict[K, None] = OrderedDict()

    def add(self, key: K) -> None:
        """Keep ``key`` as the most recently used, dropping the least recently used past
        ``size``."""
        with self._lock:
            self._keys[key] = None
            self._keys.move_to_end(key)
            while len(self._keys) > self._size:
                self._keys.popitem(last=False)

    def touch(self, key: K) -> bool:
        """Whether ``key`` is kept; if so it becomes the most recently used (a hit)."""
        with self._lock:
            if key not in self._keys:
                return False
            self._keys.move_to_end(key)
            return True

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._keys

    def __len__(self) -> int:
        with self._lock:
            return len(self._keys)


def _timeless(key: str, value: Any) -> Any:
    """A status field without the times every write moves (the conditions'
    ``lastTransitionTime``)."""
    if key == "conditions" and isinstance(value, list):
        return [{k: v for k, v in c.items() if k != "lastTransitionTime"}
                if isinstance(c, Mapping) else c for c in value]
    return value


class StatusMemo:
    """The status writes the server took, at most ``size`` parents (see the module docstring).
    Thread-safe."""

    def __init__(self, *, size: int = 100_000) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[dict[str, Any], frozenset[str]]] = OrderedDict()

    def taken(self, parent: Mapping[str, Any], patch: Mapping[str, Any]) -> bool:
        """Whether writing ``patch`` to ``parent`` would leave its status as it is: the status
        is still what our last write of it left, each field of ``patch`` the server kept then
        has that value again (times aside), and each other field was sent then and dropped."""
        uid = str((parent.get("metadata") or {}).get("uid") or "")
        with self._lock:
            entry = self._entries.get(uid)
            if entry is None:
                return False
            self._entries.move_to_end(uid)
        kept, sent = entry
        if (parent.get("status") or {}) != kept:
            return False
        for key, value in (patch.get("status") or {}).items():
            if key in kept:
                if _timeless(key, value) != _timeless(key, kept[key]):
                    return False
            elif key not in sent:  # never sent: the server may keep it
                return False
        return True

    def remember(self, written: Mapping[str, Any], patch: Mapping[str, Any]) -> None:
        """Our status write of ``patch`` returned ``written`` (the parent as the server keeps
        it)."""
        uid = str((written.get("metadata") or {}).get("uid") or "")
        status = written.get("status")
        if not uid or not isinstance(status, Mapping):
            return
        with self._lock:
            self._entries[uid] = (dict(status), frozenset(patch.get("status") or ()))
            self._entries.move_to_end(uid)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
