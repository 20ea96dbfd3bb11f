"""Raw HTTPS for the security tests: an ``optk apiserver`` process and bytes on a TLS socket.

``ApiServerProcess`` runs the embedded server as ``python -m reconciler apiserver`` (so its
memory can be measured alone, from ``/proc/<pid>/status``) and reads the URL, token and CA from
the kubeconfig it writes. ``exchange`` sends exact bytes and returns the status code of the
answer (0 when the server closed the connection without one): nothing is normalised on the way,
which is the point of a parser fuzz.
"""

from __future__ import annotations

import base64
import os
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import yaml

from tests.reliability._harness import ROOT

__all__ = ["ApiServerProcess", "exchange"]


class ApiServerProcess:
    """``optk apiserver`` in a subprocess; ``stop()`` always ends it."""

    def __init__(self, workdir: Path) -> None:
        self.kubeconfig = workdir / "apiserver.kubeconfig"
        self.ca_path = workdir / "ca.pem"
        self.log = workdir / "apiserver.log"
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "reconciler", "apiserver", "--kubeconfig",
                 str(self.kubeconfig)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                stdout=out, stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while "listening on" not in self.log.read_text(errors="replace"):
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                raise AssertionError(f"optk apiserver did not start: {self.log.read_text()}")
            time.sleep(0.1)
        config = yaml.safe_load(self.kubeconfig.read_text())
        cluster = next(c["cluster"] for c in config["clusters"])
        self.url = cluster["server"]
        self.ca_path.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
        self.token = next(u["user"]["token"] for u in config["users"])
        parsed = urlparse(self.url)
        self.host, self.port = parsed.hostname or "127.0.0.1", int(parsed.port or 443)
        self.context = ssl.create_default_context(cafile=str(self.ca_path))

    def rss_mib(self) -> float:
        """The server process's resident memory (MiB)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def connect(self, timeout: float = 10.0) -> ssl.SSLSocket:
        """A TLS connection to the server."""
        raw = socket.create_connection((self.host, self.port), timeout=timeout)
        return self.context.wrap_socket(raw, server_hostname=self.host)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def exchange(server: ApiServerProcess, data: bytes, timeout: float = 10.0) -> int:
    """Send ``data`` as is; the answer's status code, or 0 if the connection closed without."""
    with server.connect(timeout) as conn:
        conn.sendall(data)
        received = b""
        try:
            while b"\r\n" not in received and len(received) < 65536:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                received += chunk
        except (ConnectionError, ssl.SSLError):
            return 0
    line = received.split(b"\r\n", 1)[0].split()
    return int(line[1]) if len(line) >= 2 and line[1].isdigit() else 0


def request(server: ApiServerProcess, method: str, path: str, *, body: bytes = b"",
            token: str | None = None, content_type: str = "application/json",
            headers: dict[str, str] | None = None) -> int:
    """A well-formed HTTP/1.1 request (with ``token`` unless empty); its status code."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {server.host}:{server.port}",
             f"Content-Type: {content_type}", f"Content-Length: {len(body)}",
             "Connection: close"]
    if token is None:
        token = server.token
    if token:
        lines.append(f"Authorization: Bearer {token}")
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return exchange(server, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
