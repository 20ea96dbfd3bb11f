"""Throughput and watch latency of the embedded API server, from one client process.

The server runs in its own process (``python -m reconciler apiserver``, as ``optk apiserver``
runs it), so the client and the server never share a GIL; the client is this process, speaking
HTTPS with keep-alive through aiohttp. Measured: GETs per second of one ConfigMap, PATCHes
(merge patch, each one a real write) per second, the time of one LIST of 1,000 ConfigMaps, and
watch event delivery latency with 1 and 20 concurrent watchers, from sending a write to the
event arriving at each watcher (``watch_latency_ms``: it includes the write's own request, an
upper bound of the delivery). A watcher only stamps the arrival time of each line; lines are
decoded after the run, so the client's JSON decoding of one watcher's event is not charged to
the next watcher. For comparison, ``in_process_watch_latency_ms`` repeats the watch case with
the server in a thread of this process (one GIL for both sides, as a test suite runs it).
Run as ``python -m benchmarks.apiserver [--json] [--writes N] [--no-in-process]``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import platform
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from reconciler.embedded import EmbeddedApiServer

NAMESPACE = "default"
CONCURRENCY = 8


class Server:
    """A running embedded API server, and how to reach it (from its kubeconfig)."""

    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        self.url = str(cluster["server"])
        self.token = str(config["users"][0]["user"]["token"])
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        self.ssl = ssl.create_default_context(cadata=ca)

    def stop(self) -> None:
        """Stop the server."""


class ProcessServer(Server):
    """``optk apiserver`` in a child process."""

    def __init__(self) -> None:
        self.directory = tempfile.TemporaryDirectory(prefix="optk-bench-")
        kubeconfig = Path(self.directory.name) / "kubeconfig"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "apiserver", "--kubeconfig", str(kubeconfig)],
            stdout=subprocess.PIPE, text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if "listening on" not in line:
            raise RuntimeError(f"the apiserver did not start: {line!r}")
        while not kubeconfig.exists():
            time.sleep(0.01)
        super().__init__(kubeconfig)

    def stop(self) -> None:
        """Stop the child process (SIGTERM, as a user would)."""
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=10)
        self.directory.cleanup()


class ThreadServer(Server):
    """``EmbeddedApiServer`` in a background thread of this process (for comparison only)."""

    def __init__(self) -> None:
        self.server = EmbeddedApiServer().start()
        super().__init__(self.server.kubeconfig_path)

    def stop(self) -> None:
        """Stop the server thread."""
        self.server.stop()


async def _rate(session: aiohttp.ClientSession, method: str, url: str, *, seconds: float,
                body: Any = None, content_type: str | None = None) -> float:
    """Requests per second with ``CONCURRENCY`` keep-alive connections for ``seconds``."""
    deadline = time.perf_counter() + seconds
    done = 0
    headers = {"Content-Type": content_type} if content_type else {}

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            # a body that changes every time, so that every PATCH really writes
            payload = json.dumps(body).replace("COUNTER", str(done)).encode() if body else None
            async with session.request(method, url, data=payload, headers=headers) as response:
                await response.read()
                if response.status >= 400:
                    raise RuntimeError(f"{method} {url}: {response.status}")
            done += 1

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return done / (time.perf_counter() - began)


async def _list_ms(session: aiohttp.ClientSession, url: str) -> float:
    times = []
    for _ in range(7):
        began = time.perf_counter()
        async with session.get(url) as response:
            body = await response.json()
        times.append((time.perf_counter() - began) * 1000)
        if len(body["items"]) < 1000:
            raise RuntimeError(f"listed {len(body['items'])} objects, expected 1000")
    return min(times)


def _percentiles(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    return {"p50": round(statistics.median(values), 3),
            "p99": round(values[int(len(values) * 0.99) - 1], 3)}


async def _watch_latency(session: aiohttp.ClientSession, base: str, *, watchers: int,
                         writes: int) -> dict[str, float]:
    """From sending each write to each watcher's event: p50 and p99 in milliseconds."""
    ns_url = f"{base}/api/v1/namespaces/{NAMESPACE}/configmaps"
    async with session.get(f"{ns_url}?limit=1") as response:
        start_rv = (await response.json())["metadata"]["resourceVersion"]
    sent_at: dict[str, float] = {}
    arrivals: list[tuple[bytes, float]] = []
    ready = 0

    async def watcher() -> None:
        nonlocal ready
        url = (f"{ns_url}?watch=1&resourceVersion={start_rv}&timeoutSeconds=300"
               "&fieldSelector=metadata.name%3Dlatency")
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=None)) as response:
            ready += 1
            received = 0
            async for line in response.content:
                arrivals.append((line, time.perf_counter()))  # decoded after the run
                received += 1
                if received == writes:
                    return

    tasks = [asyncio.create_task(watcher()) for _ in range(watchers)]
    while ready < watchers:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)
    for n in range(writes):
        sent_at[str(n)] = time.perf_counter()
        async with session.patch(f"{ns_url}/latency", data=json.dumps({"data": {"n": str(n)}}),
                                 headers={"Content-Type": "application/merge-patch+json"}) as r:
            await r.read()
        await asyncio.sleep(0.01)
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=120)
    latencies = []
    for line, at in arrivals:
        value = str((json.loads(line)["object"].get("data") or {}).get("n"))
        latencies.append((at - sent_at[value]) * 1000)
    if len(latencies) != watchers * writes:
        raise RuntimeError(f"{len(latencies)} events arrived, expected {watchers * writes}")
    return _percentiles(latencies)


