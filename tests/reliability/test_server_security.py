"""The embedded API server against hostile clients, as ``optk apiserver`` in its own process.

Tokens (none, wrong, malformed), a non-loopback bind, hostile bodies (malformed, oversized,
deeply nested, non-UTF-8, YAML alias bombs), path tricks in names, 200 concurrent watches of
clients that never read while objects are written, and a Hypothesis fuzz of raw requests. The
server must answer each with a 4xx (never a 5xx, never a hang), keep serving, and keep its
resident memory bounded (measured from ``/proc``).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.embedded import EmbeddedApiServer
from tests.reliability import _counts
from tests.reliability._harness import ROOT, SOAK
from tests.reliability._raw import ApiServerProcess, exchange, request

CMS = "/api/v1/namespaces/default/configmaps"
WATCHERS = 500 if SOAK else 200
RSS_BOUND_MIB = 400.0


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServerProcess]:
    server = ApiServerProcess(tmp_path_factory.mktemp("apiserver"))
    try:
        yield server
    finally:
        server.stop()


def _alive(server: ApiServerProcess) -> None:
    assert request(server, "GET", "/api/v1/namespaces/default") == 200


def test_tokens_are_checked(apiserver: ApiServerProcess) -> None:
    cases = {"none": "", "wrong": "x" * 43, "prefix of the token": apiserver.token[:-1],
             "token plus a byte": apiserver.token + "A"}
    for what, token in cases.items():
        assert request(apiserver, "GET", CMS, token=token) == 401, what
    malformed = {"basic": "Basic " + apiserver.token, "empty bearer": "Bearer ",
                 "two tokens": f"Bearer {apiserver.token} {apiserver.token}",
                 "lower-case scheme": "bearer x"}
    for what, header in malformed.items():
        status = exchange(apiserver, (
            f"GET {CMS} HTTP/1.1\r\nHost: x\r\nAuthorization: {header}\r\n"
            "Connection: close\r\n\r\n").encode())
        assert status == 401, what
    _alive(apiserver)
    _counts.add("security:tokens", {"security.bad_tokens": len(cases) + len(malformed)})


def test_non_loopback_binds_are_refused(tmp_path: Path) -> None:
    for host in ("0.0.0.0", "10.1.2.3", "::"):
        with pytest.raises(ValueError, match="non-loopback"):
            EmbeddedApiServer(host=host)
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "apiserver", "--host", "0.0.0.0", "--kubeconfig",
         str(tmp_path / "kc")], cwd=ROOT, capture_output=True, text=True, timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "non-loopback" in done.stderr
    _counts.add("security:bind", {"security.non_loopback_binds": 4})


def test_hostile_bodies_are_refused_quickly(apiserver: ApiServerProcess) -> None:
    nested = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep"},"data":' \
        + '{"a":' * 5000 + "1" + "}" * 5000 + "}"
    bomb = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},"
        f"*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},"
        f"*{chr(97 + i)}]\n" for i in range(8))
    bodies: dict[str, tuple[bytes, str]] = {
        "malformed json": (b'{"apiVersion": "v1", "kind": ', "application/json"),
        "not an object": (b"[1, 2, 3]", "application/json"),
        "oversized": (b'{"data": {"a": "' + b"x" * (4 * 1024 * 1024) + b'"}}',
                      "application/json"),
        "deeply nested": (nested.encode(), "application/json"),
        "non-utf-8": (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"\xff\xfe"}}',
                      "application/json"),
        "alias bomb": (bomb.encode(), "application/yaml"),
        "huge integer": (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"n",'
                         b'"generation":' + b"9" * 5000 + b"}}", "application/json"),
    }
    for what, (body, content_type) in bodies.items():
        started = time.monotonic()
        status = request(apiserver, "POST", CMS, body=body, content_type=content_type)
        assert 400 <= status < 500, f"{what}: {status}"
        assert time.monotonic() - started < 10, f"{what} took too long"
    _alive(apiserver)
    _counts.add("security:bodies", {"security.hostile_bodies": len(bodies)})


def test_path_tricks_in_names_never_reach_other_objects(apiserver: ApiServerProcess) -> None:
    secret = json.dumps({"apiVersion": "v1", "kind": "Secret",
                         "metadata": {"name": "target"}, "stringData": {"k": "v"}}).encode()
    assert request(apiserver, "POST", "/api/v1/namespaces/default/secrets", body=secret) == 201
    tricks = [
        f"{CMS}/..%2Fsecrets%2Ftarget", f"{CMS}/../secrets/target", f"{CMS}/%2e%2e",
        "/api/v1/namespaces/default/configmaps/x%00y", f"{CMS}/" + "a" * 10_000,
        "/api/v1/namespaces/..%2Fkube-system/secrets", "/api/v1/namespaces/default/%2e%2e/secrets",
        f"{CMS}/target/../../secrets/target",
    ]
    for path in tricks:
        status = request(apiserver, "GET", path)
        assert status in (400, 404, 405, 414, 422, 431), f"{path[:80]}: {status}"
    for name in ("../x", "a/b", "x%2Fy", "..", "A_B", "x" * 300):
        body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": name}}).encode()
        status = request(apiserver, "POST", CMS, body=body)
        assert 400 <= status < 500, f"create {name[:20]!r}: {status}"
    _alive(apiserver)
    _counts.add("security:paths", {"security.path_tricks": len(tricks) + 6})


def test_hundreds_of_stalled_watchers_keep_memory_bounded(apiserver: ApiServerProcess) -> None:
    before = apiserver.rss_mib()
    watchers: list[socket.socket] = []
    try:
        for _ in range(WATCHERS):
            conn = apiserver.connect()
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            conn.sendall((f"GET {CMS}?watch=true HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                          f"{apiserver.token}\r\n\r\n").encode())
            watchers.append(conn)  # never read from
        payload = "x" * (64 * 1024)
        peak, started = before, time.monotonic()
        for index in range(150):
            body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": f"fill-{index}"},
                               "data": {"v": payload}}).encode()
            assert request(apiserver, "POST", CMS, body=body) == 201
            if index % 25 == 0:
                peak = max(peak, apiserver.rss_mib())
        peak = max(peak, apiserver.rss_mib())
        elapsed = time.monotonic() - started
        _alive(apiserver)
    finally:
        for conn in watchers:
            conn.close()
    time.sleep(1.0)
    _alive(apiserver)
    assert peak - before < RSS_BOUND_MIB, f"RSS grew {peak - before:.0f} MiB"
    _counts.add("security:watchers", {"security.stalled_watchers": WATCHERS})
    _counts.figure("apiserver.rss_growth_mib_stalled_watchers", round(peak - before, 1))
    _counts.figure("apiserver.seconds_150_writes_of_64k_stalled", round(elapsed, 2))


_TOKENS = st.sampled_from([b"GET", b"POST", b"PUT", b"PATCH", b"DELETE", b"HEAD", b"\x00",
                           b"G\xffT", b"OPTIONS", b"CONNECT"])
_PATHS = st.sampled_from([CMS.encode(), b"/", b"/api", b"/apis/apps/v1", b"*", b"%", b"/\xff",
                          b"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=x",
                          b"/api/v1/namespaces/default/configmaps?limit=-1&continue=%%%"])


@st.composite
def _raw_requests(draw: st.DrawFn) -> bytes:
    head = draw(_TOKENS) + b" " + draw(_PATHS) + draw(st.binary(max_size=8)) + b" " + \
        draw(st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/9.9", b"", b"HTTP/1.1 extra"]))
    headers = draw(st.lists(st.sampled_from([
        b"Host: x", b"Content-Length: 5", b"Content-Length: -1", b"Content-Length: 99999999",
        b"Transfer-Encoding: chunked", b"Content-Type: application/yaml",
        b"Content-Type: application/apply-patch+yaml", b"Content-Type: \xff",
        b"Authorization: Bearer TOKEN", b"X: " + b"y" * 9000, b"bad header line",
    ]), max_size=6))
    body = draw(st.binary(max_size=64))
    raw = b"\r\n".join([head, *headers, b"Connection: close"]) + b"\r\n\r\n" + body
    return raw


def test_fuzzed_raw_requests_never_crash_the_parser(apiserver: ApiServerProcess) -> None:
    answered: dict[str, int] = {"4xx": 0, "2xx": 0, "closed": 0}

    @settings(max_examples=300 if SOAK else 60, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(raw=_raw_requests())
    def fuzz(raw: bytes) -> None:
        status = exchange(apiserver, raw.replace(b"TOKEN", apiserver.token.encode()), 10)
        assert status < 500 or status == 501, f"{status} for {raw[:120]!r}"
        answered["closed" if status == 0 else f"{status // 100}xx"] = \
            answered.get("closed" if status == 0 else f"{status // 100}xx", 0) + 1

    fuzz()
    _alive(apiserver)
    _counts.add("security:fuzz", {"security.fuzzed_requests": sum(answered.values())})
