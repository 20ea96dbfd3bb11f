"""Throughput and watch latency of the embedded API server, from one client process.

The server runs in its own process (``python -m reconciler apiserver``), so the client and the
server never share a GIL; the client is this process, speaking HTTPS with keep-alive through
aiohttp. Measured: GETs per second of one ConfigMap, PATCHes (merge patch, each one a real write)
per second, the time
of one LIST of 1,000 ConfigMaps, and watch event delivery latency with 1 and 20 concurrent
watchers, from sending a write to the event arriving at each watcher (``watch_latency_ms``: it
includes the write's own round trip, an upper bound) and from the write's response arriving to
the event arriving (``watch_after_write_response_ms``: the fan-out itself). Run as
``python -m benchmarks.apiserver [--json]``.
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

NAMESPACE = "default"
CONCURRENCY = 8


class Server:
    """``optk apiserver`` in a child process, and how to reach it."""

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
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        self.url = str(cluster["server"])
        self.token = str(config["users"][0]["user"]["token"])
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        self.ssl = ssl.create_default_context(cadata=ca)

    def stop(self) -> None:
        """Stop the child process (SIGTERM, as a user would)."""
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=10)
        self.directory.cleanup()


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
                         writes: int) -> tuple[dict[str, float], dict[str, float]]:
    """(from sending each write, from receiving the write's response) to each watcher's event."""
    ns_url = f"{base}/api/v1/namespaces/{NAMESPACE}/configmaps"
    async with session.get(f"{ns_url}?limit=1") as response:
        start_rv = (await response.json())["metadata"]["resourceVersion"]
    sent_at: dict[str, float] = {}
    acked_at: dict[str, float] = {}
    arrivals: list[tuple[str, float]] = []
    ready = 0

    async def watcher() -> None:
        nonlocal ready
        url = (f"{ns_url}?watch=1&resourceVersion={start_rv}&timeoutSeconds=120"
               "&fieldSelector=metadata.name%3Dlatency")
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=None)) as response:
            ready += 1
            received = 0
            async for line in response.content:
                now = time.perf_counter()
                event = json.loads(line)
                value = (event["object"].get("data") or {}).get("n")
                if value in sent_at:
                    arrivals.append((value, now))
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
        acked_at[str(n)] = time.perf_counter()
        await asyncio.sleep(0.01)
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)
    from_send = [(at - sent_at[n]) * 1000 for n, at in arrivals]
    # an event may arrive before the write's own response: that counts as no delay
    from_ack = [max(at - acked_at[n], 0.0) * 1000 for n, at in arrivals]
    return _percentiles(from_send), _percentiles(from_ack)


async def _run(server: Server, seconds: float) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {server.token}", "Accept": "application/json"}
    connector = aiohttp.TCPConnector(ssl=server.ssl, limit=64)
    async with aiohttp.ClientSession(headers=headers, connector=connector) as session:
        ns_url = f"{server.url}/api/v1/namespaces/{NAMESPACE}/configmaps"
        for i in range(1000):
            body = {"metadata": {"name": f"item-{i:04d}", "labels": {"bench": "list"}},
                    "data": {"key": "value" * 4}}
            async with session.post(ns_url, json=body) as response:
                await response.read()
        async with session.post(ns_url, json={"metadata": {"name": "latency"}}) as response:
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
        figures["watch_latency_ms"] = {}
        figures["watch_after_write_response_ms"] = {}
        for n in (1, 20):
            from_send, from_ack = await _watch_latency(session, server.url, watchers=n,
                                                       writes=200)
            figures["watch_latency_ms"][str(n)] = from_send
            figures["watch_after_write_response_ms"][str(n)] = from_ack
        return figures


def run(seconds: float = 3.0) -> dict[str, Any]:
    """Start a server process, measure, stop it; the figures as a dict."""
    server = Server()
    try:
        figures = asyncio.run(_run(server, seconds))
    finally:
        server.stop()
    figures["client_concurrency"] = CONCURRENCY
    figures["python"] = platform.python_version()
    figures["cpus"] = os.cpu_count()
    return figures


def main(argv: list[str] | None = None) -> int:
    """Print the figures, and with ``--json`` one JSON object on the last line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per rate case")
    args = parser.parse_args(argv)
    figures = run(args.seconds)
    print(f"GET/s {figures['get_per_s']}  PATCH/s {figures['patch_per_s']}  "
          f"LIST 1000 {figures['list_1000_ms']} ms")
    for watchers, lat in figures["watch_latency_ms"].items():
        ack = figures["watch_after_write_response_ms"][watchers]
        print(f"watch latency, {watchers:>2} watchers: p50 {lat['p50']} ms  p99 {lat['p99']} ms"
              f"  (after the write's response: p50 {ack['p50']} ms  p99 {ack['p99']} ms)")
    if args.json:
        print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
