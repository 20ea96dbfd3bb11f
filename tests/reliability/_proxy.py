"""A logging reverse proxy per operator replica: who wrote what, and when.

The embedded server counts requests by verb, resource and code but cannot tell two clients
apart (one token, no per-user-agent log). To check "never two writers" each replica talks to
its own ``WriteLog`` proxy (plain HTTP on 127.0.0.1, forwarded to the server over verified TLS,
responses streamed so watches work): every non-GET request is recorded with the replica's label,
the monotonic time it arrived and the answer's status. Nothing is changed on the way; a test
may only hold an answer back (``hold``): the server has applied the request, the client hears
of it late, as over a slow or congested link; or ``stall()`` every answer being streamed at that
moment (a watch): its connection stays open, no FIN, no RST, but no byte of it is relayed any
more, as when a NAT or load balancer silently forgets a connection. Later requests are relayed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path

import attrs
import yaml
from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

__all__ = ["LoggedWrite", "WriteLog"]

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding",
        "host", "upgrade"}


@attrs.frozen(kw_only=True)
class LoggedWrite:
    """One write a replica sent: label, time (``time.monotonic()``), method, path, status."""

    who: str
    at: float
    method: str
    path: str
    status: int
    name: str = ""
    """The object written: a create's from its body, else the path's object name."""


def _written_name(method: str, path: str, body: bytes) -> str:
    if method == "POST":
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            return str(json.loads(body)["metadata"]["name"])
        return ""
    parts = path.strip("/").split("/")
    if len(parts) >= 2 and parts[-1] in ("status", "scale"):
        return parts[-2]
    return parts[-1] if parts else ""


class WriteLog:
    """A proxy for replica ``who`` in front of the server at ``upstream``; ``writes`` grows."""

    def __init__(self, *, who: str, upstream: str, ca_path: Path, token: str,
                 hold: Callable[[str, str], float] | None = None) -> None:
        self.who = who
        self._hold = hold
        self.writes: list[LoggedWrite] = []
        self._upstream = upstream
        self._ca = str(ca_path)
        self._token = token
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._session: ClientSession | None = None
        self.port = 0
        self._serial = 0
        self._stalled_upto = 0
        self.stalled = 0
        """Answers ``stall()`` froze: each stopped relaying at its next chunk."""
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                         name=f"writelog-{who}")

    def start(self) -> WriteLog:
        """Serve on a free loopback port (``self.port``)."""
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def stall(self) -> None:
        """Relay nothing more of the watches open now (their connections stay open)."""
        async def mark() -> None:
            self._stalled_upto = self._serial

        asyncio.run_coroutine_threadsafe(mark(), self._loop).result(10)

    async def _start(self) -> None:
        context = ssl.create_default_context(cafile=self._ca)
        self._session = ClientSession(connector=TCPConnector(ssl=context, limit=0),
                                      timeout=ClientTimeout(total=None), auto_decompress=False)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False,
                                     shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        arrived = time.monotonic()
        watch = request.query.get("watch", "").lower() in ("true", "1")
        if watch:
            self._serial += 1
        serial = self._serial if watch else None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        async with self._session.request(
            request.method, self._upstream + request.rel_url.raw_path_qs, headers=headers,
            data=body or None, allow_redirects=False,
        ) as upstream:
            if request.method not in ("GET", "HEAD", "OPTIONS"):
                self.writes.append(LoggedWrite(who=self.who, at=arrived, method=request.method,
                                               path=request.path, status=upstream.status,
                                               name=_written_name(request.method,
                                                                  request.path, body)))
            if self._hold is not None and (seconds := self._hold(request.method, request.path)):
                await asyncio.sleep(seconds)  # applied upstream; the answer arrives late
            response = web.StreamResponse(status=upstream.status, headers={
                k: v for k, v in upstream.headers.items() if k.lower() not in _HOP
            })
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                if serial is not None and serial <= self._stalled_upto:  # silently dead
                    self.stalled += 1
                    await asyncio.Event().wait()  # until the proxy stops (cancelled)
                await response.write(chunk)
            await response.write_eof()
            return response

    def kubeconfig(self, path: Path) -> Path:
        """Write a kubeconfig that points at this proxy (plain HTTP, the server's token)."""
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "proxy",
            "clusters": [{"name": "proxy",
                          "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
            "users": [{"name": "proxy", "user": {"token": self._token}}],
            "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "proxy"}}],
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def stop(self) -> None:
        """Stop serving and end the event loop thread."""
        async def _stop() -> None:
            if self._runner is not None:
                await self._runner.cleanup()
            if self._session is not None:
                await self._session.close()
            current = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not current]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(_stop(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()
