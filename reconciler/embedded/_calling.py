"""One call of a webhook by the embedded server: an HTTPS POST of a review, bounded in time and
size.

Both kinds of webhook the server calls (conversion, ``_conversion``; admission, ``_admission``)
post a JSON review to a ``clientConfig.url``, verify the webhook's certificate against the
configured ``caBundle`` and read a JSON answer. This module is that call and nothing else: the
``timeout`` bounds the whole call (connection, TLS handshake, request, headers and body: a
watchdog shuts the socket down at the deadline, so a webhook that drips its answer byte by byte
cannot hold the server longer), and an answer over ``MAX_ANSWER_BYTES`` (3 MiB, this
server's own limit) is refused before it is decoded.
Every failure is a ``WebhookCallError`` whose text reads as kube-apiserver's (``Post "<url>":
<reason>``, or an error reading the body once the headers are in); what a failure means (500,
or ignored under ``failurePolicy: Ignore``) is the caller's to decide.

Where a call may wait: never on the server's event loop (kube-apiserver answers unrelated
requests while a webhook hangs). The loop thread is marked (``forbid_calls_here``); a call
asked for there raises ``MustNotBlock`` before anything is sent, and ``_offloading`` runs the
request again on a worker thread. A worker holds the store's lock while it computes and
releases it for the whole call (``calling_under``), so a request waiting on a webhook blocks no
other; once the lock is taken again, a write whose object changed meanwhile raises
``StaleWrite`` at commit (``released_for_a_call``) and the request is run again, webhooks
included, as kube-apiserver's ``GuaranteedUpdate`` retries.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from reconciler.embedded._errors import EmbeddedServerError

__all__ = [
    "MAX_ANSWER_BYTES",
    "MustNotBlock",
    "StaleWrite",
    "WebhookCallError",
    "calling_under",
    "calls_allowed_here",
        "forbid_calls_here",
    "post_review",
    "released_for_a_call",
]

MAX_ANSWER_BYTES = 3 * 1024 * 1024
"""The largest webhook answer read (kube-apiserver refuses larger ones too)."""

_CHUNK = 64 * 1024


class WebhookCallError(EmbeddedServerError, ConnectionError):
    """A webhook could not be called, or its answer could not be read (``invalid``: it was
    read, and is not a review). The text is kube-apiserver's: ``Post "<url>": <reason>``,
    ``unexpected error when reading response body. ...``, or what is wrong with the answer."""

    def __init__(self, text: str, *, invalid: bool = False) -> None:
        super().__init__(text)
        self.invalid = invalid


class MustNotBlock(EmbeddedServerError):
    """A webhook call was asked for on the server's event loop, which must not wait on one;
    nothing was sent: run the request again on a worker thread (``_offloading``)."""


class StaleWrite(EmbeddedServerError):
    """The object a write read changed while the store's lock was released for a webhook
    call; ``conflict`` is the 409 answered when the write is not run again."""

    def __init__(self, conflict: Exception) -> None:
        super().__init__(str(conflict))
        self.conflict = conflict


class _Lock(Protocol):
    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...
    def release(self) -> None: ...


class _Here(threading.local):
    forbidden = False  # the server's event loop: no call may wait here
    lock: _Lock | None = None  # the store's lock a worker holds, released during a call
    released = False  # the lock was released during this attempt


_here = _Here()


def forbid_calls_here() -> None:
    """Mark the calling thread (the server's event loop) as one no webhook call may block."""
    _here.forbidden = True


@contextlib.contextmanager
def calls_allowed_here() -> Iterator[None]:
    """Let calls block even on the event loop (a watch's conversions: the one place left)."""
    forbidden, _here.forbidden = _here.forbidden, False
    try:
        yield
    finally:
        _here.forbidden = forbidden


@contextlib.contextmanager
def calling_under(lock: _Lock) -> Iterator[None]:
    """On a worker thread: hold ``lock`` (the store's) for one attempt of a request, except
    during each webhook call."""
    lock.acquire()
    _here.lock, _here.released = lock, False
    try:
        yield
    finally:
        _here.lock, _here.released = None, False
        lock.release()


def released_for_a_call() -> bool:
    """Whether this thread released the store's lock for a webhook call during this attempt
    (then what it read before may have changed: its commit checks, ``StaleWrite``)."""
    return _here.released


@contextlib.contextmanager
def _unlocked() -> Iterator[None]:
    """The store's lock released (all its levels) while a call waits; taken again after."""
    lock = _here.lock
    if lock is None:
        yield
        return
    levels = 0
    while True:
        try:
            lock.release()
        except RuntimeError:  # not held (any more) by this thread
            break
        levels += 1
    _here.released = True
    try:
        yield
    finally:
        for _ in range(levels):
            lock.acquire()


def _posting(url: str, reason: str) -> WebhookCallError:
    return WebhookCallError(f"Post {json.dumps(url)}: {reason}")


def _reading(reason: str) -> WebhookCallError:
    return WebhookCallError("unexpected error when reading response body. Please retry. "
                            f"Original error: {reason}")


def _context(url: str, ca_bundle: object) -> ssl.SSLContext:
    if not isinstance(ca_bundle, str) or not ca_bundle:
        return ssl.create_default_context()
    try:
        return ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode())
    except (ValueError, ssl.SSLError) as err:
        raise _posting(url, f"caBundle: {err}") from None


