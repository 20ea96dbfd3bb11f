"""One call of a webhook by the embedded server: an HTTPS POST of a review, bounded in time and
size.

Both kinds of webhook the server calls (conversion, ``_conversion``; admission, ``_admission``)
post a JSON review to a ``clientConfig.url``, verify the webhook's certificate against the
configured ``caBundle`` and read a JSON answer. This module is that call and nothing else: the
``timeout`` bounds the whole call (connection, TLS handshake, request, headers and body: a
watchdog shuts the socket down at the deadline, so a webhook that drips its answer byte by byte
cannot hold the server longer), and an answer over ``MAX_ANSWER_BYTES`` (kube-apiserver's 3 MiB
limit on a webhook response) is refused before it is decoded. Every failure is a
``WebhookCallError`` whose text reads as kube-apiserver's (``Post "<url>": <reason>``); what a
failure means (500, or ignored under ``failurePolicy: Ignore``) is the caller's to decide.
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
from collections.abc import Mapping
from typing import Any

from reconciler.embedded._errors import EmbeddedServerError

__all__ = ["MAX_ANSWER_BYTES", "WebhookCallError", "post_review"]

MAX_ANSWER_BYTES = 3 * 1024 * 1024
"""The largest webhook answer read (kube-apiserver refuses larger ones too)."""

_CHUNK = 64 * 1024


class WebhookCallError(EmbeddedServerError, ConnectionError):
    """A webhook could not be called or answered nonsense; ``url`` and ``reason`` say why."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"Post {json.dumps(url)}: {reason}")
        self.url = url
        self.reason = reason


def _context(url: str, ca_bundle: object) -> ssl.SSLContext:
    if not isinstance(ca_bundle, str) or not ca_bundle:
        return ssl.create_default_context()
    try:
        return ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode())
    except (ValueError, ssl.SSLError) as err:
        raise WebhookCallError(url, f"caBundle: {err}") from None


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
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise WebhookCallError(url, "the webhook URL must be https://host[:port]/path")
    context = _context(url, ca_bundle)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    data = json.dumps(review).encode()
    with _Watchdog(timeout) as watchdog:
        try:
            return _exchange(parts, path, data, context=context, timeout=timeout,
                             max_bytes=max_bytes, watchdog=watchdog)
        except WebhookCallError:
            raise
        except (OSError, http.client.HTTPException, ValueError) as err:
            if watchdog.fired:
                raise WebhookCallError(url, "context deadline exceeded") from None
            raise WebhookCallError(url, str(err) or type(err).__name__) from None


def _exchange(
    parts: urllib.parse.SplitResult, path: str, data: bytes, *, context: ssl.SSLContext,
    timeout: float, max_bytes: int, watchdog: _Watchdog,
) -> dict[str, Any]:
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
        length = reply.getheader("Content-Length")
        if length is not None and length.isdigit() and int(length) > max_bytes:
            raise WebhookCallError(url, f"the answer of {length} bytes is over the limit of "
                                        f"{max_bytes} bytes")
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = reply.read(_CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise WebhookCallError(url, f"the answer is over the limit of {max_bytes} "
                                            "bytes")
            chunks.append(chunk)
    finally:
        connection.close()
    if reply.status != 200:
        raise WebhookCallError(url, f"the server answered HTTP {reply.status}")
    body = json.loads(b"".join(chunks))
    if not isinstance(body, dict):
        raise WebhookCallError(url, "the answer is not a JSON object")
    return body
