"""The differential harness: send one request to both servers, normalize, compare field by field.

``Pair.both(method, path, ...)`` answers ``Answer(status, body)`` per server; ``differences``
lists the paths where the normalized bodies differ. Normalizing drops what legitimately differs
between two servers: uids, timestamps, resourceVersion values, allocated cluster IPs, random name
suffixes (``generateName``) and managedFields.
"""

from __future__ import annotations

import json
import re
import urllib.parse
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import kubernetes.client

_VOLATILE_META = ("uid", "creationTimestamp", "resourceVersion", "managedFields", "selfLink",
                  "deletionTimestamp")
_TIME_KEYS = re.compile(r"(Timestamp|Time|time)$")


@attrs.frozen(kw_only=True)
class Answer:
    """One server's answer: HTTP status and parsed JSON body (None when empty)."""

    status: int
    body: Any


def _raw(client: kubernetes.client.ApiClient, method: str, path: str, *,
         body: Any = None, content_type: str = "application/json",
         query: Mapping[str, str] | None = None) -> tuple[int, str]:
    url = client.configuration.host + path
    if query:
        url += "?" + urllib.parse.urlencode(dict(query))
    headers = {"Accept": "application/json", "Content-Type": content_type,
               "Authorization": client.configuration.get_api_key_with_prefix("authorization")}
    if isinstance(body, (dict, list)) and "json" not in content_type:
        body = json.dumps(body)
    response = client.rest_client.request(method, url, headers=headers, body=body,
                                          _request_timeout=30)
    status, data = response.status, response.read()
    return status, data.decode() if isinstance(data, bytes) else (data or "")


def _request(client: kubernetes.client.ApiClient, method: str, path: str, **kwargs: Any
             ) -> Answer:
    status, text = _raw(client, method, path, **kwargs)
    try:
        body = json.loads(text) if text.strip() else None
    except ValueError:
        body = {"text": text}  # a plain-text answer (e.g. "404 page not found")
    return Answer(status=status, body=body)


def normalize(value: Any, *, key: str = "") -> Any:
    """``value`` without the fields that legitimately differ between servers."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k in _VOLATILE_META or (_TIME_KEYS.search(k) and isinstance(v, str)):
                continue
            if k in ("clusterIP", "clusterIPs") and v not in ("None", ["None"]):
                continue
            if k == "name" and isinstance(value.get("generateName"), str):
                v = value["generateName"] + "<random>"
            if k == "name" and isinstance(v, str) and _ADMISSION_VOLUME.fullmatch(v):
                v = "kube-api-access-<random>"
            if k == "uid" or (k == "continue" and v):
                continue
            out[k] = normalize(v, key=k)
        return out
    if isinstance(value, list):
        return [normalize(v, key=key) for v in value]
    if isinstance(value, str):
        return _scrub(value)
    return value


# The ServiceAccount admission's projected token volume: "kube-api-access-" + 5 random chars.
_ADMISSION_VOLUME = re.compile(r"kube-api-access-[a-z0-9]{5}")
_RV_IN_TEXT = re.compile(r"(resourceVersion|resource version)( of| is)? \"?\d+\"?|\(\d+\)")
_UID_IN_TEXT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _scrub(text: str) -> str:
    return _UID_IN_TEXT.sub("<uid>", _RV_IN_TEXT.sub(r"\1 <rv>", text))


def differences(left: Any, right: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every (path, embedded value, real value) where the two normalized values differ."""
    if isinstance(left, dict) and isinstance(right, dict):
        out: list[tuple[str, Any, Any]] = []
        for key in sorted(set(left) | set(right)):
            out += differences(left.get(key, "<absent>"), right.get(key, "<absent>"),
                               f"{path}.{key}")
        return out
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        out = []
        for index, (a, b) in enumerate(zip(left, right, strict=True)):
            out += differences(a, b, f"{path}[{index}]")
        return out
    return [] if left == right else [(path or ".", left, right)]


class Pair:
    """Both servers' admin clients and one namespace (the same name) on each."""

    def __init__(self, embedded: Any, real: Any) -> None:
        self.servers = {"embedded": embedded, "real": real}
        self.clients = {name: server.api_client() for name, server in self.servers.items()}
        self.namespace = f"conf-{uuid.uuid4().hex[:8]}"

    def close(self) -> None:
        """Delete the namespace on both servers and close the clients."""
        for client in self.clients.values():
            _request(client, "DELETE", f"/api/v1/namespaces/{self.namespace}")
            client.close()

    def both(self, method: str, path: str, *, body: Any = None,
             content_type: str = "application/json",
             query: Mapping[str, str] | None = None) -> dict[str, Answer]:
        """The same request to each server (``{ns}`` in ``path`` is the pair's namespace)."""
        path = path.replace("{ns}", self.namespace)
        return {name: _request(client, method, path, body=body, content_type=content_type,
                               query=query)
                for name, client in self.clients.items()}

    def on(self, server: str, method: str, path: str, **kwargs: Any) -> Answer:
        """One request to one server."""
        path = path.replace("{ns}", self.namespace)
        return _request(self.clients[server], method, path, **kwargs)

    def watch_events(self, server: str, path: str, *, resource_version: str,
                     timeout_seconds: int = 1, label_selector: str | None = None
                     ) -> Iterator[dict[str, Any]]:
        """The events of a watch from ``resource_version`` until the server ends it at
        ``timeoutSeconds`` (an error answer is one event holding the Status)."""
        status, text = _raw(self.clients[server], "GET", path.replace("{ns}", self.namespace),
                            query={"watch": "true", "resourceVersion": resource_version,
                                   "timeoutSeconds": str(timeout_seconds),
                                   **({"labelSelector": label_selector}
                                      if label_selector else {})})
        if status != 200:
            yield {"type": "HTTP", "status": status, "object": json.loads(text)}
            return
        for line in text.splitlines():
            if line.strip():
                yield json.loads(line)


def compare(answers: Mapping[str, Answer]) -> list[tuple[str, Any, Any]]:
    """The differences of status code and normalized body between embedded and real."""
    embedded, real = answers["embedded"], answers["real"]
    diffs = [] if embedded.status == real.status else [("status", embedded.status, real.status)]
    return diffs + differences(normalize(embedded.body), normalize(real.body))
