"""Watch streams: newline-delimited JSON events fed from the store's event log.

A watch subscribes to ``Storage`` and replays the retained events after its ``resourceVersion``
(or, without one or with ``"0"``, sends a synthetic ``ADDED`` per existing object first), then
forwards live events until ``timeoutSeconds``. Selector transitions become ``ADDED``/``DELETED``
as a real server sends them (an object leaving a label selector is ``DELETED``). ``BOOKMARK``
events carry only the ``resourceVersion``. A version older than the window answers HTTP 200 with
one ``ERROR`` event holding a 410 Expired Status, exactly as ``watch-410-after-restart.json``
shows. Injected faults can end streams early or force that 410.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs
from aiohttp import web

from reconciler.embedded._encoding import EncodeCache, encode
from reconciler.embedded._faults import Faults
from reconciler.embedded._kinds import ResourceType
from reconciler.embedded._operations import Operations
from reconciler.embedded._selectors import FieldSelector, LabelSelector
from reconciler.embedded._statuses import status_body
from reconciler.embedded._storage import StoredEvent, TooOld

__all__ = ["WatchRequest", "serve_watch"]

_DEFAULT_TIMEOUT = 1800.0


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
        return ("DELETED", event.obj)
    return None


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


async def serve_watch(
    http_request: web.Request,
    request: WatchRequest,
    *,
    ops: Operations,
    faults: Faults,
    bookmark_interval: float,
    cache: EncodeCache,
    max_pending: int = 50_000,
    on_started: Callable[[], None] | None = None,
) -> web.StreamResponse:
    """Stream the events of ``request`` until its timeout, a fault, or the client leaves.

    A watcher that falls ``max_pending`` events behind is ended (as a real server ends a watch
    whose client cannot keep up), so a stalled client never makes the server hoard memory.
    ``on_started`` is called once the 200 headers are sent (the watch is then accounted).
    """
    response = web.StreamResponse(status=200)
    response.content_type = "application/json"
    response.enable_chunked_encoding()
    await response.prepare(http_request)
    if on_started is not None:
        on_started()

    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()
    queue: asyncio.Queue[StoredEvent] = asyncio.Queue()

    overflowed = False

    def deliver(event: StoredEvent) -> None:
        nonlocal overflowed
        if queue.qsize() >= max_pending:
            overflowed = True  # a client too slow to read: end its stream, it will re-watch
            return
        if threading.get_ident() == loop_thread:
            queue.put_nowait(event)
        else:
            loop.call_soon_threadsafe(queue.put_nowait, event)

    rt = request.rt
    first_wrap = True

    def served(obj: Mapping[str, Any]) -> Mapping[str, Any]:
        nonlocal first_wrap
        out = ops.served(obj, rt)
        if request.wrap is not None:
            out = request.wrap(out, first_wrap)
            first_wrap = False
        return out

    if faults.watch_gone:
        rv = ops.storage.resource_version
        gone = status_body(410, "Expired", message=f"too old resource version: {rv} ({rv + 1})")
        await response.write(_line("ERROR", gone))
        return response

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
                replay = ops.storage.subscribe_since(None, deliver)
            else:
                replay = ops.storage.subscribe_since(int(str(rv_text)), deliver)
    except TooOld as exc:
        await response.write(_line("ERROR", status_body(410, "Expired", message=str(exc))))
        return response
    except ValueError:
        await response.write(_line("ERROR", status_body(
            400, "BadRequest", message=f"invalid resource version: {rv_text}"
        )))
        return response

    sent = 0
    limit = faults.watch_max_events
    timeout = request.timeout if request.timeout is not None else _DEFAULT_TIMEOUT
    if faults.watch_max_seconds is not None:
        timeout = min(timeout, faults.watch_max_seconds)
    deadline = time.monotonic() + timeout
    next_bookmark = time.monotonic() + min(bookmark_interval, max(timeout - 1.5, 0.0))
    try:
        pending = initial + [t for t in (translate(request, e) for e in replay) if t]
        for event_type, obj in pending:
            await response.write(cache.event_line(event_type, served(obj)))
            sent += 1
            if limit is not None and sent >= limit:
                return response
        if request.send_initial_events and request.bookmarks:
            # the watch-list protocol: this bookmark says the initial state is complete
            await response.write(_line("BOOKMARK", _bookmark(
                rt, ops.storage.resource_version,
                annotations={"k8s.io/initial-events-end": "true"},
            )))
        while True:
            now = time.monotonic()
            if now >= deadline or overflowed:
                return response
            wait = deadline - now
            if request.bookmarks:
                wait = min(wait, max(next_bookmark - now, 0.0))
            try:
                async with asyncio.timeout(wait):
                    event = await queue.get()
            except TimeoutError:
                if request.bookmarks and time.monotonic() >= next_bookmark:
                    bookmark = _bookmark(rt, ops.storage.resource_version)
                    await response.write(_line("BOOKMARK", bookmark))
                    remaining = deadline - time.monotonic()
                    next_bookmark = time.monotonic() + min(
                        bookmark_interval, max(remaining - 1.5, 0.0)
                    ) if remaining > 1.5 else deadline + 1
                continue
            batch = [event]
            while not queue.empty():
                batch.append(queue.get_nowait())
            lines = []
            for item in batch:
                translated = translate(request, item)
                if translated is None:
                    continue
                lines.append(cache.event_line(translated[0], served(translated[1])))
                sent += 1
                if limit is not None and sent >= limit:
                    break
            if lines:
                await response.write(b"".join(lines))
            if limit is not None and sent >= limit:
                return response
    except ConnectionResetError:
        return response  # the client went away (aiohttp's reset error subclasses this)
    finally:
        ops.storage.unsubscribe(deliver)
