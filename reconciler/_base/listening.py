"""The operator's one HTTP listener: what the health/metrics server and the webhook server bind.

Both serve a thread per connection and bind what they are told: ``0.0.0.0`` and ``::`` mean
every interface of both IP families (as Kubernetes components read ``--bind-address``): a
dual-stack socket, or IPv4 alone where the kernel has no IPv6. Neither resolves its own name
at bind time, as ``http.server.HTTPServer`` does (``socket.getfqdn``: slow, or hanging, where DNS
is unreachable, as inside many clusters' network policies).

Boundary: binding and the server class; what is served (``reconciler._base.metrics``,
``reconciler._webhooks.server``) and TLS are the servers'.
"""

from __future__ import annotations

import errno
import socket
import socketserver
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

__all__ = ["Listener", "listen"]

_L = TypeVar("_L", bound="Listener")

_ANY = ("0.0.0.0", "::")


class Listener(ThreadingHTTPServer):
    """A threaded HTTP server of one address family (dual-stack when asked) that does not
    resolve its own name; ``daemon_threads``: a stuck connection never holds the process."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], *,
                 family: socket.AddressFamily = socket.AF_INET, dual_stack: bool = False,
                 **_: Any) -> None:
        self.address_family = family
        self.dual_stack = dual_stack
        super().__init__(address, handler)

    def server_bind(self) -> None:
        """Bind without ``HTTPServer``'s name lookup."""
        if self.dual_stack:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        socketserver.TCPServer.server_bind(self)
        self.server_name = str(self.server_address[0])
        self.server_port = int(self.server_address[1])


def listen(host: str, port: int, handler: type[BaseHTTPRequestHandler], *,
           listener: Callable[..., _L] = Listener) -> _L:  # type: ignore[assignment]
    """A ``listener`` bound to ``host``:``port`` (0: a free port): ``0.0.0.0`` and ``::`` on
    every interface of both families (IPv4 alone where the kernel has no IPv6)."""
    if host in _ANY:
        try:
            return listener(("::", port), handler, family=socket.AF_INET6, dual_stack=True)
        except OSError as error:
            if error.errno not in (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL):
                raise
            return listener(("0.0.0.0", port), handler)  # no IPv6 here (kernel or sysctl)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return listener((host, port), handler, family=family)
