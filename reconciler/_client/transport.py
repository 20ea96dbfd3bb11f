"""How ``KubernetesClient`` sends a request over the official client's configuration.

Writes (POST, PUT, PATCH, DELETE with a JSON body) go straight to the official client's urllib3
pool manager (its TLS, proxy, certificate and retry settings), with the URL, headers and
authentication built as ``ApiClient.param_serialize`` builds them and the body encoded as its
REST client encodes it (the same bytes): the generated client's per-request serialisation and
content-type dispatch cost more than the request itself (20-28 % of a create's client CPU).
Reads and watches go through ``ApiClient.call_api`` (its read retries). Both return a response
with ``status``, ``headers``, ``read()`` and the raw urllib3 ``response`` (for streaming); what a
failure becomes is ``reconciler._client.kubernetes``'s decision (the one error boundary).

A watch's raw response is read line by line (``stream_lines``); ``shut_stream`` ends it from
another thread (``Informer.stop``): the socket is shut for reading, the blocked read returns,
and a stream not read to its end has its connection closed, never put back in the pool.
"""

from __future__ import annotations

import contextlib
import functools
import json
import socket
from collections.abc import Generator
from typing import Any
from urllib.parse import quote

import urllib3

__all__ = ["WRITES", "api_exception", "send_call", "send_write", "shut_stream", "stream_lines"]

_JSON = "application/json"
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
"""The methods sent by ``send_write`` when they carry a body."""


def api_exception() -> type[Exception]:
    """The official client's ``ApiException`` (imported on first use, not with ``reconciler``)."""
    from kubernetes.client.exceptions import ApiException

    exception: type[Exception] = ApiException
    return exception


def _url_query(query: list[tuple[str, Any]]) -> str:
    """``k=v&...`` as ``ApiClient.parameters_to_url_query`` encodes scalar parameters."""
    return "&".join(
        f"{key}={quote(str(value).lower() if isinstance(value, bool) else str(value))}"
        for key, value in query
    )


def send_call(
    api: Any, method: str, path: str, *, query: list[tuple[str, Any]] | None, body: Any,
    content_type: str, timeout: Any, auth: Any, user_agent: str,
) -> Any:
    """Through the official ``ApiClient.call_api`` (reads and watches)."""
    headers = {"Accept": _JSON}
    if body is not None:
        headers["Content-Type"] = content_type
    method, url, headers, _, _ = api.param_serialize(
        method=method,
        resource_path=path,
        query_params=query or None,
        header_params=headers,
        auth_settings=["BearerToken"],
        _request_auth=auth,
    )
    headers["User-Agent"] = user_agent  # the ApiClient's default would win above
    return api.call_api(method, url, header_params=headers, body=body,
                          _request_timeout=timeout)


def send_write(
    api: Any, method: str, path: str, *, query: list[tuple[str, Any]] | None, body: Any,
    content_type: str, timeout: Any, auth: Any, user_agent: str,
) -> Any:
    """A write with a JSON body, straight to the official client's pool manager: the URL,
    headers and authentication as ``param_serialize`` makes them, the body as its REST client
    encodes a JSON body."""
    if content_type == "application/json-patch+json" and not isinstance(body, list):
        content_type = "application/strategic-merge-patch+json"  # as the REST client does
    headers: dict[str, str] = {"Accept": _JSON, "Content-Type": content_type}
    headers.update(api.default_headers)
    if api.cookie:
        headers["Cookie"] = api.cookie
    query = list(query or ())
    if auth:
        if auth["in"] == "header":
            headers[auth["key"]] = auth["value"]
        elif auth["in"] == "query":  # pragma: no cover - not a kubeconfig setting
            query.append((auth["key"], auth["value"]))
        elif auth["in"] == "cookie":  # pragma: no cover - not a kubeconfig setting
            cookie = f"{auth['key']}={quote(str(auth['value']))}"
            headers["Cookie"] = f"{headers['Cookie']}; {cookie}" if "Cookie" in headers \
                else cookie
    headers["User-Agent"] = user_agent
    target = path + ("?" + _url_query(query) if query else "")
    bound: urllib3.Timeout | None
    if isinstance(timeout, tuple):
        bound = urllib3.Timeout(connect=timeout[0], read=timeout[1])
    else:
        bound = urllib3.Timeout(total=timeout) if timeout else None
    data = json.dumps(body)
    manager = api.rest_client.pool_manager
    host = api.configuration.host
    if type(manager) is not urllib3.PoolManager:  # a proxy: its own URL handling
        raw = manager.request(method, host + target, body=data, headers=headers,
                              timeout=bound, preload_content=False)
        return _Response(raw)
    # What PoolManager.urlopen does for a URL of a known host, without parsing it each time.
    # The prefix of ``host`` (a path the API is served under) is part of every target.
    url = _parsed_host(host)
    pool = manager.connection_from_host(url.host, port=url.port, scheme=url.scheme)
    raw = pool.urlopen(method, (url.path or "").rstrip("/") + target, body=data,
                       headers=headers, timeout=bound, preload_content=False,
                       assert_same_host=False, redirect=False)
    return _Response(raw)


@functools.lru_cache(maxsize=16)
def _parsed_host(host: str) -> Any:
    """``configuration.host`` parsed as urllib3 parses a request's URL (cached per host)."""
    return urllib3.util.parse_url(host)


class _Response:
    """A raw urllib3 response read as the official ``RESTResponse`` is (``read`` returns the
    whole body, once read it is kept)."""

    __slots__ = ("_data", "headers", "response", "status")

    def __init__(self, response: Any) -> None:
        self.response, self.status, self.headers = response, response.status, response.headers
        self._data: bytes | None = None

    def read(self) -> bytes:
        """The whole body."""
        if self._data is None:
            self._data = self.response.data
        return self._data




def stream_lines(raw: Any) -> Generator[bytes]:
    """The non-empty lines of a streamed urllib3 response (a watch), as they arrive. A stream
    not read to its end (broken, timed out, shut, abandoned) has its connection closed."""
    buffer, ended = b"", False
    try:
        for chunk in raw.stream(amt=None, decode_content=False):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    yield line
        if buffer.strip():
            yield buffer
        ended = True
    finally:
        if not ended:
            raw.close()
        raw.release_conn()


def shut_stream(raw: Any) -> None:
    """End a streamed response from another thread: its socket is shut for reading, so a read
    blocked on it returns (the stream then ends as broken and its connection is closed)."""
    try:
        raw.shutdown()  # urllib3 >= 2.3
    except (AttributeError, ValueError, RuntimeError, OSError):
        sock = getattr(getattr(raw, "_connection", None), "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RD)
