"""Informers: per-type list+watch caches the driver reacts to and the reconcile reads from.

An ``Informer`` lists one resource type (page by page), then watches from the list's
``resourceVersion`` with bookmarks; when a stream ends it resumes from the last version seen; on
410 Gone it relists and turns the difference between its cache and the new list into events, so no
change is lost; other failures reconnect after a jittered backoff; a stream silent for longer than
the inactivity timeout is treated as dead (the client's read timeout, when it offers one, and the
server-side ``timeoutSeconds`` bound every stream). Its ``IndexedCache`` answers by
namespace/name, by ``metadata.uid``, by ``optk.dev/owner-uid`` and by label.

``InformerManager`` starts informers at run time, the first time a parent's builders produce a
type (so a CRD installed later is watched as soon as it is used), shares one informer per type
among all parents (deduplicated under concurrency), scopes them by the ``managed-by`` label, and
stops an informer when no parent needs its type any more. ``InformerReader`` is the reconciler's
``ReadCache`` over these caches. ``RecordingClient`` wraps the ``ClusterClient`` handed to the
reconcile: it remembers the ``resourceVersion`` of every write so the watch echo of the
toolkit's own write is not taken for drift, and writes the result through to the cache so the
next read sees it.
"""

from __future__ import annotations

import builtins
import contextlib
import inspect
import logging
import re
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import Any

import attrs

from reconciler._caches import PassThroughCache
from reconciler._clients import ClusterClient, KubeObject, WatchEvent
from reconciler._clocks import Clock, RealClock
from reconciler._errors import GoneError, NotFoundError, ReconcilerError
from reconciler._queues import ExponentialBackoff

__all__ = [
    "OWNER_UID_LABEL",
    "EventHandler",
    "IndexedCache",
    "Informer",
    "InformerManager",
    "InformerReader",
    "InformerStats",
    "LabelSelector",
    "RecordingClient",
    "TypeKey",
    "object_key",
    "owner_uids",
]

OWNER_UID_LABEL = "optk.dev/owner-uid"

TypeKey = tuple[str, str]
"""``(apiVersion, kind)`` of a resource type."""

EventHandler = Callable[[str, "dict[str, Any] | None", "dict[str, Any]"], None]
"""Called as ``handler(event_type, old, new)`` for ADDED, MODIFIED and DELETED (``new`` is the
last known state of a deleted object)."""

_log = logging.getLogger("optk.informers")


def object_key(obj: KubeObject) -> tuple[str, str]:
    """``(namespace, name)`` of an object; namespace ``""`` when cluster-scoped."""
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def owner_uids(obj: KubeObject) -> tuple[str, ...]:
    """The uids of the parents an object names: controller owner refs, then the owner-uid label."""
    meta = obj.get("metadata") or {}
    uids: list[str] = []
    for ref in meta.get("ownerReferences") or ():
        uid = ref.get("uid")
        if uid and ref.get("controller") and uid not in uids:
            uids.append(str(uid))
    label = (meta.get("labels") or {}).get(OWNER_UID_LABEL)
    if label and label not in uids:
        uids.append(str(label))
    return tuple(uids)


