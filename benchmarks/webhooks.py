"""Benchmark: the webhook server's answers under load, against its 5 s admission budget.

A ``reconciler.webhooks.WebhookServer`` serving the Thanos example's versions on 127.0.0.1 over
TLS; ``CONCURRENCY`` client threads post reviews for ``--seconds`` each: a ConversionReview of
one object (v1alpha1 to v1alpha2), of 100 objects (a LIST converted), an AdmissionReview for
validation and one for defaulting. A new TLS connection per request, as kube-apiserver's
webhook client makes when its pooled connections are busy (the worst case). Figures: requests a
second and the p50/p99/max latency in milliseconds per case; ``validate_kept_alive``: one
client on one kept-alive connection, reviews one after another (kube-apiserver's pooled
connection when it is not busy); and the pure answer's own cost
(``conversion_response`` of one object, microseconds) as the floor. The budget the
configurations declare is 5 s for admission (``timeoutSeconds``), 30 s for conversion.

Run: ``python -m benchmarks.webhooks [--json] [--seconds 3]``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import ssl
import statistics
import threading
import time
import urllib.parse
import urllib.request
from typing import Any

from examples.thanos.crds import API_VERSION, API_VERSION_2, KIND, THANOS_VERSIONS
from reconciler.webhooks import (
    VersionsIndex,
    WebhookCertificates,
    WebhookServer,
    conversion_response,
)

CONCURRENCY = 8


def _thanos(name: str) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}"},
            "spec": {"objectStorageSecret": "objstore", "query": {"replicas": 2},
                     "rule": {"replicas": 1, "storage": "20Gi"},
                     "queryFrontend": {"ingress": {"host": "q.example"}}}}


def _admission(operation: str = "CREATE") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "a", "operation": operation, "object": _thanos("a"),
        "kind": {"group": "monitoring.optk.dev", "version": "v1alpha2", "kind": KIND}}}


CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "convert_1": ("/convert", {"request": {"uid": "c", "desiredAPIVersion": API_VERSION_2,
                                           "objects": [_thanos("a")]}}),
    "convert_100": ("/convert", {"request": {"uid": "c", "desiredAPIVersion": API_VERSION_2,
                                             "objects": [_thanos(f"o{i}") for i in range(100)]}}),
    "validate": ("/validate", _admission()),
    "mutate": ("/mutate", _admission()),
}


def _case(server: WebhookServer, ca: bytes, path: str, body: dict[str, Any],
          seconds: float) -> dict[str, float]:
    data = json.dumps(body).encode()
    latencies: list[float] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client() -> None:
        context = ssl.create_default_context(cadata=ca.decode())
        mine = []
        while time.monotonic() < deadline:
            start = time.perf_counter()
            request = urllib.request.Request(server.url + path, data=data,
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, context=context, timeout=30) as answer:
                answer.read()
            mine.append(time.perf_counter() - start)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(CONCURRENCY)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    ordered = sorted(latencies)
    return {
        "per_s": round(len(ordered) / elapsed, 1),
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
        "requests": len(ordered),
    }


def _kept_alive(server: WebhookServer, ca: bytes, path: str, body: dict[str, Any],
                seconds: float) -> dict[str, float]:
    """One client, one kept-alive connection, one review after another (what kube-apiserver's
    pooled client does when it is not busy): a server that answers in two writes with Nagle's
    algorithm on shows the client's delayed ACK here, about 40 ms a call."""
    data = json.dumps(body).encode()
    context = ssl.create_default_context(cadata=ca.decode())
    url = urllib.parse.urlsplit(server.url)
    connection = http.client.HTTPSConnection(url.hostname or "127.0.0.1", url.port,
                                             context=context, timeout=30)
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and len(latencies) < 100_000:
            start = time.perf_counter()
            connection.request("POST", path, body=data,
                               headers={"Content-Type": "application/json"})
            connection.getresponse().read()
            latencies.append(time.perf_counter() - start)
    finally:
        connection.close()
    ordered = sorted(latencies[1:] or latencies)  # the first pays the TLS handshake
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[max(0, int(len(ordered) * 0.99) - 1)] * 1000, 2),
        "requests": len(latencies),
    }


def _pure_us() -> float:
    index = VersionsIndex([THANOS_VERSIONS])
    review = CASES["convert_1"][1]
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(200):
            conversion_response(review, index)
        best = min(best, (time.perf_counter() - start) / 200)
    return round(best * 1e6, 1)


def run(seconds: float) -> dict[str, Any]:
    """Every case for ``seconds``; the figures."""
    certificates = WebhookCertificates.generate(["127.0.0.1"])
    figures: dict[str, Any] = {"pure_convert_1_us": _pure_us()}
    with WebhookServer([THANOS_VERSIONS], certificates=certificates) as server:
        for name, (path, body) in CASES.items():
            figures[name] = _case(server, certificates.ca_pem, path, body, seconds)
        path, body = CASES["validate"]
        figures["validate_kept_alive"] = _kept_alive(server, certificates.ca_pem, path, body,
                                                     seconds)
    figures["concurrency"] = CONCURRENCY
    figures["admission_budget_s"] = 5
    figures["load_average"] = [round(x, 2) for x in os.getloadavg()]
    figures["python"] = platform.python_version()
    figures["cpus"] = os.cpu_count()
    return figures


def main(argv: list[str] | None = None) -> int:
    """Print the figures, and with ``--json`` one JSON object on the last line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per case")
    args = parser.parse_args(argv)
    figures = run(args.seconds)
    print(f"pure conversion of one object: {figures['pure_convert_1_us']} µs")
    for name in CASES:
        case = figures[name]
        print(f"{name:<12} {case['per_s']:>7}/s  p50 {case['p50_ms']} ms  p99 {case['p99_ms']} ms"
              f"  max {case['max_ms']} ms  ({CONCURRENCY} clients, a TLS handshake each)")
    kept = figures["validate_kept_alive"]
    print(f"validate, one kept-alive connection: p50 {kept['p50_ms']} ms  p99 {kept['p99_ms']} ms"
          f"  ({kept['requests']} reviews one after another)")
    print(f"load average {figures['load_average']}")
    if args.json:
        print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
