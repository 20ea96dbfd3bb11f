"""Helpers of the embedded-server tests: request bodies and a raw HTTPS client."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import urllib3

from reconciler.embedded import EmbeddedApiServer


class RawClient:
    """Plain HTTPS requests with the bearer token, for what typed clients cannot send."""

    def __init__(self, server: EmbeddedApiServer) -> None:
        self.server = server
        self.pool = urllib3.PoolManager(ca_certs=str(server.ca_cert_path), retries=False)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        raw: bytes | None = None,
        content_type: str | None = "application/json",
        headers: dict[str, str] | None = None,
        token: str | None = None,
        preload: bool = True,
    ) -> urllib3.BaseHTTPResponse:
        """Send one request; ``body`` is JSON-encoded unless ``raw`` is given."""
        all_headers = {"Authorization": f"Bearer {token or self.server.token}"}
        if content_type is not None and (body is not None or raw is not None):
            all_headers["Content-Type"] = content_type
        all_headers.update(headers or {})
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None
                                            else None)
        return self.pool.request(method, self.server.url + path, body=data,
                                 headers=all_headers, preload_content=preload)

    def json(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        """Status code and decoded JSON body."""
        response = self.request(method, path, **kwargs)
        try:
            return response.status, json.loads(response.data)
        except ValueError:
            return response.status, response.data.decode()


def configmap(name: str, **data: str) -> dict[str, Any]:
    """A ConfigMap body."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def deployment(name: str, *, replicas: int = 1) -> dict[str, Any]:
    """A minimal valid Deployment body."""
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}},
        },
    }


def wait_until(condition: Callable[[], bool], *, timeout: float = 5.0) -> None:
    """Poll ``condition`` until it holds; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(0.02)