class _Watchdog:
    """Shuts the call's socket down when the deadline passes (any blocking read then ends)."""

    def __init__(self, timeout: float) -> None:
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self.fired = False
        self._timer = threading.Timer(timeout, self._fire)
        self._timer.daemon = True

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._socket = sock
            if self.fired:
                sock.close()

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            if self._socket is not None:
                with contextlib.suppress(OSError):
                    self._socket.shutdown(socket.SHUT_RDWR)


def post_review(
    url: str, review: Mapping[str, Any], *, ca_bundle: object, timeout: float,
    max_bytes: int = MAX_ANSWER_BYTES,
) -> dict[str, Any]:
    """The JSON object a webhook at ``url`` answers to ``review``, within ``timeout`` seconds
    in all; raises ``WebhookCallError`` on any failure (timeout, TLS, HTTP status, size,
    not a JSON object)."""
    if _here.forbidden:
        raise MustNotBlock(url)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise _posting(url, "the webhook URL must be https://host[:port]/path")
    context = _context(url, ca_bundle)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    data = json.dumps(review).encode()
    answered: list[bool] = []  # set once the status line and headers are in
    with _unlocked(), _Watchdog(timeout) as watchdog:
        try:
            body = _exchange(parts, path, data, context=context, timeout=timeout,
                             max_bytes=max_bytes, watchdog=watchdog, answered=answered)
        except WebhookCallError:
            raise
        except (OSError, http.client.HTTPException) as err:
            # a socket's own timeout (also the whole budget) may end it before the watchdog
            # thread runs on a loaded machine: the deadline passed either way
            reason = "context deadline exceeded" if (
                watchdog.fired or isinstance(err, TimeoutError)) else (
                str(err) or type(err).__name__)
            raise (_reading(reason) if answered else _posting(url, reason)) from None
        if watchdog.fired:  # the body ended early because the socket was shut down
            raise _reading("context deadline exceeded")
    try:
        decoded = json.loads(body)
    except ValueError as err:
        raise WebhookCallError(f"the answer is not JSON: {err}", invalid=True) from None
    if not isinstance(decoded, dict):
        raise WebhookCallError("the answer is not a JSON object", invalid=True)
    return decoded


def _exchange(
    parts: urllib.parse.SplitResult, path: str, data: bytes, *, context: ssl.SSLContext,
    timeout: float, max_bytes: int, watchdog: _Watchdog, answered: list[bool],
) -> bytes:
    url = parts.geturl()
    host = str(parts.hostname)
    raw = socket.create_connection((host, parts.port or 443), timeout=timeout)
    watchdog.watch(raw)
    sock = context.wrap_socket(raw, server_hostname=host)
    watchdog.watch(sock)
    connection = http.client.HTTPSConnection(host, parts.port or 443, timeout=timeout,
                                             context=context)
    connection.sock = sock
    try:
        connection.request("POST", path, body=data, headers={
            "Content-Type": "application/json", "Accept": "application/json"})
        reply = connection.getresponse()
        answered.append(True)
        too_long = _reading(f"the answer is over the limit of {max_bytes} bytes")
        length = reply.getheader("Content-Length")
        if length is not None and length.isdigit() and int(length) > max_bytes:
            raise too_long
        chunks: list[bytes] = []
        size = 0
        while chunk := reply.read(_CHUNK):
            size += len(chunk)
            if size > max_bytes:
                raise too_long
            chunks.append(chunk)
    finally:
        connection.close()
    if reply.status != 200:
        raise _posting(url, f"the server answered HTTP {reply.status}")
    return b"".join(chunks)