async def _watch_cases(server: Server, *, writes: int) -> dict[str, dict[str, float]]:
    """``_watch_latency`` for 1 and 20 watchers, keyed by the number of watchers."""
    async with _session(server) as session:
        ns_url = f"{server.url}/api/v1/namespaces/{NAMESPACE}/configmaps"
        async with session.get(f"{ns_url}/latency") as response:
            if response.status == 404:
                async with session.post(ns_url, json={"metadata": {"name": "latency"}}) as r:
                    await r.read()
        return {str(n): await _watch_latency(session, server.url, watchers=n, writes=writes)
                for n in (1, 20)}


def _session(server: Server) -> aiohttp.ClientSession:
    headers = {"Authorization": f"Bearer {server.token}", "Accept": "application/json"}
    connector = aiohttp.TCPConnector(ssl=server.ssl, limit=64)
    return aiohttp.ClientSession(headers=headers, connector=connector)


async def _run(server: Server, *, seconds: float, writes: int) -> dict[str, Any]:
    async with _session(server) as session:
        ns_url = f"{server.url}/api/v1/namespaces/{NAMESPACE}/configmaps"
        for i in range(1000):
            body = {"metadata": {"name": f"item-{i:04d}", "labels": {"bench": "list"}},
                    "data": {"key": "value" * 4}}
            async with session.post(ns_url, json=body) as response:
                await response.read()
        figures: dict[str, Any] = {}
        figures["get_per_s"] = round(
            await _rate(session, "GET", f"{ns_url}/item-0000", seconds=seconds), 1)
        figures["patch_per_s"] = round(await _rate(
            session, "PATCH", f"{ns_url}/item-0001", seconds=seconds,
            body={"metadata": {"annotations": {"bench": "COUNTER"}}},
            content_type="application/merge-patch+json",
        ), 1)
        figures["list_1000_ms"] = round(await _list_ms(session, f"{ns_url}?labelSelector="
                                                                 "bench%3Dlist"), 2)
    figures["watch_latency_ms"] = await _watch_cases(server, writes=writes)
    return figures


def run(seconds: float = 3.0, *, writes: int = 500, in_process: bool = True) -> dict[str, Any]:
    """Start a server process, measure, stop it; the figures as a dict.

    With ``in_process``, the watch cases are repeated against a server in a thread of this
    process (``in_process_watch_latency_ms``).
    """
    server: Server = ProcessServer()
    try:
        figures = asyncio.run(_run(server, seconds=seconds, writes=writes))
    finally:
        server.stop()
    if in_process:
        server = ThreadServer()
        try:
            figures["in_process_watch_latency_ms"] = asyncio.run(
                _watch_cases(server, writes=writes))
        finally:
            server.stop()
    figures["client_concurrency"] = CONCURRENCY
    figures["watch_writes"] = writes
    figures["load_average"] = [round(x, 2) for x in os.getloadavg()]
    figures["python"] = platform.python_version()
    figures["cpus"] = os.cpu_count()
    return figures


def main(argv: list[str] | None = None) -> int:
    """Print the figures, and with ``--json`` one JSON object on the last line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per rate case")
    parser.add_argument("--writes", type=int, default=500, help="writes per watch case")
    parser.add_argument("--no-in-process", dest="in_process", action="store_false",
                        help="skip the comparison with a server in this process")
    args = parser.parse_args(argv)
    figures = run(args.seconds, writes=args.writes, in_process=args.in_process)
    print(f"GET/s {figures['get_per_s']}  PATCH/s {figures['patch_per_s']}  "
          f"LIST 1000 {figures['list_1000_ms']} ms")
    for watchers, lat in figures["watch_latency_ms"].items():
        line = (f"watch latency, {watchers:>2} watchers: p50 {lat['p50']} ms  "
                f"p99 {lat['p99']} ms")
        if "in_process_watch_latency_ms" in figures:
            same = figures["in_process_watch_latency_ms"][watchers]
            line += f"  (server in this process: p50 {same['p50']} ms  p99 {same['p99']} ms)"
        print(line)
    print(f"load average {figures['load_average']}")
    if args.json:
        print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
