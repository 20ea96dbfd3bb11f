"""The operator's webhook server: HTTPS, three paths, the pure answers of ``reviews``.

``POST /convert`` (ConversionReview), ``/validate`` and ``/mutate`` (AdmissionReview) on a
thread per connection, TLS from :class:`WebhookCertificates`. Certificates can be replaced while
serving (:meth:`WebhookServer.use`): each new connection is wrapped with the current context, so
a rotation needs no restart. Each call is counted by path and logged at DEBUG with the kind, the
versions and the verdict (never an object's content), so a test or an operator can tell that the
API server called (a real API server's audit log does not record conversion calls). A body over
3 MiB, or one that is not a review, is answered 400; a registered function that raises, 500 (the
configuration's ``failurePolicy`` then decides), logged with its traceback.
"""

from __future__ import annotations

import collections
import json
import logging
import ssl
import tempfile
import threading
from collections.abc import Sequence
from functools import partial
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from socket import socket
from typing import Any

from builders.specs import Versions
from reconciler._base.listening import Listener, listen
from reconciler._webhooks.certificates import WebhookCertificates
from reconciler._webhooks.configs import CONVERT_PATH, MUTATE_PATH, VALIDATE_PATH
from reconciler._webhooks.reviews import VersionsIndex, admission_response, conversion_response

__all__ = ["WebhookServer"]

log = logging.getLogger("reconciler.webhooks")
_MAX_BODY = 3 * 1024 * 1024
_READ_TIMEOUT = 10.0


def _context(certificates: WebhookCertificates) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with tempfile.TemporaryDirectory(prefix="optk-webhook-") as folder:
        certificates.write(Path(folder))  # the ssl module loads keys from files only
        context.load_cert_chain(Path(folder) / "tls.crt", Path(folder) / "tls.key")
    return context


class _Server(Listener):
    """The operator's listener (``reconciler._base.listening``), each connection wrapped in
    the current TLS context."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], *,
                 owner: WebhookServer, **bind: Any) -> None:
        self.owner = owner
        super().__init__(address, handler, **bind)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("webhook: connection from %s failed", client_address, exc_info=True)

    def get_request(self) -> tuple[socket, Any]:
        sock, address = super().get_request()
        sock.settimeout(_READ_TIMEOUT)
        return self.owner.wrap(sock), address


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # The headers and the body go out as two writes: with Nagle's algorithm the body waits
    # for the API server's delayed ACK of the headers on a kept-alive connection (about 40 ms
    # a call: 44 ms median against 1-2 ms without it, python -m benchmarks.webhooks).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("webhook %s", format % args)

    def setup(self) -> None:
        try:
            self.request.do_handshake()
        except (ssl.SSLError, OSError):
            log.debug("webhook: TLS handshake failed", exc_info=True)
            raise
        super().setup()

    def do_POST(self) -> None:
        path = self.path.partition("?")[0]
        length = int(self.headers.get("Content-Length") or 0)
        if path not in (CONVERT_PATH, VALIDATE_PATH, MUTATE_PATH):
            self._answer(404, {"message": f"no webhook at {path}"})
            return
        if not 0 < length <= _MAX_BODY:
            self._answer(400, {"message": "a review body of at most 3 MiB is needed"})
            return
        try:
            review = json.loads(self.rfile.read(length))
            if not isinstance(review, dict):
                raise ValueError("not an object")
        except ValueError as err:
            self._answer(400, {"message": f"not a review: {err}"})
            return
        try:
            answer = self.server.owner.answer(path, review)
        except Exception as err:  # a bug in a registered function: the API server's
            log.exception("webhook %s failed", path)  # failurePolicy decides
            self._answer(500, {"message": f"webhook {path} failed: {type(err).__name__}"})
            return
        self._answer(200, answer)

    def _answer(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class WebhookServer:
    """Serves the conversion, validation and defaulting of ``versions`` over HTTPS.

    ``host``/``port`` (0: a free port, see :attr:`port`) is where it listens; a context manager,
    or :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self, versions: Sequence[Versions], *, certificates: WebhookCertificates,
        host: str = "127.0.0.1", port: int = 0,
    ) -> None:
        self._index = VersionsIndex(versions)
        self._lock = threading.Lock()
        self._context = _context(certificates)
        self._certificates = certificates
        self._counts: collections.Counter[str] = collections.Counter()
        self._server = listen(host, port, _Handler, listener=partial(_Server, owner=self))
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``https://host:port``, the base of the three paths."""
        host = str(self._server.server_address[0])
        return f"https://[{host}]:{self.port}" if ":" in host else f"https://{host}:{self.port}"

    @property
    def certificates(self) -> WebhookCertificates:
        """The certificates new connections are served with."""
        with self._lock:
            return self._certificates

    def use(self, certificates: WebhookCertificates) -> None:
        """Serve new connections with ``certificates`` (a rotation; no restart)."""
        context = _context(certificates)
        with self._lock:
            self._context, self._certificates = context, certificates

    def wrap(self, sock: socket) -> ssl.SSLSocket:
        """``sock`` wrapped with the current TLS context (the handshake is the handler's)."""
        with self._lock:
            context = self._context
        return context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)

    def answer(self, path: str, review: dict[str, Any]) -> dict[str, Any]:
        """The response body for ``review`` posted at ``path``; counts and logs the call."""
        request = review.get("request") or {}
        if path == CONVERT_PATH:
            response = conversion_response(review, self._index)
            objects = request.get("objects") or [{}]
            log.debug("webhook convert %s %s -> %s: %s", objects[0].get("kind"),
                      objects[0].get("apiVersion"), request.get("desiredAPIVersion"),
                      response["response"]["result"]["status"])
        else:
            response = admission_response(review, self._index, mutate=path == MUTATE_PATH)
            kind = request.get("kind") or {}
            log.debug("webhook %s %s %s/%s: allowed=%s", path.strip("/"),
                      request.get("operation"), kind.get("group"), kind.get("kind"),
                      response["response"]["allowed"])
        with self._lock:
            self._counts[path.strip("/")] += 1
        return response

    def counts(self) -> dict[str, int]:
        """Calls answered so far by path: ``convert``, ``validate``, ``mutate``."""
        with self._lock:
            return dict(self._counts)

    def start(self) -> WebhookServer:
        """Serve on a background thread; returns self."""
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="optk-webhooks", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=10)
        self._server.server_close()

    def __enter__(self) -> WebhookServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