def _rv(obj: KubeObject | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")


def _newer_or_equal(candidate: str, current: str) -> bool:
    """Whether ``candidate`` is not older than ``current`` (integers compare; opaque ones win)."""
    if not current or not candidate:
        return True
    if candidate.isdigit() and current.isdigit():
        return int(candidate) >= int(current)
    return True


# --- label selectors ---------------------------------------------------------------------------

_REQUIREMENT = re.compile(
    r"\s*(?P<neg>!)?\s*(?P<key>[A-Za-z0-9._/-]+)\s*"
    r"(?:(?P<op>==|=|!=|\s+in\s+|\s+notin\s+)\s*(?P<value>\([^)]*\)|[A-Za-z0-9._-]*))?\s*"
)


@attrs.frozen(kw_only=True)
class LabelSelector:
    """A parsed Kubernetes label selector (``a=b,c!=d,e,!f,g in (h,i),j notin (k)``)."""

    requirements: tuple[tuple[str, str, frozenset[str]], ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> LabelSelector:
        """Parse ``text``; ``ValueError`` naming the selector when it is malformed."""
        if not text or not text.strip():
            return cls()
        parts: list[str] = []
        depth, start = 0, 0
        for i, char in enumerate(text):
            depth += char == "("
            depth -= char == ")"
            if char == "," and depth == 0:
                parts.append(text[start:i])
                start = i + 1
        parts.append(text[start:])
        requirements = []
        for part in parts:
            match = _REQUIREMENT.fullmatch(part)
            if match is None or (match["neg"] and match["op"]):
                raise ValueError(f"malformed label selector {text!r} at {part!r}")
            key, op = match["key"], (match["op"] or "").strip()
            value = match["value"] or ""
            values = frozenset(v.strip() for v in value.strip("()").split(",") if v.strip())
            if op in ("in", "notin") and not value.startswith("("):
                raise ValueError(f"malformed label selector {text!r}: {op} needs (values)")
            if op in ("=", "=="):
                op, values = "in", frozenset({value})
            elif op == "!=":
                op, values = "notin", frozenset({value})
            elif not op:
                op = "!exists" if match["neg"] else "exists"
            requirements.append((key, op, values))
        return cls(requirements=tuple(requirements))

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with these labels is selected."""
        labels = labels or {}
        for key, op, values in self.requirements:
            present = key in labels
            if op == "exists" and not present:
                return False
            if op == "!exists" and present:
                return False
            if op == "in" and (not present or labels[key] not in values):
                return False
            if op == "notin" and present and labels[key] in values:
                return False
        return True


# --- the cache ---------------------------------------------------------------------------------


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
        # uids deleted by our own writes whose DELETED event has not arrived yet: a late
        # ADDED/MODIFIED event of such an object must not bring it back into the cache.
        self._tombstones: dict[str, None] = {}

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

    def upsert(self, obj: dict[str, Any]) -> tuple[dict[str, Any] | None, bool]:
        """Store ``obj`` unless the cache holds a newer version; ``(old, stored)``."""
        key = object_key(obj)
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        with self._lock:
            old = self._objects.get(key)
            if uid and uid in self._tombstones:
                return old, False
            if old is not None and not _newer_or_equal(_rv(obj), _rv(old)):
                return old, False
            if old is not None:
                self._unindex(key, old)
            self._objects[key] = obj
            self._index(key, obj)
            return old, True

    def remove(self, obj: KubeObject) -> dict[str, Any] | None:
        """Drop the object named like ``obj`` (its DELETED event); returns what was cached."""
        key = object_key(obj)
        with self._lock:
            self._tombstones.pop(str((obj.get("metadata") or {}).get("uid") or ""), None)
            old = self._objects.pop(key, None)
            if old is not None:
                self._unindex(key, old)
            return old

    def forget(self, obj: KubeObject, *, uid: str) -> None:
        """Drop an object our own write just deleted, before its DELETED event arrives.

        The uid is kept as a tombstone until that event (``remove``), so that an older event of
        the same object arriving in between does not bring it back: a reconcile reading the
        cache right after its delete must not see the deleted child as still there.
        """
        key = object_key(obj)
        with self._lock:
            self._tombstones[uid] = None
            while len(self._tombstones) > _MAX_TOMBSTONES:
                del self._tombstones[next(iter(self._tombstones))]
            old = self._objects.get(key)
            if old is not None and str((old.get("metadata") or {}).get("uid") or "") == uid:
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


def _discard(index: dict[Any, set[tuple[str, str]]], entry: Any, key: tuple[str, str]) -> None:
    keys = index.get(entry)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del index[entry]


# --- one informer ------------------------------------------------------------------------------


@attrs.define
class InformerStats:
    """Counters of what an informer did (for tests, logs and benchmarks)."""

    lists: int = 0
    watches: int = 0
    relists_after_gone: int = 0
    reconnects: int = 0
    events: int = 0


class Informer:
    """List and watch one resource type into an ``IndexedCache``, calling handlers on changes."""

    def __init__(
        self,
        client: ClusterClient,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        clock: Clock | None = None,
        watch_timeout: int = 300,
        inactivity_timeout: float = 360.0,
        page_size: int = 500,
        backoff: ExponentialBackoff | None = None,
        initial_events: bool = True,
    ) -> None:
        self.client = client
        self.initial_events = initial_events
        self.api_version = api_version
        self.kind = kind
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self._selector = LabelSelector.parse(label_selector)
        self.cache = IndexedCache()
        self.stats = InformerStats()
        self._clock = clock or RealClock()
        self._watch_timeout = watch_timeout
        self._inactivity = inactivity_timeout
        self._page_size = page_size
        self._backoff = backoff or ExponentialBackoff(base=0.05, cap=30.0, jitter=0.5)
        self._handlers: list[EventHandler] = []
        self._cond = threading.Condition()
        self._synced = False
        self._stopped = False
        self._resource_version = ""
        self._thread: threading.Thread | None = None
        self._client_has_inactivity = _accepts(client.watch, "inactivity_timeout")

    def accepts(self, obj: KubeObject) -> bool:
        """Whether ``obj`` is in this informer's scope (namespace and label selector)."""
        meta = obj.get("metadata") or {}
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        return self._selector.matches(meta.get("labels"))

    @property
    def type_key(self) -> TypeKey:
        """``(apiVersion, kind)``."""
        return (self.api_version, self.kind)

    def add_handler(self, handler: EventHandler) -> None:
        """Call ``handler`` for every change from now on (the initial list included if not yet)."""
        with self._cond:
            self._handlers.append(handler)

    def start(self) -> Informer:
        """Start listing and watching in a daemon thread."""
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"informer-{self.kind}", daemon=True
                )
                self._thread.start()
        return self

    def stop(self) -> None:
        """Stop: no handler is called after this returns; the thread ends with its stream."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    @property
    def stopped(self) -> bool:
        """Whether ``stop`` was called."""
        with self._cond:
            return self._stopped

    @property
    def has_synced(self) -> bool:
        """Whether the first list completed (the cache reflects the cluster)."""
        with self._cond:
            return self._synced

    @property
    def resource_version(self) -> str:
        """The last ``resourceVersion`` seen (list, event or bookmark)."""
        with self._cond:
            return self._resource_version

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Block until synced or ``timeout`` (clock seconds); whether it synced."""
        with self._cond:
            deadline = None if timeout is None else self._clock.monotonic() + timeout
            while not self._synced and not self._stopped:
                remaining = None if deadline is None else deadline - self._clock.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._clock.wait(self._cond, remaining)
            return self._synced

    # --- the loop --------------------------------------------------------------------------

    def _run(self) -> None:
        need_list = True
        gone_in_a_row = 0
        while not self.stopped:
            try:
                if need_list:
                    self._list()
                    need_list = False
                self._watch()
                self._backoff.forget("watch")
                gone_in_a_row = 0
            except GoneError:
                _log.info("watch of %s expired (410 Gone); relisting", self.kind)
                self.stats.relists_after_gone += 1
                need_list = True
                gone_in_a_row += 1
                if gone_in_a_row > 1:  # Gone again right after a relist: do not spin
                    self._pause(self._backoff.when("watch"))
            except (ReconcilerError, OSError, ValueError) as error:
                if self.stopped:
                    return
                delay = self._backoff.when("watch")
                self.stats.reconnects += 1
                _log.warning(
                    "watch of %s failed (%s); retrying in %.2fs", self.kind, error, delay,
                    extra={"kind": self.kind},
                )
                if isinstance(error, NotFoundError):
                    need_list = True  # the kind is not served (yet): list again when it is
                self._pause(delay)
            except Exception:  # a handler bug must not kill the informer silently
                _log.exception("informer of %s failed; restarting with a relist", self.kind)
                need_list = True
                self._pause(1.0)

    def _pause(self, seconds: float) -> None:
        with self._cond:
            deadline = self._clock.monotonic() + seconds
            while not self._stopped and self._clock.monotonic() < deadline:
                self._clock.wait(self._cond, deadline - self._clock.monotonic())

    def _list(self) -> None:
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            body = self.client.list(
                self.api_version, self.kind, namespace=self.namespace,
                label_selector=self.label_selector, field_selector=self.field_selector,
                limit=self._page_size, continue_token=token,
            )
            items.extend(body.get("items") or ())
            meta = body.get("metadata") or {}
            token = meta.get("continue") or None
            if not token:
                break
        self.stats.lists += 1
        with self._cond:
            quiet = not self._synced and not self.initial_events
        seen: set[tuple[str, str]] = set()
        for obj in items:
            obj.setdefault("apiVersion", self.api_version)
            obj.setdefault("kind", self.kind)
            seen.add(object_key(obj))
            old, stored = self.cache.upsert(obj)
            if stored and not quiet and (old is None or _rv(old) != _rv(obj)):
                self._dispatch("ADDED" if old is None else "MODIFIED", old, obj)
        for namespace, name in set(self.cache.keys()) - seen:
            gone = self.cache.get(namespace, name)
            if gone is not None:
                self.cache.remove(gone)
                self._dispatch("DELETED", gone, gone)
        with self._cond:
            self._resource_version = str(meta.get("resourceVersion") or "")
            self._synced = True
            self._cond.notify_all()

    def _watch(self) -> None:
        self.stats.watches += 1
        kwargs: dict[str, Any] = {}
        if self._client_has_inactivity:
            kwargs["inactivity_timeout"] = self._inactivity
        events: Iterator[WatchEvent] = iter(self.client.watch(
            self.api_version, self.kind, namespace=self.namespace,
            label_selector=self.label_selector, field_selector=self.field_selector,
            resource_version=self.resource_version or None,
            timeout_seconds=self._watch_timeout, allow_bookmarks=True, **kwargs,
        ))
        for event in events:
            if self.stopped:
                return
            self._handle(event)

    def _handle(self, event: WatchEvent) -> None:
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            return
        version = _rv(obj)
        if kind == "BOOKMARK":
            with self._cond:
                self._resource_version = version or self._resource_version
            return
        obj.setdefault("apiVersion", self.api_version)
        obj.setdefault("kind", self.kind)
        self.stats.events += 1
        if kind == "DELETED":
            old = self.cache.remove(obj)
            self._dispatch("DELETED", old, obj)
        elif kind in ("ADDED", "MODIFIED"):
            old, stored = self.cache.upsert(obj)
            # Not stored: the cache already holds a newer version written through by our own
            # write. The event is still a change (maybe a foreign one our write built on), so it
            # is dispatched, without an ``old`` to compare with.
            self._dispatch(str(kind), old if stored else None, obj)
        with self._cond:
            if version:
                self._resource_version = version

    def _dispatch(self, event_type: str, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        with self._cond:
            if self._stopped:
                return
            handlers = list(self._handlers)
        for handler in handlers:
            handler(event_type, old, new)


def _accepts(function: Callable[..., Any], parameter: str) -> bool:
    try:
        return parameter in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


# --- many informers ----------------------------------------------------------------------------

TypeEventHandler = Callable[[TypeKey, str, "dict[str, Any] | None", "dict[str, Any]"], None]


class InformerManager:
    """One shared informer per child type, started on first use and stopped when unused.

    ``use(user, types)`` declares the types one parent (``user``) needs now; informers for new
    types start at once, and a type no user needs any more has its informer stopped. ``ensure``
    starts an informer without attributing it (the reconcile's first read of a type). The
    first list of a new informer dispatches no events: objects that merely exist are no change
    (the parent that needed the type is being reconciled already); later relists do.
    """

    def __init__(
        self,
        client: ClusterClient,
        *,
        handler: TypeEventHandler,
        label_selector: str | None = None,
        namespace: str | None = None,
        clock: Clock | None = None,
        informer_options: Mapping[str, Any] | None = None,
    ) -> None:
        self._client = client
        self._handler = handler
        self._label_selector = label_selector
        self._namespace = namespace
        self._clock = clock or RealClock()
        self._options = dict(informer_options or {})
        self._lock = threading.Lock()
        self._informers: dict[TypeKey, Informer] = {}
        self._users: dict[TypeKey, set[Hashable]] = {}
        self._types_of: dict[Hashable, frozenset[TypeKey]] = {}
        self._stopped = False
        self.started_total = 0

    def ensure(self, api_version: str, kind: str) -> Informer:
        """The informer of this type, started now if it was not running."""
        key = (api_version, kind)
        with self._lock:
            informer = self._informers.get(key)
            if informer is None:
                informer = Informer(
                    self._client, api_version, kind, namespace=self._namespace,
                    label_selector=self._label_selector, clock=self._clock,
                    initial_events=False, **self._options,
                )
                informer.add_handler(
                    lambda event, old, new: self._handler(key, event, old, new)
                )
                self._informers[key] = informer
                self._users.setdefault(key, set())
                self.started_total += 1
                if not self._stopped:
                    informer.start()
                _log.info("started informer for %s.%s", kind, api_version)
            return informer

    def use(self, user: Hashable, types: Iterable[TypeKey]) -> None:
        """``user`` needs exactly ``types`` now: start new informers, stop unneeded ones.

        Types the server does not serve are left out until it does.
        """
        # A kind not served yet (its CRD is missing) is not watched; the parent's retry will
        # declare it again once the CRD exists.
        wanted = frozenset(t for t in types if self._client.is_served(*t))
        for api_version, kind in wanted:
            self.ensure(api_version, kind)
        unused: list[Informer] = []
        with self._lock:
            previous = self._types_of.get(user, frozenset())
            for key in wanted - previous:
                self._users.setdefault(key, set()).add(user)
            for key in previous - wanted:
                unused.extend(self._drop_user_locked(key, user))
            if wanted:
                self._types_of[user] = wanted
            else:
                self._types_of.pop(user, None)
        for informer in unused:
            informer.stop()

    def release(self, user: Hashable) -> None:
        """``user`` (a deleted parent) needs nothing any more."""
        self.use(user, ())

    def informer(self, api_version: str, kind: str) -> Informer | None:
        """The running informer of this type, if any."""
        with self._lock:
            return self._informers.get((api_version, kind))

    def types(self) -> set[TypeKey]:
        """Types with a running informer."""
        with self._lock:
            return set(self._informers)

    def synced(self) -> bool:
        """Whether every running informer has synced."""
        with self._lock:
            informers = list(self._informers.values())
        return all(informer.has_synced for informer in informers)

    def stop(self) -> None:
        """Stop every informer."""
        with self._lock:
            self._stopped = True
            informers = list(self._informers.values())
            self._informers.clear()
            self._users.clear()
            self._types_of.clear()
        for informer in informers:
            informer.stop()

    def _drop_user_locked(self, key: TypeKey, user: Hashable) -> list[Informer]:
        users = self._users.get(key)
        if users is None:
            return []
        users.discard(user)
        if users:
            return []
        del self._users[key]
        informer = self._informers.pop(key, None)
        if informer is None:
            return []
        _log.info("stopped informer for %s.%s: no parent needs it", key[1], key[0])
        return [informer]


# --- the reconcile's view ----------------------------------------------------------------------


class InformerReader:
    """The reconciler's ``ReadCache`` over the manager's informers (no API request per read).

    The first read of a type starts its informer and waits for its first list (``sync_timeout``);
    a type that is not served reads as missing; an informer that cannot sync in time falls back to
    reading from the API so a reconcile is never blocked for long.
    """

    from_memory = True

    def __init__(
        self,
        client: ClusterClient,
        manager: InformerManager,
        *,
        sync_timeout: float = 30.0,
        extra: Mapping[TypeKey, Informer] | None = None,
    ) -> None:
        self._client = client
        self._manager = manager
        self._fallback = PassThroughCache(client)
        self._sync_timeout = sync_timeout
        self._extra = dict(extra or {})

    def _informer(self, api_version: str, kind: str) -> Informer | None:
        informer = self._extra.get((api_version, kind))
        if informer is not None:
            return informer
        informer = self._manager.informer(api_version, kind)
        if informer is None:
            if not self._client.is_served(api_version, kind):
                return None
            informer = self._manager.ensure(api_version, kind)
        if informer.has_synced or informer.wait_synced(self._sync_timeout):
            return informer
        return None

    def get(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """The cached object, or ``None`` when it does not exist (or is not ours to watch)."""
        informer = self._informer(api_version, kind)
        if informer is None:
            if not self._client.is_served(api_version, kind):
                return None
            return self._fallback.get(api_version, kind, name, namespace=namespace)
        return informer.cache.get(namespace, name)

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """Cached objects matching the selector."""
        informer = self._informer(api_version, kind)
        if informer is None:
            return self._fallback.list(
                api_version, kind, namespace=namespace, label_selector=label_selector
            )
        return informer.cache.list(namespace=namespace, label_selector=label_selector)


# --- own writes --------------------------------------------------------------------------------


class RecordingClient:
    """A ``ClusterClient`` decorator that remembers its own writes and feeds them to the caches.

    ``is_own_echo(event_type, obj)`` tells whether a watch event is the echo of a write made
    through this client: a created/patched/replaced object arriving with exactly the
    ``resourceVersion`` the write returned, or the deletion of an object (by uid) it deleted.
    Each record is consumed by its echo; a bounded number are kept per object, and only for
    types with an informer (when ``informers`` is given), so unwatched writes leave no record.
    """

    def __init__(
        self,
        inner: ClusterClient,
        *,
        informers: Callable[[str, str], Informer | None] | None = None,
        keep: int = 8,
        echo_wait: float = 5.0,
    ) -> None:
        self.inner = inner
        self._informers = informers
        self._keep = keep
        self._lock = threading.Lock()
        self._versions: dict[tuple[str, str, str, str], list[str]] = {}
        self._deleted_uids: dict[str, None] = {}
        self._inflight: dict[tuple[str, str, str, str], int] = {}
        self._settled = threading.Condition(self._lock)
        self.writes = 0
        self.echo_wait = echo_wait

    # reads pass through
    def get(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        """Read from the cluster."""
        return self.inner.get(api_version, kind, name, namespace=namespace)

    def list(self, api_version: str, kind: str, **kwargs: Any) -> dict[str, Any]:
        """List from the cluster."""
        return self.inner.list(api_version, kind, **kwargs)

    def watch(self, api_version: str, kind: str, **kwargs: Any) -> Iterator[WatchEvent]:
        """Watch the cluster."""
        return self.inner.watch(api_version, kind, **kwargs)

    def is_served(self, api_version: str, kind: str) -> bool:
        """Discovery, passed through."""
        return self.inner.is_served(api_version, kind)

    def is_namespaced(self, api_version: str, kind: str) -> bool:
        """Discovery, passed through."""
        return self.inner.is_namespaced(api_version, kind)

    # writes are recorded
    def create(self, obj: KubeObject, *, dry_run: bool = False) -> dict[str, Any]:
        """Create, and record the version it returned."""
        with self._writing(self._key(obj)):
            return self._record(self.inner.create(obj, dry_run=dry_run), dry_run)

    def patch(
        self, api_version: str, kind: str, name: str, patch: Any, **kwargs: Any
    ) -> dict[str, Any]:
        """Patch, and record the version it returned."""
        key = (api_version, kind, str(kwargs.get("namespace") or ""), name)
        with self._writing(key):
            result = self.inner.patch(api_version, kind, name, patch, **kwargs)
            return self._record(result, bool(kwargs.get("dry_run")))

    def replace(
        self, obj: KubeObject, *, subresource: str | None = None, dry_run: bool = False
    ) -> dict[str, Any]:
        """Replace, and record the version it returned."""
        with self._writing(self._key(obj)):
            result = self.inner.replace(obj, subresource=subresource, dry_run=dry_run)
            return self._record(result, dry_run)

    def delete(self, api_version: str, kind: str, name: str, **kwargs: Any) -> dict[str, Any]:
        """Delete, and record the uid deleted."""
        key = (api_version, kind, str(kwargs.get("namespace") or ""), name)
        with self._writing(key):
            result = self.inner.delete(api_version, kind, name, **kwargs)
            if kwargs.get("dry_run"):
                return result
            details = result.get("details") or {}
            uid = details.get("uid") or (result.get("metadata") or {}).get("uid")
            with self._lock:
                self.writes += 1
                if uid:
                    self._deleted_uids[str(uid)] = None
                    while len(self._deleted_uids) > 10_000:
                        del self._deleted_uids[next(iter(self._deleted_uids))]
            meta = result.get("metadata") or {} if result.get("kind") != "Status" else {}
            if meta.get("deletionTimestamp") and meta.get("finalizers"):
                self._record(result, False, count=False)  # still there: finalizers pending
            elif uid:  # gone (a Status, or the object's last state as some kinds answer)
                self._forget(api_version, kind, name, kwargs.get("namespace"), str(uid))
            return result

    def _forget(
        self, api_version: str, kind: str, name: str, namespace: str | None, uid: str
    ) -> None:
        """Write a completed deletion through to the type's informer cache, if any."""
        informer = self._informers(api_version, kind) if self._informers is not None else None
        if informer is not None:
            meta = {"name": name, **({"namespace": namespace} if namespace else {})}
            informer.cache.forget({"metadata": meta}, uid=uid)

    @contextlib.contextmanager
    def _writing(self, key: tuple[str, str, str, str]) -> Iterator[None]:
        """Mark a write in flight, so its echo waits for the version the write returns."""
        with self._lock:
            self._inflight[key] = self._inflight.get(key, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._inflight[key] - 1
                if left:
                    self._inflight[key] = left
                else:
                    del self._inflight[key]
                self._settled.notify_all()

    def is_own_echo(self, event_type: str, obj: KubeObject) -> bool:
        """Whether this watch event is the echo of a write made through this client."""
        meta = obj.get("metadata") or {}
        key = self._key(obj)
        with self._lock:
            # The echo can overtake the response of the write it echoes: wait for the response.
            deadline = time.monotonic() + self.echo_wait
            while key in self._inflight and time.monotonic() < deadline:
                self._settled.wait(deadline - time.monotonic())
            if event_type == "DELETED":
                self._versions.pop(key, None)
                return self._deleted_uids.pop(str(meta.get("uid") or ""), 1) is None
            versions = self._versions.get(key)
            rv = str(meta.get("resourceVersion") or "")
            if versions and rv in versions:
                versions.remove(rv)
                if not versions:
                    del self._versions[key]
                return True
            return False

    def _record(
        self, result: dict[str, Any], dry_run: bool, *, count: bool = True
    ) -> dict[str, Any]:
        if dry_run or not isinstance(result, dict):
            return result
        informer = None
        if self._informers is not None and result.get("kind") and result.get("apiVersion"):
            informer = self._informers(str(result["apiVersion"]), str(result["kind"]))
        rv = _rv(result)
        with self._lock:
            if count:
                self.writes += 1
            # Only writes to watched types have echoes to recognise (not Events, say).
            if rv and (self._informers is None or informer is not None):
                versions = self._versions.setdefault(self._key(result), [])
                versions.append(rv)
                del versions[: -self._keep]
        if informer is not None and informer.accepts(result):
            informer.cache.upsert(result)
        return result

    @staticmethod
    def _key(obj: KubeObject) -> tuple[str, str, str, str]:
        namespace, name = object_key(obj)
        return str(obj.get("apiVersion", "")), str(obj.get("kind", "")), namespace, name


