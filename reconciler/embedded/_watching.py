"""Watch streams: newline-delimited JSON events fed from the store's event log.

A watch subscribes to ``Storage`` and replays the retained events after its ``resourceVersion``
(or, without one or with ``"0"``, sends a synthetic ``ADDED`` per existing object first), then
forwards live events until ``timeoutSeconds``. A live event is written to every watcher's
connection inside the commit that made it (see ``_Stream``), so delivery costs no queue, task
switch or timer per event and the bytes of one event are built once for all its watchers.
Selector transitions become ``ADDED``/``DELETED`` as a real server sends them (an object leaving
a label selector is ``DELETED``). ``BOOKMARK`` events carry only the ``resourceVersion``. A
version older than the window answers HTTP 200 with one ``ERROR`` event holding a 410 Expired
Status, exactly as ``watch-410-after-restart.json`` shows. Injected faults can end streams
early or force that 410.

Memory is bounded per watcher and in all, in bytes: a live event is written only while the
connection's write buffer stays within the watcher's limit; a watcher past it is ended (its
connection is aborted, as kube-apiserver closes a watch whose client cannot keep up, and the
client re-lists). The limit is ``max_buffer_bytes`` or, with many watchers, their share of a
server-wide budget (``WatchBudget``: the budget divided by the open watches, never below
``WATCH_BUFFER_FLOOR``), so 500 clients that never read cost about the
budget, not 500 times the per-watcher bound. The replay waits for the client through
aiohttp's writer, and at most ``max_pending`` events wait while it is written.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import attrs
from aiohttp import web

from reconciler.embedded._calling import calls_allowed_here
from reconciler.embedded._encoding import EncodeCache, encode, http_chunk
from reconciler.embedded._faults import Faults
from reconciler.embedded._kinds import ResourceType
from reconciler.embedded._operations import Operations
from reconciler.embedded._selectors import FieldSelector, LabelSelector
from reconciler.embedded._statuses import status_body
from reconciler.embedded._storage import StoredEvent, TooOld

__all__ = [
    "DEFAULT_WATCH_BUFFER_BYTES",
    "DEFAULT_WATCH_BUFFER_TOTAL_BYTES",
    "WATCH_BUFFER_FLOOR",
    "WatchBudget",
    "WatchRequest",
    "serve_watch",
]

log = logging.getLogger("reconciler.embedded")

_DEFAULT_TIMEOUT = 1800.0

DEFAULT_WATCH_BUFFER_BYTES = 1024 * 1024
"""How many bytes may wait in one watcher's connection buffer before the watch is ended."""

DEFAULT_WATCH_BUFFER_TOTAL_BYTES = 64 * 1024 * 1024
"""The server-wide budget of bytes waiting in watchers' connection buffers, shared among the
open watches."""

WATCH_BUFFER_FLOOR = 16 * 1024
"""The least a watcher's limit falls to however many watches are open."""


