"""A small asyncio HTTP client for benchmark harnesses: reach a cluster from its kubeconfig.

Harnesses drive the server (create parents, make drift, watch children) without going through
either operator's client, and they count their own requests by Kubernetes verb, so a benchmark
can subtract them from the server's totals (``/debug/optk/requests`` of the embedded server)
and charge each operator only for its own calls. Bearer-token kubeconfigs only (what
``optk apiserver --kubeconfig`` writes). No retries: a failed request raises ``HarnessError``.
"""

from __future__ import annotations

import base64
import json
import ssl
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import yaml

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class HarnessError(RuntimeError):
    """A harness request failed: the method, path, status and the server's message."""

    def __init__(self, *, method: str, path: str, status: int, message: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {message[:300]}")
        self.method, self.path, self.status = method, path, status


class Cluster:
    """An aiohttp session to the kubeconfig's cluster; ``own`` counts this side's requests."""

    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        self.url = str(cluster["server"]).rstrip("/")
        token = str(config["users"][0]["user"]["token"])
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        self._ssl = ssl.create_default_context(cadata=ca)
        self._headers = {"Authorization": f"Bearer {token}"}
        self._session: aiohttp.ClientSession | None = None
        self.own: Counter[str] = Counter()

    async def __aenter__(self) -> Cluster:
        self._session = aiohttp.ClientSession(
            headers=self._headers,
            connector=aiohttp.TCPConnector(ssl=self._ssl, limit=16),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        )
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        """The open session (inside ``async with``)."""
        if self._session is None:
            raise RuntimeError("use Cluster inside 'async with'")
        return self._session

    async def request(
        self, method: str, path: str, *, verb: str, body: Any = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        """One request; ``verb`` is the Kubernetes verb it is counted as (``None``: uncounted)."""
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type} if data is not None else {}
        if verb:
            self.own[verb] += 1
        async with self.session.request(
            method, self.url + path, data=data, headers=headers,
            timeout=aiohttp.ClientTimeout(total=60),
        ) as response:
            text = await response.text()
            if response.status >= 400:
                raise HarnessError(method=method, path=path, status=response.status, message=text)
            result: dict[str, Any] = json.loads(text) if text else {}
            return result

    async def server_counts(self) -> dict[str, Any]:
        """The embedded server's request accounting (not counted as a Kubernetes request)."""
        return await self.request("GET", "/debug/optk/requests", verb="")

    async def watch(
        self, path: str, resource_version: str
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """``(type, object)`` events of a watch from ``resource_version``, until cancelled."""
        self.own["watch"] += 1
        url = f"{self.url}{path}?watch=1&resourceVersion={resource_version}"
        async with self.session.get(url, timeout=aiohttp.ClientTimeout(total=None)) as response:
            if response.status >= 400:
                raise HarnessError(method="WATCH", path=path, status=response.status,
                                   message=await response.text())
            async for line in response.content:
                if line.strip():
                    event = json.loads(line)
                    yield str(event["type"]), event["object"]


def collection_path(api_version: str, plural: str, namespace: str | None) -> str:
    """The REST path of a collection: ``/apis/apps/v1/namespaces/ns/deployments``."""
    root = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    return f"{root}/namespaces/{namespace}/{plural}" if namespace else f"{root}/{plural}"


def object_path(api_version: str, plural: str, namespace: str | None, name: str) -> str:
    """The REST path of one object."""
    return f"{collection_path(api_version, plural, namespace)}/{name}"


def verb_totals(counts: Mapping[str, Any]) -> dict[str, int]:
    """``byVerb`` of the server's accounting as plain ints."""
    return {str(k): int(v) for k, v in dict(counts.get("byVerb") or {}).items()}
