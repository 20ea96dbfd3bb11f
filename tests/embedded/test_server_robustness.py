"""Hostile and broken requests: alias bombs, over-deep and out-of-range bodies, clients that
leave mid-request or mid-watch. Each is refused as a real server refuses it, fast, and the
server keeps serving; none is an internal error."""

from __future__ import annotations

import base64
import json
import logging
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3
import yaml

from reconciler.embedded import EmbeddedApiServer
from reconciler.embedded._encoding import EncodeCache
from tests.embedded.helpers import RawClient, configmap, deployment, wait_until

BOMB = b"""apiVersion: v1
kind: ConfigMap
metadata: {name: bomb}
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def _internal_errors(server: EmbeddedApiServer) -> int:
    return sum(n for key, n in server.request_breakdown().items() if key.code >= 500)


def test_yaml_alias_bomb_is_refused_at_once(
    raw: RawClient, kube_namespace: str, kube_api: EmbeddedApiServer
) -> None:
    assert len(BOMB) < 400
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps"
    started = time.monotonic()
    code, body = raw.json("POST", path, raw=BOMB, content_type="application/yaml")
    assert code == 400, body
    assert body["reason"] == "BadRequest"
    assert "yaml: document contains excessive aliasing" in body["message"]
    code, body = raw.json("PATCH", f"{path}/bomb?fieldManager=probe", raw=BOMB,
                          content_type="application/apply-patch+yaml")
    assert code == 400, body
    assert "excessive aliasing" in body["message"]
    assert time.monotonic() - started < 5
    assert raw.json("GET", f"{path}/bomb")[0] == 404  # nothing was stored
    # ordinary aliases still work
    small = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: small}\ndata: &d {a: b}\n"
    assert raw.json("POST", path, raw=small, content_type="application/yaml")[0] == 201


def test_large_yaml_body_is_decoded_and_served(raw: RawClient, kube_namespace: str) -> None:
    """A YAML body over the off-loop threshold takes the worker-thread path."""
    lines = "".join(f"  k{i}: {'v' * 100}\n" for i in range(1000))
    body = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big}}\ndata:\n{lines}".encode()
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps"
    code, created = raw.json("POST", path, raw=body, content_type="application/yaml")
    assert code == 201, created
    assert len(created["data"]) == 1000


def test_body_nested_900_levels_is_invalid_not_an_internal_error(
    raw: RawClient, kube_namespace: str, kube_api: EmbeddedApiServer
) -> None:
    errors_before = _internal_errors(kube_api)
    nested: object = "x"
    for _ in range(900):
        nested = {"a": nested}
    body = configmap("deep")
    body["data"] = nested
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps"
    code, status = raw.json("POST", path, body=body)
    assert code == 422, status
    assert status["reason"] == "Invalid"
    cause = status["details"]["causes"][0]
    assert cause["field"].startswith("data.a.a.a")
    assert "maximum depth" in cause["message"]
    assert _internal_errors(kube_api) == errors_before
    assert raw.json("GET", f"{path}/deep")[0] == 404


def test_int32_field_out_of_range_is_refused(raw: RawClient, kube_namespace: str) -> None:
    path = f"/apis/apps/v1/namespaces/{kube_namespace}/deployments"
    code, status = raw.json("POST", path, body=deployment("huge", replicas=2**40))
    assert code == 400, status
    assert status["message"] == (
        'Deployment in version "v1" cannot be handled as a Deployment: json: cannot unmarshal '
        "number 1099511627776 into Go struct field DeploymentSpec.spec.replicas of type int32"
    )
    assert raw.json("GET", f"{path}/huge")[0] == 404
    # a patch is refused as the recording shows a patch's decoding failure: 422 on "patch"
    assert raw.json("POST", path, body=deployment("small"))[0] == 201
    code, status = raw.json("PATCH", f"{path}/small", body={"spec": {"replicas": 2**31}},
                            content_type="application/merge-patch+json")
    assert code == 422, status
    assert status["details"]["causes"][0]["field"] == "patch"
    assert "of type int32" in status["message"]
    code, obj = raw.json("GET", f"{path}/small")
    assert obj["spec"]["replicas"] == 1
    # the largest int32 is fine
    code, status = raw.json("PATCH", f"{path}/small", body={"spec": {"replicas": 2**31 - 1}},
                            content_type="application/merge-patch+json")
    assert code == 200, status


def _tls_socket(server: EmbeddedApiServer) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(server.ca_cert_path))
    port = int(server.url.rsplit(":", 1)[1])
    plain = socket.create_connection(("127.0.0.1", port), timeout=5)
    return context.wrap_socket(plain, server_hostname="127.0.0.1")


def test_client_leaving_mid_body_is_not_an_error(
    kube_api: EmbeddedApiServer, kube_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    errors_before = _internal_errors(kube_api)
    creates_before = kube_api.request_counts()["create"]
    caplog.set_level(logging.INFO, logger="reconciler.embedded")
    for half_close in (False, True, False, True):
        with _tls_socket(kube_api) as sock:
            sock.sendall(
                f"POST /api/v1/namespaces/{kube_namespace}/configmaps HTTP/1.1\r\n"
                f"Host: 127.0.0.1\r\nAuthorization: Bearer {kube_api.token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
                '{"apiVersion": "v1", '.encode()
            )
            time.sleep(0.1)  # the handler is reading the body
            if half_close:  # the body ends early but the connection stays open
                sock.shutdown(socket.SHUT_WR)
                time.sleep(0.1)
    raw = RawClient(kube_api)
    assert raw.json("GET", f"/api/v1/namespaces/{kube_namespace}/configmaps")[0] == 200
    time.sleep(0.2)
    assert _internal_errors(kube_api) == errors_before
    assert kube_api.request_counts()["create"] == creates_before
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.fixture
def own_server() -> Iterator[EmbeddedApiServer]:
    """A server of its own, whose open watches no other test touches."""
    with EmbeddedApiServer() as server:
        yield server


def test_watch_of_a_closed_connection_ends_at_once(own_server: EmbeddedApiServer) -> None:
    server = own_server
    for _ in range(5):
        sock = _tls_socket(server)
        sock.sendall(
            f"GET /api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=600 HTTP/1.1\r\n"
            f"Host: 127.0.0.1\r\nAuthorization: Bearer {server.token}\r\n\r\n".encode()
        )
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        wait_until(lambda: server.active_watches() == 1)
        sock.close()
        # no event, no bookmark, a 10-minute timeout: only the closed connection ends it
        wait_until(lambda: server.active_watches() == 0, timeout=3)


def test_stalled_watcher_is_ended_and_the_rest_keep_going(own_server: EmbeddedApiServer) -> None:
    """A watcher that never reads is ended once its buffer is full; one that reads is not."""
    server = own_server
    raw = RawClient(server)
    stalled = _tls_socket(server)
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.sendall(
        f"GET /api/v1/namespaces/default/configmaps?watch=1 HTTP/1.1\r\n"
        f"Host: 127.0.0.1\r\nAuthorization: Bearer {server.token}\r\n\r\n".encode()
    )
    reader = raw.request("GET", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=30",
                         preload=False)
    wait_until(lambda: server.active_watches() == 2)
    chunks = reader.read_chunked(decode_content=False)
    value = "x" * 64 * 1024
    # 7.5 MiB: past the stalled watcher's kernel buffers (a 4 MiB send buffer at most on
    # loopback, a 4 KiB receive buffer) and then the server's 1 MiB bound
    for i in range(120):
        code, body = raw.json("POST", "/api/v1/namespaces/default/configmaps",
                              body=configmap(f"big-{i}", v=value))
        assert code == 201, body
        if i % 10 == 9:
            received = b""
            while received.count(b"\n") < 10:
                received += next(chunks)
            assert [json.loads(line)["type"] for line in received.splitlines()] == ["ADDED"] * 10
    wait_until(lambda: server.active_watches() == 1, timeout=5)
    reader.release_conn()
    stalled.close()


def test_stalled_watchers_share_one_budget() -> None:
    """With many watchers, each may hold only its share of the server-wide budget: here a
    per-watcher bound too large to matter (64 MiB) and a budget of 2 MiB among 16 watchers that
    never read. 7.5 MiB of events each (past the kernel's socket buffers, 4 MiB at most on
    loopback) end every one of them; by the per-watcher bound alone none would end."""
    with EmbeddedApiServer(watch_buffer_bytes=64 * 1024 * 1024,
                           watch_buffer_total_bytes=2 * 1024 * 1024) as server:
        raw = RawClient(server)
        stalled = []
        for _ in range(16):
            sock = _tls_socket(server)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(
                f"GET /api/v1/namespaces/default/configmaps?watch=1 HTTP/1.1\r\n"
                f"Host: 127.0.0.1\r\nAuthorization: Bearer {server.token}\r\n\r\n".encode()
            )
            stalled.append(sock)
        wait_until(lambda: server.active_watches() == 16)
        value = "x" * 64 * 1024
        for i in range(120):
            code, body = raw.json("POST", "/api/v1/namespaces/default/configmaps",
                                  body=configmap(f"big-{i}", v=value))
            assert code == 201, body
        wait_until(lambda: server.active_watches() == 0, timeout=10)
        for sock in stalled:
            sock.close()


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc for RSS")
def test_fifty_stalled_watchers_do_not_make_the_server_hoard_memory(tmp_path: Path) -> None:
    """50 watch clients that never read and 300 writes of 64 KiB (about 19 MiB for each
    watcher, 960 MiB in all if buffered): the server's memory stays bounded, it ends those
    watches and keeps serving."""
    kubeconfig = tmp_path / "config"
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "apiserver", "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    sockets: list[ssl.SSLSocket] = []
    try:
        assert process.stdout is not None
        url = process.stdout.readline().rsplit(" ", 1)[1].strip()
        config = yaml.safe_load(kubeconfig.read_text())
        token = config["users"][0]["user"]["token"]
        ca = tmp_path / "ca.crt"
        ca.write_bytes(base64.b64decode(config["clusters"][0]["cluster"][
            "certificate-authority-data"]))
        pool = urllib3.PoolManager(ca_certs=str(ca), retries=False)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        port = int(url.rsplit(":", 1)[1])
        context = ssl.create_default_context(cafile=str(ca))
        for _ in range(50):
            plain = socket.socket()
            plain.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            plain.settimeout(5)
            plain.connect(("127.0.0.1", port))
            sock = context.wrap_socket(plain, server_hostname="127.0.0.1")
            sock.sendall(f"GET /api/v1/namespaces/default/configmaps?watch=1 HTTP/1.1\r\n"
                         f"Host: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
            sockets.append(sock)

        def active() -> int:
            response = pool.request("GET", f"{url}/debug/optk/requests", headers=headers)
            return int(json.loads(response.data)["activeWatches"])

        wait_until(lambda: active() == 50, timeout=20)
        before = _rss_bytes(process.pid)
        path = f"{url}/api/v1/namespaces/default/configmaps"
        started = time.monotonic()
        for i in range(300):
            body = json.dumps(configmap(f"big-{i}", v=f"{i:08d}" * 8192)).encode()
            response = pool.request("POST", path, body=body, headers=headers)
            assert response.status == 201, response.data[:200]
            assert time.monotonic() - started < 120
        grown = _rss_bytes(process.pid) - before
        print(f"RSS {before / 2**20:.0f} MiB, grew by {grown / 2**20:.0f} MiB")
        # 300 objects of 64 KiB are stored (about 20 MiB, their encodings cached too); the
        # 50 watchers may hold 1 MiB each before they are ended
        assert grown < 160 * 1024 * 1024, f"the server grew by {grown / 2**20:.0f} MiB"
        wait_until(lambda: active() == 0, timeout=10)
        response = pool.request("GET", f"{path}?limit=1", headers=headers)
        assert response.status == 200
    finally:
        for sock in sockets:
            sock.close()
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=15)


def test_encoding_cache_is_bounded_in_bytes() -> None:
    cache = EncodeCache(max_bytes=10_000)
    objects = [{"data": {"v": f"{i:04d}" * 500}} for i in range(50)]  # 2 KB each
    for obj in objects:
        assert json.loads(cache.encode(obj)) == obj
        cache.event_chunk("ADDED", obj, served=lambda o: o, version="v1")
    held = sum(len(data) for _, data in cache._entries.values())
    chunks = sum(len(data) for _, data in cache._chunks.values())
    assert held <= 10_000
    assert chunks <= 10_000