@attrs.frozen(kw_only=True)
class WatchBudget:
    """How many bytes watchers may have waiting unsent: ``per_watcher`` each, and about
    ``total`` together (each gets its share among the open watches, at least
    ``WATCH_BUFFER_FLOOR``)."""

    per_watcher: int = DEFAULT_WATCH_BUFFER_BYTES
    total: int = DEFAULT_WATCH_BUFFER_TOTAL_BYTES

    def limit(self, watchers: int) -> int:
        """One watcher's limit while ``watchers`` watches are open."""
        return max(WATCH_BUFFER_FLOOR, min(self.per_watcher, self.total // max(1, watchers)))


@attrs.frozen(kw_only=True)
class WatchRequest:
    """A decoded watch request."""

    rt: ResourceType
    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    resource_version: str | None
    timeout: float | None
    bookmarks: bool
    send_initial_events: bool = False
    wrap: Callable[[Mapping[str, Any], bool], Mapping[str, Any]] | None = None


def _matches(request: WatchRequest, obj: Mapping[str, Any] | None) -> bool:
    if obj is None:
        return False
    namespace = (obj.get("metadata") or {}).get("namespace")
    if request.namespace is not None and namespace != request.namespace:
        return False
    return request.labels.matches(obj) and request.fields.matches(obj)


def translate(request: WatchRequest, event: StoredEvent) -> tuple[str, Mapping[str, Any]] | None:
    """The event a watcher of ``request`` sees for a stored event, or None."""
    if event.bucket != (request.rt.group, request.rt.plural):
        return None
    new_match = _matches(request, event.obj)
    if event.type == "DELETED":
        return ("DELETED", event.obj) if _matches(request, event.old or event.obj) else None
    old_match = event.type == "MODIFIED" and _matches(request, event.old)
    if new_match and old_match:
        return ("MODIFIED", event.obj)
    if new_match:
        return ("ADDED", event.obj)
    if old_match:
        return ("DELETED", _previous_at(event.old, event.obj))
    return None


def _previous_at(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> Mapping[str, Any]:
    # a real server's "left the selector" DELETED carries the last matching state, at the
    # event's resourceVersion (found by tests/conformance)
    old = old or new
    version = (new.get("metadata") or {}).get("resourceVersion")
    return {**old, "metadata": {**(old.get("metadata") or {}), "resourceVersion": version}}


def _line(event_type: str, obj: Mapping[str, Any]) -> bytes:
    return encode({"type": event_type, "object": obj}) + b"\n"


def _bookmark(
    rt: ResourceType, resource_version: int, *, annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"resourceVersion": str(resource_version),
                                "creationTimestamp": None}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": metadata}


class _Stream:
    """The live side of one watch stream: where its events go and when it ends.

    Until ``go_live`` (while the replay is written) events wait in ``pending``. Live, an event
    committed on the event loop thread is translated and written to the connection at once,
    inside the commit: no queue, no task wake-up, no timer per event. The bytes of an event's
    line are built once (``EncodeCache.event_chunk``) for every watcher that sees it the same
    way. A commit on another thread hops to the loop thread once per event and watcher.
    """

    def __init__(
        self,
        http_request: web.Request,
        request: WatchRequest,
        *,
        ops: Operations,
        cache: EncodeCache,
        limit: int | None,
        max_pending: int,
        max_buffer_bytes: Callable[[], int],
    ) -> None:
        self._http_request = http_request
        self._request = request
        self._ops = ops
        self._cache = cache
        self._limit = limit
        self._max_pending = max_pending
        self._max_buffer_bytes = max_buffer_bytes
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._pending: deque[StoredEvent] = deque()
        self._live = False
        self._first_wrap = True
        self.fell_behind = False
        self.sent = 0
        self.finished: asyncio.Future[None] = self._loop.create_future()

    def _served(self, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        # a CRD's conversion webhook is still called on the event loop for a watch (not
        # offloaded: events are written in order from here; docs/webhooks.md says so)
        with calls_allowed_here():
            return self._ops.served(obj, self._request.rt)

    @property
    def at_limit(self) -> bool:
        """The injected ``watch_max_events`` fault says this stream has sent enough."""
        return self._limit is not None and self.sent >= self._limit

    def _finish(self) -> None:
        if not self.finished.done():
            self.finished.set_result(None)

    def line(self, event_type: str, obj: Mapping[str, Any]) -> bytes:
        """The line of one event, as this watcher is served it (for aiohttp's writer)."""
        served = self._served(obj)
        wrap = self._request.wrap
        if wrap is None:
            return self._cache.event_line(event_type, served)
        wrapped = wrap(served, self._first_wrap)  # a Table: built per watcher, not cached
        self._first_wrap = False
        return _line(event_type, wrapped)

    def chunk(self, event_type: str, obj: Mapping[str, Any]) -> bytes:
        """``line`` framed as one HTTP chunk, shared by the watchers that see it the same way."""
        if self._request.wrap is None:
            return self._cache.event_chunk(event_type, obj, served=self._served,
                                           version=self._request.rt.api_version)
        return http_chunk(self.line(event_type, obj))

    def write(self, data: bytes) -> None:
        """Write chunk-framed bytes to the connection; a closed connection ends the stream.

        The 200 headers were sent by ``prepare``, so raw chunks follow aiohttp's own framing
        (aiohttp writes the last, empty chunk when the handler returns). When more than
        the watcher's limit (``max_buffer_bytes()``) would wait in the connection's buffer (one
        event is always written to an empty buffer) the client does not keep up: its connection
        is aborted (dropping the buffer) and the stream ends, as a real
        server closes a watch that falls behind; the client re-lists and watches again.
        """
        transport = self._http_request.transport
        if transport is None or transport.is_closing():
            self._finish()
            return
        buffered = transport.get_write_buffer_size()
        if buffered and buffered + len(data) > self._max_buffer_bytes():
            self.fell_behind = True
            log.info("embedded apiserver: ending a watch of %s whose client is %d bytes behind",
                     self._request.rt.plural, buffered)
            transport.abort()
            self._finish()
            return
        transport.write(data)

    def deliver(self, event: StoredEvent) -> None:
        """The ``Storage`` subscriber: called inside every commit, on any thread."""
        if threading.get_ident() == self._loop_thread:
            self._receive(event)
        else:
            self._loop.call_soon_threadsafe(self._receive, event)

    def _receive(self, event: StoredEvent) -> None:
        if self.finished.done():
            return
        if not self._live:
            if len(self._pending) >= self._max_pending:
                self._finish()  # a replay too slow to write: end the stream, it will re-watch
            else:
                self._pending.append(event)
            return
        translated = translate(self._request, event)
        if translated is None:
            return
        self.write(self.chunk(*translated))
        self.sent += 1
        if self.at_limit:
            self._finish()

    def go_live(self) -> None:
        """Write the events that arrived during the replay; from now on write each at once."""
        self._live = True
        while self._pending and not self.finished.done():
            self._receive(self._pending.popleft())


async def serve_watch(
    http_request: web.Request,
    request: WatchRequest,
    *,
    ops: Operations,
    faults: Faults,
    bookmark_interval: float,
    cache: EncodeCache,
    max_pending: int = 50_000,
    max_buffer_bytes: Callable[[], int] = lambda: DEFAULT_WATCH_BUFFER_BYTES,
    on_started: Callable[[], None] | None = None,
) -> web.StreamResponse:
    """Stream the events of ``request`` until its timeout, a fault, or the client leaves.

    A watcher whose connection buffer would hold more than ``max_buffer_bytes()`` (read at
    each write: the share of a server-wide budget changes with the open watches) is ended (as
    a real server ends a watch whose client cannot keep up), so a stalled client never makes
    the server hoard memory; at most ``max_pending`` events wait while the replay is written.
    ``on_started`` is called once the 200 headers are sent (the watch is then accounted).
    """
    response = web.StreamResponse(status=200)
    response.content_type = "application/json"
    response.enable_chunked_encoding()
    await response.prepare(http_request)
    if on_started is not None:
        on_started()

    rt = request.rt
    if faults.watch_gone:
        rv = ops.storage.resource_version
        gone = status_body(410, "Expired", message=f"too old resource version: {rv} ({rv + 1})")
        await response.write(_line("ERROR", gone))
        return response

    stream = _Stream(http_request, request, ops=ops, cache=cache,
                     limit=faults.watch_max_events, max_pending=max_pending,
                     max_buffer_bytes=max_buffer_bytes)
    initial: list[tuple[str, Mapping[str, Any]]] = []
    rv_text = request.resource_version
    try:
        with ops.storage.lock:
            if rv_text in (None, "", "0") or request.send_initial_events:
                bucket = ops.bucket(rt)
                initial = [
                    ("ADDED", obj) for obj in ops.storage.items(bucket, request.namespace)
                    if _matches(request, obj)
                ]
                replay = ops.storage.subscribe_since(None, stream.deliver)
            else:
                replay = ops.storage.subscribe_since(int(str(rv_text)), stream.deliver)
    except TooOld as exc:
        await response.write(_line("ERROR", status_body(410, "Expired", message=str(exc))))
        return response
    except ValueError:
        await response.write(_line("ERROR", status_body(
            400, "BadRequest", message=f"invalid resource version: {rv_text}"
        )))
        return response

    timeout = request.timeout if request.timeout is not None else _DEFAULT_TIMEOUT
    if faults.watch_max_seconds is not None:
        timeout = min(timeout, faults.watch_max_seconds)
    deadline = time.monotonic() + timeout
    next_bookmark = time.monotonic() + min(bookmark_interval, max(timeout - 1.5, 0.0))
    try:
        # The replay goes through aiohttp's writer, which waits for a slow client to read.
        pending = initial + [t for t in (translate(request, e) for e in replay) if t]
        for event_type, obj in pending:
            await response.write(stream.line(event_type, obj))
            stream.sent += 1
            if stream.at_limit:
                return response
        if request.send_initial_events and request.bookmarks:
            # the watch-list protocol: this bookmark says the initial state is complete
            await response.write(_line("BOOKMARK", _bookmark(
                rt, ops.storage.resource_version,
                annotations={"k8s.io/initial-events-end": "true"},
            )))
        stream.go_live()
        while not stream.finished.done():
            now = time.monotonic()
            if now >= deadline:
                return response
            wait = deadline - now
            if request.bookmarks:
                wait = min(wait, max(next_bookmark - now, 0.0))
            await asyncio.wait((stream.finished,), timeout=wait)
            if request.bookmarks and time.monotonic() >= next_bookmark:
                bookmark = _bookmark(rt, ops.storage.resource_version)
                stream.write(http_chunk(_line("BOOKMARK", bookmark)))
                remaining = deadline - time.monotonic()
                next_bookmark = time.monotonic() + min(
                    bookmark_interval, max(remaining - 1.5, 0.0)
                ) if remaining > 1.5 else deadline + 1
        return response
    except ConnectionResetError:
        return response  # the client went away (aiohttp's reset error subclasses this)
    finally:
        ops.storage.unsubscribe(stream.deliver)
