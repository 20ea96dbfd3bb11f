"""Informers: per-type list+watch caches the driver reacts to and the reconcile reads from.

An ``Informer`` lists one resource type (page by page), then watches from the list's
``resourceVersion`` with bookmarks; when a stream ends it resumes from the last version seen; on
410 Gone it relists and turns the difference between its cache and the new list into events, so no
change is lost; other failures reconnect after a jittered backoff. A stream silent for longer than
the inactivity timeout (``WATCH_INACTIVITY_TIMEOUT``, 130 s: two of the server's one-minute
bookmark intervals and a margin) is treated as dead, though never closed: one WARNING line names
the kind and the silence, and the watch resumes at once from the last version seen (the client's
read timeout, when it offers one, and the server-side ``timeoutSeconds`` bound every stream).
``stop()`` closes the open stream (a ``WatchStream``), so the thread and its socket end at once
rather than at the server's timeout. Its store is an ``IndexedCache``
(``reconciler._cache.stores``).

The backoff measures consecutive failures, not the informer's whole life: as client-go's reflector,
it starts over once a list succeeds or a watch delivers anything (an event, a bookmark) or ends
normally. A 410 right after a relist (the server keeps expiring every watch) pauses on a separate
backoff capped at ``GONE_PAUSE_CAP`` seconds, so the informer neither spins nor stays away long
once the server recovers: the relist that sees what changed meanwhile comes within that cap.

Informers started on use (the child informers, the declared inputs) come from one
reference-counted pool (``reconciler._cache.pool``); the child informers' manager is
``reconciler._cache.children``.

``WatchOptions`` (issue 37): how an informer lists and watches (the watch timeout, the
inactivity timeout, the page size, the backoff, whether the first list is reported), one
argument for an informer and for the pool that starts informers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from reconciler._base.clocks import Clock, RealClock
from reconciler._base.errors import (
    ApiError,
    GoneError,
    NotFoundError,
    ReconcilerError,
    WatchSilentError,
)
from reconciler._base.ratelimit import CauseLimiter
from reconciler._cache.selectors import LabelSelector
from reconciler._cache.stores import IndexedCache
from reconciler._cache.stores import resource_version as _rv
from reconciler._client.protocol import (
    ClusterClient,
    KubeObject,
    ListOptions,
    WatchEvent,
    close_watch,
)
from reconciler._workqueue.queues import ExponentialBackoff

__all__ = [
    "GONE_PAUSE_CAP",
    "WATCH_INACTIVITY_TIMEOUT",
    "EventHandler",
    "Informer",
    "InformerStats",
    "TypeKey",
    "WatchOptions",
]

TypeKey = tuple[str, str]
"""``(apiVersion, kind)`` of a resource type."""

EventHandler = Callable[[str, "dict[str, Any] | None", "dict[str, Any]"], None]
"""Called as ``handler(event_type, old, new)`` for ADDED, MODIFIED and DELETED (``new`` is the
last known state of a deleted object)."""

_log = logging.getLogger("optk.informers")

GONE_PAUSE_CAP = 2.0
"""The longest pause (seconds, before jitter) between relists while every watch gets 410 Gone."""

WATCH_INACTIVITY_TIMEOUT = 130.0
"""How long (seconds) a watch may send nothing, not even a bookmark, before it is presumed dead
and replaced: two of the API server's bookmark intervals (about a minute each, when bookmarks
are asked for) and 10 s of margin."""


@attrs.frozen(kw_only=True)
class WatchOptions:
    """How an informer lists and watches, whatever it watches (issue 37: one value, so that an
    informer and the managers that start informers take one argument for all of it)."""

    watch_timeout: int = 300
    """The server-side ``timeoutSeconds`` of each watch."""
    inactivity_timeout: float = WATCH_INACTIVITY_TIMEOUT
    """Seconds a stream may send nothing before it is presumed dead and replaced."""
    page_size: int = 500
    """Objects per page of a list."""
    backoff: ExponentialBackoff | None = None
    """The reconnect backoff (None: 50 ms doubling to 30 s, jittered)."""
    initial_events: bool = True
    """Whether the first list's objects are reported as ADDED events (an informer started on
    use, whose cache the reconcile reads, reports none)."""


@attrs.define
class InformerStats:
    """Counters of what an informer did (for tests, logs and benchmarks)."""

    lists: int = 0
    watches: int = 0
    relists_after_gone: int = 0
    reconnects: int = 0
    events: int = 0
    silences: int = 0
    """Watches given up after sending nothing for the inactivity timeout (each also a
    reconnect)."""


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
        options: WatchOptions | None = None,
    ) -> None:
        options = options or WatchOptions()
        self.client = client
        self.initial_events = options.initial_events
        self.api_version = api_version
        self.kind = kind
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self._selector = LabelSelector.parse(label_selector)
        self.cache = IndexedCache()
        self.stats = InformerStats()
        self._clock = clock or RealClock()
        self._watch_timeout = options.watch_timeout
        self._inactivity = options.inactivity_timeout
        self._page_size = options.page_size
        self._backoff = options.backoff or ExponentialBackoff(base=0.05, cap=30.0, jitter=0.5)
        self._warnings = CauseLimiter(self._clock)  # a refused list: once a minute, not a try
        self._gone_backoff = ExponentialBackoff(
            base=min(self._backoff.base, GONE_PAUSE_CAP), cap=GONE_PAUSE_CAP, jitter=0.5
        )
        self._handlers: list[EventHandler] = []
        self._sync_handlers: list[Callable[[], None]] = []
        self._list_error: Exception | None = None
        self._cond = threading.Condition()
        self._synced = False
        self._stopped = False
        self._resource_version = ""
        self._relisting = False
        self._thread: threading.Thread | None = None
        self._stream: Iterator[WatchEvent] | None = None  # the open watch, for ``stop``
        self._scope = ListOptions(label_selector=label_selector, field_selector=field_selector)

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

    def add_late_sync_handler(self, handler: Callable[[], None]) -> None:
        """Call ``handler()`` (in the informer's thread) when the first list succeeds after one
        or more failed: reads of this type failed meanwhile (``list_error``), so what they
        decided must be looked at again."""
        with self._cond:
            self._sync_handlers.append(handler)

    @property
    def list_error(self) -> Exception | None:
        """Why the last list failed, while no list has succeeded since (None otherwise)."""
        with self._cond:
            return self._list_error

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
        """Stop: no handler is called after this returns; the open stream is closed, so the
        thread ends and its connection closes at once (when the client's watch is a
        ``WatchStream``; otherwise when the stream ends)."""
        with self._cond:
            self._stopped = True
            stream, self._stream = self._stream, None
            self._cond.notify_all()
        if stream is not None:
            close_watch(stream)

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
    def relisting(self) -> bool:
        """Whether the event being dispatched comes from a relist's difference.

        Handlers run in the informer's thread; during a relist, an object the stream never
        delivered may be the toolkit's own write-through that also carries a foreign change
        whose event the stream lost, so such an event is a change even when its version is an
        own write (``reconciler._driver.routing`` skips the own-echo filter for it).
        """
        return self._relisting

    @property
    def resource_version(self) -> str:
        """The last ``resourceVersion`` seen (list, event or bookmark)."""
        with self._cond:
            return self._resource_version

    @property
    def list_refused(self) -> Exception | None:
        """``list_error`` when the server refuses the list for a reason retries do not change
        soon (a 4xx such as 403 Forbidden or 404, not 409/410/429), else None."""
        with self._cond:
            return _refusal(self._list_error)

    def wait_synced(self, timeout: float | None = None, *, until_refused: bool = False) -> bool:
        """Block until synced or ``timeout`` (clock seconds); whether it synced.
        ``until_refused``: also return (False) as soon as a list is refused (``list_refused``)."""
        with self._cond:
            deadline = None if timeout is None else self._clock.monotonic() + timeout
            while not self._synced and not self._stopped:
                if until_refused and _refusal(self._list_error) is not None:
                    return False
                remaining = None if deadline is None else deadline - self._clock.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._clock.wait(self._cond, remaining)
            return self._synced

    # --- the loop --------------------------------------------------------------------------

    def _run(self) -> None:
        need_list = True
        while not self.stopped:
            started = self._clock.monotonic()
            listed = False
            try:
                if need_list:
                    self._list()
                    need_list, listed = False, True
                    self._backoff.forget("watch")  # the server answers: failures start over
                self._watch()
                self._healthy()
            except WatchSilentError as silent:
                if self.stopped:
                    return
                self.stats.silences += 1
                self.stats.reconnects += 1
                _log.warning("watch of %s sent nothing for %gs (no event, no bookmark): presumed"
                             " dead; resuming from version %s", self.kind, silent.silence,
                             self.resource_version or "(none)", extra={"kind": self.kind})
            except GoneError:
                _log.info("watch of %s expired (410 Gone); relisting", self.kind)
                self.stats.relists_after_gone += 1
                need_list = True
                if listed:  # Gone right after a relist: pause briefly, do not spin
                    self._pause(self._gone_backoff.when("gone"))
            except (ReconcilerError, OSError, ValueError) as error:
                if self.stopped:
                    return
                if need_list:
                    self._list_failed(error)
                if self._clock.monotonic() - started > self._backoff.cap:
                    self._backoff.forget("watch")  # it worked for a long while: a new failure
                delay = self._backoff.when("watch")
                self.stats.reconnects += 1
                level, more = self._warnings.level((type(error).__name__,
                                                    getattr(error, "code", None)))
                _log.log(level, "watch of %s failed (%s); retrying in %.2fs%s", self.kind,
                         error, delay, more, extra={"kind": self.kind})
                if isinstance(error, NotFoundError):
                    need_list = True  # the kind is not served (yet): list again when it is
                self._pause(delay)
            except Exception:  # a handler bug must not kill the informer silently
                _log.exception("informer of %s failed; restarting with a relist", self.kind)
                need_list = True
                self._pause(1.0)

    def _list_failed(self, error: Exception) -> None:
        """The list failed: until one succeeds, ``list_error`` says why, and a reader waiting
        for the first sync is woken to fail at once rather than wait out its timeout."""
        with self._cond:
            self._list_error = error
            self._cond.notify_all()

    def _healthy(self) -> None:
        """The watch delivered something or ended normally: both backoffs start over."""
        self._backoff.forget("watch")
        self._gone_backoff.forget("gone")

    def _pause(self, seconds: float) -> None:
        with self._cond:
            deadline = self._clock.monotonic() + seconds
            while not self._stopped and self._clock.monotonic() < deadline:
                self._clock.wait(self._cond, deadline - self._clock.monotonic())

    def _list(self) -> None:
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = attrs.evolve(self._scope, limit=self._page_size, continue_token=token)
            body = self.client.list(self.api_version, self.kind, page, namespace=self.namespace)
            items.extend(body.get("items") or ())
            meta = body.get("metadata") or {}
            token = meta.get("continue") or None
            if not token:
                break
        self.stats.lists += 1
        with self._cond:
            quiet = not self._synced and not self.initial_events
        for obj in items:
            obj.setdefault("apiVersion", self.api_version)
            obj.setdefault("kind", self.kind)
        version = str(meta.get("resourceVersion") or "")
        self._relisting = True
        try:
            for event_type, old, new in self.cache.relist(items, version=version, quiet=quiet):
                self._dispatch(event_type, old, new)
        finally:
            self._relisting = False
        with self._cond:
            late = not self._synced and self._list_error is not None
            self._resource_version = version
            self._synced = True
            self._list_error = None
            self._cond.notify_all()
            sync_handlers = list(self._sync_handlers) if late else []
        for handler in sync_handlers:  # the cache was read while it could not list
            handler()

    def _watch(self) -> None:
        self.stats.watches += 1
        stream = attrs.evolve(
            self._scope, resource_version=self.resource_version or None,
            timeout_seconds=self._watch_timeout, allow_bookmarks=True,
            inactivity_timeout=self._inactivity,
        )
        events: Iterator[WatchEvent] = iter(
            self.client.watch(self.api_version, self.kind, stream, namespace=self.namespace)
        )
        with self._cond:
            stopped, self._stream = self._stopped, events
        if stopped:  # stopped while the watch was being opened: it ends at once (read below,
            close_watch(events)  # so its connection is closed, not left checked out)
        delivered = False
        for event in events:
            if self.stopped:
                return
            if not delivered:
                delivered = True
                self._healthy()
            self._handle(event)

    def _handle(self, event: WatchEvent) -> None:
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            return
        version = _rv(obj)
        if kind == "BOOKMARK":
            self.cache.advance(version)
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
            # write, or knows the object deleted since (an own delete, a 404). The event is
            # still a change (maybe a foreign one our write built on), so it is dispatched,
            # without an ``old`` to compare with; a gone parent's children find no parent.
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


def _refusal(error: Exception | None) -> Exception | None:
    """``error`` if it is a lasting refusal of a list (see ``Informer.list_refused``)."""
    if isinstance(error, ApiError) and 400 <= error.code < 500 and error.code not in (
            408, 409, 410, 429):
        return error
    return None
