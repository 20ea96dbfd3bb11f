"""``KubernetesClient``: the ``ClusterClient`` over the official ``kubernetes`` ``ApiClient``.

It borrows only the official client's transport (TLS, bearer token, connection pool) and speaks raw
JSON on the hot path: no model classes are built for responses, and official models handed in at
the edge are converted once with ``ApiClient.sanitize_for_serialization``. Resource paths come from
discovery (group-version resource lists, cached and refreshed when a kind is unknown, so a CRD
created at run time is usable at once). This module is the single boundary where HTTP failures and
``kubernetes.client.ApiException`` become the ``reconciler._base.errors`` tree.

Writes (POST, PUT, PATCH, DELETE with a JSON body) go straight to the official client's urllib3
pool manager (its TLS, proxy, certificate and retry settings), with the URL, headers and
authentication built as the official ``ApiClient.param_serialize`` builds them and the body
encoded once (``orjson`` when installed): the generated client's per-request serialisation and
content-type dispatch cost more than the request itself. Reads and watches go through
``ApiClient.call_api`` (its read retries). The ``kubernetes`` package itself is imported only
when an error is mapped: the caller imported it to build the ``ApiClient``, and importing
``reconciler`` alone does not.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any, Unpack

import attrs
import urllib3

from reconciler._base.decoding import loads as _loads
from reconciler._base.errors import (
    ApiError,
    ClientUsageError,
    GoneError,
    NotFoundError,
    ObjectRef,
    WatchSilentError,
    api_error_from_status,
)
from reconciler._client import transport
from reconciler._client.agents import toolkit_version, user_agent
from reconciler._client.answers import error_from_http, not_served
from reconciler._client.protocol import ListFields, ListOptions, WatchEvent, WatchStream
from reconciler._client.transport import WRITES, api_exception, send_call, send_write

__all__ = [
    "ClientUsageError", "KubernetesClient", "ResourceInfo", "for_operator", "toolkit_version",
    "user_agent",
]

_JSON = "application/json"
_PATCH_TYPES = frozenset({
    "application/strategic-merge-patch+json",
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/apply-patch+yaml",
})


_AUTH_TTL = 1.0
"""Seconds one read of the configuration's bearer token serves requests. Reading it runs the
kubeconfig loader's refresh hook, which re-applies the whole configuration (setting ``host``
rescans the environment for proxies): about a fifth of a small request's client CPU. Tokens
that expire are refreshed by that hook minutes before their expiry, so a second's reuse is safe."""


@attrs.frozen(kw_only=True)
class ResourceInfo:
    """One served resource as discovery describes it (``deployments`` of ``apps/v1``)."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool
    verbs: frozenset[str] = frozenset()
    subresources: frozenset[str] = frozenset()

    def path(
        self,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The REST path of the collection, or of one object (and its subresource)."""
        root = f"/api/{self.api_version}" if "/" not in self.api_version else (
            f"/apis/{self.api_version}"
        )
        parts = [root]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name is not None:
            parts.append(name)
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


def _group_version_path(api_version: str) -> str:
    return f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"


def _parse_resource_list(api_version: str, body: Mapping[str, Any]) -> dict[str, ResourceInfo]:
    """Kind -> resource for one ``APIResourceList`` (subresources folded into their parent)."""
    subresources: dict[str, set[str]] = {}
    mains: list[Mapping[str, Any]] = []
    for res in body.get("resources") or ():
        name = str(res.get("name", ""))
        if "/" in name:
            main, sub = name.split("/", 1)
            subresources.setdefault(main, set()).add(sub)
        else:
            mains.append(res)
    kinds: dict[str, ResourceInfo] = {}
    for res in mains:
        plural = str(res["name"])
        kinds[str(res["kind"])] = ResourceInfo(
            api_version=api_version,
            kind=str(res["kind"]),
            plural=plural,
            namespaced=bool(res.get("namespaced")),
            verbs=frozenset(res.get("verbs") or ()),
            subresources=frozenset(subresources.get(plural, ())),
        )
    return kinds


def _as_dict(api_client: Any, obj: Any) -> dict[str, Any]:
    """A JSON-shaped copy of a dict or of an official model object (the public edge)."""
    if isinstance(obj, Mapping):
        return dict(obj)
    data = api_client.sanitize_for_serialization(obj)
    if not isinstance(data, dict):
        raise ClientUsageError(f"expected a Kubernetes object, got {type(obj).__name__}")
    return data


class KubernetesClient:
    """The ``ClusterClient`` over an official ``ApiClient`` (thread-safe as its pool is);
    discovery is cached per group version, refreshed once on a miss; ``User-Agent:
    optk/<version> (<operator_name>)`` on every request, ``fieldManager`` on writes."""

    def __init__(self, api_client: Any, *, request_timeout: float | None = 60.0,
                 operator_name: str | None = None) -> None:
        self._api, self._timeout = api_client, request_timeout
        self._lock = threading.Lock()
        self._discovery: dict[str, dict[str, ResourceInfo] | None] = {}
        self._auth_cache: tuple[float, Any] = (float("-inf"), None)
        self.operator_name, self.field_manager = operator_name, operator_name or "optk"
        self.user_agent = user_agent(operator_name)

    @property
    def api_client(self) -> Any:
        """The official ``ApiClient`` this client sends through."""
        return self._api

    # -- the one HTTP boundary -------------------------------------------------------------

    def _bearer_auth(self) -> Any:
        """The configuration's bearer-token auth setting, read at most once per ``_AUTH_TTL``."""
        now = time.monotonic()
        until, setting = self._auth_cache
        if now < until:
            return setting
        setting = self._api.configuration.auth_settings().get("BearerToken")
        self._auth_cache = (now + _AUTH_TTL, setting)
        return setting

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str = _JSON,
        ref: ObjectRef | None = None,
        timeout: Any = None,
    ) -> Any:
        """Send one request; return the raw response of a 2xx, raise the error tree else."""
        timeout = timeout if timeout is not None else self._timeout
        try:
            if method in WRITES and body is not None:  # straight to the official pool
                response = send_write(self._api, method, path, query=query, body=body,
                                      content_type=content_type, timeout=timeout,
                                      auth=self._bearer_auth(), user_agent=self.user_agent)
            else:  # through the official ApiClient (its read retries)
                response = send_call(self._api, method, path, query=query, body=body,
                                     content_type=content_type, timeout=timeout,
                                     auth=self._bearer_auth(), user_agent=self.user_agent)
        except urllib3.exceptions.HTTPError as exc:
            raise ApiError(f"{method} {path}: {exc}", code=0, ref=ref) from exc
        except Exception as exc:
            if isinstance(exc, api_exception()):
                raise self._failed(getattr(exc, "status", 0) or 0, getattr(exc, "body", None),
                                   getattr(exc, "headers", None), ref) from exc
            raise
        if not 200 <= response.status <= 299:
            try:
                data = response.read()
            except urllib3.exceptions.HTTPError as exc:  # pragma: no cover - broken connection
                raise ApiError(f"{method} {path}: {exc}", code=response.status, ref=ref) from exc
            raise self._failed(response.status, data, response.headers, ref)
        return response

    def _failed(
        self, code: int, data: Any, headers: Mapping[str, str] | None, ref: ObjectRef | None
    ) -> ApiError:
        error = error_from_http(code, data, headers, ref)
        if ref is not None and error.message == not_served(ref).message:
            with self._lock:  # a kind discovery still listed is gone: read discovery again
                self._discovery.pop(ref.api_version, None)
        return error

    def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = self._send(method, path, **kwargs)
        try:
            data = _loads(response.read())
        except (ValueError, urllib3.exceptions.HTTPError) as exc:
            raise ApiError(f"{method} {path}: unreadable response: {exc}", code=0,
                           ref=kwargs.get("ref")) from exc
        if not isinstance(data, dict):
            raise ApiError(f"{method} {path}: expected a JSON object", code=0,
                           ref=kwargs.get("ref"))
        return data

    # -- discovery ------------------------------------------------------------------------

    def _load_group_version(self, api_version: str) -> dict[str, ResourceInfo] | None:
        try:
            body = self._json("GET", _group_version_path(api_version))
        except NotFoundError:
            kinds = None
        else:
            kinds = _parse_resource_list(api_version, body)
        with self._lock:
            self._discovery[api_version] = kinds
        return kinds

    def resource(self, api_version: str, kind: str) -> ResourceInfo:
        """Discovery's entry for a kind; ``NotFoundError`` when the server does not serve it."""
        cached = self._discovery.get(api_version)  # one atomic read: entries are replaced whole
        if cached is not None and kind in cached:
            return cached[kind]
        kinds = self._load_group_version(api_version)
        if kinds is not None and kind in kinds:
            return kinds[kind]
        raise not_served(ObjectRef(api_version=api_version, kind=kind, name=""))

    def invalidate_discovery(self) -> None:
        """Forget every cached discovery result (the next lookups reload them)."""
        with self._lock:
            self._discovery.clear()

    def is_served(self, api_version: str, kind: str) -> bool:
        """Whether the server currently serves this kind (discovery, refreshed on a miss)."""
        try:
            self.resource(api_version, kind)
        except NotFoundError:
            return False
        return True

    def is_namespaced(self, api_version: str, kind: str) -> bool:
        """Whether objects of this kind live in a namespace; ``NotFoundError`` if not served."""
        return self.resource(api_version, kind).namespaced

    def _object_path(
        self,
        ref: ObjectRef,
        *,
        subresource: str | None = None,
        collection: bool = False,
    ) -> str:
        info = self.resource(ref.api_version, ref.kind)
        if info.namespaced and not ref.namespace:
            raise ClientUsageError(f"{ref}: kind {ref.kind} is namespaced; give a namespace")
        if collection:
            return info.path(namespace=ref.namespace)
        return info.path(namespace=ref.namespace, name=ref.name, subresource=subresource)

    # -- reads ----------------------------------------------------------------------------

    def get(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        """The live object; ``NotFoundError`` when it does not exist."""
        ref = ObjectRef(api_version=api_version, kind=kind, name=name, namespace=namespace)
        return self._json("GET", self._object_path(ref), ref=ref)

    def list(
        self,
        api_version: str,
        kind: str,
        options: ListOptions | None = None,
        *,
        namespace: str | None = None,
        **fields: Unpack[ListFields],
    ) -> dict[str, Any]:
        """The list body; items carry ``apiVersion`` and ``kind`` (the server omits them)."""
        opts = ListOptions.of(options, fields)
        info = self.resource(api_version, kind)
        ref = ObjectRef(api_version=api_version, kind=kind, name="", namespace=namespace)
        query = _list_query(opts, watch=False)
        body = self._json("GET", info.path(namespace=namespace), query=query, ref=ref)
        body["items"] = [
            {"apiVersion": api_version, "kind": kind, **item} for item in body.get("items") or ()
        ]
        return body

    def watch(
        self,
        api_version: str,
        kind: str,
        options: ListOptions | None = None,
        *,
        namespace: str | None = None,
        **fields: Unpack[ListFields],
    ) -> Iterator[WatchEvent]:
        """Stream raw watch events, one JSON line each, until the server ends the stream.

        ``inactivity_timeout`` bounds the wait for the next line (a dead stream raises
        ``WatchSilentError``, an ``ApiError`` with code 0). A 410 as HTTP status or as an
        ``ERROR`` event raises ``GoneError``; other ``ERROR`` events raise the matching error.
        The stream is a ``WatchStream``: ``close()`` from another thread shuts its socket, so
        the blocked read returns at once and the connection is closed, not pooled.
        """
        opts = ListOptions.of(options, fields)
        info = self.resource(api_version, kind)
        ref = ObjectRef(api_version=api_version, kind=kind, name="", namespace=namespace)
        response = self._send(
            "GET", info.path(namespace=namespace), query=_list_query(opts, watch=True), ref=ref,
            timeout=(self._timeout, opts.inactivity_timeout),
        )
        raw = response.response
        events = self._stream_events(raw, api_version, kind, ref, opts.inactivity_timeout or 0.0)
        return WatchStream(events, lambda: transport.shut_stream(raw))

    def _stream_events(
        self, raw: Any, api_version: str, kind: str, ref: ObjectRef, silence: float,
    ) -> Iterator[WatchEvent]:
        try:
            with contextlib.closing(transport.stream_lines(raw)) as lines:
                for line in lines:
                    yield self._event(line, api_version, kind, ref)
        except urllib3.exceptions.ReadTimeoutError as exc:
            raise WatchSilentError(f"watch of {kind}.{api_version} sent nothing for {silence:g}s",
                                   silence=silence, ref=ref) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise ApiError(f"watch of {kind}.{api_version} broke: {exc}", code=0, ref=ref) from exc

    @staticmethod
    def _event(line: bytes, api_version: str, kind: str, ref: ObjectRef) -> WatchEvent:
        try:
            event: dict[str, Any] = _loads(line)
        except ValueError as exc:
            raise ApiError(f"watch sent a line that is not JSON: {line[:80]!r}", code=0,
                           ref=ref) from exc
        obj = event.get("object")
        if event.get("type") == "ERROR":
            status = obj if isinstance(obj, Mapping) else {}
            code = int(status.get("code") or 500)
            error = api_error_from_status(code, status, ref=ref)
            if code == 410 and not isinstance(error, GoneError):  # pragma: no cover - defensive
                error = GoneError(error.message, status=status, ref=ref)
            raise error
        if isinstance(obj, dict) and event.get("type") != "BOOKMARK":
            obj.setdefault("apiVersion", api_version)
            obj.setdefault("kind", kind)
        return event

    # -- writes ---------------------------------------------------------------------------

    def create(self, obj: Any, *, dry_run: bool = False) -> dict[str, Any]:
        """Create ``obj`` (a dict or an official model); ``AlreadyExistsError`` when taken."""
        body = _as_dict(self._api, obj)
        ref = ObjectRef.of(body)
        return self._json("POST", self._object_path(ref, collection=True), body=body,
                          query=_writes(dry_run, self.field_manager), ref=ref)

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Any,
        *,
        patch_type: str,
        namespace: str | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
        force: bool = False,
    ) -> dict[str, Any]:
        """Patch with the given content type (strategic merge, merge, JSON patch or apply)."""
        if patch_type not in _PATCH_TYPES:
            raise ClientUsageError(
                f"unknown patch type {patch_type!r}; use one of {sorted(_PATCH_TYPES)}"
            )
        ref = ObjectRef(api_version=api_version, kind=kind, name=name, namespace=namespace)
        body = patch if isinstance(patch, list) else _as_dict(self._api, patch)
        return self._json(
            "PATCH", self._object_path(ref, subresource=subresource), body=body,
            content_type=patch_type, ref=ref,
            query=_writes(dry_run, self.field_manager) + ([("force", "true")] if force else []),
        )

    def replace(
        self, obj: Any, *, subresource: str | None = None, dry_run: bool = False
    ) -> dict[str, Any]:
        """PUT the whole object (its ``metadata.resourceVersion`` is the precondition)."""
        body = _as_dict(self._api, obj)
        ref = ObjectRef.of(body)
        return self._json(
            "PUT", self._object_path(ref, subresource=subresource), body=body,
            query=_writes(dry_run, self.field_manager), ref=ref,
        )

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: str | None = None,
        preconditions: Mapping[str, str] | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Delete; returns the object (finalizers pending) or the ``Status`` body."""
        ref = ObjectRef(api_version=api_version, kind=kind, name=name, namespace=namespace)
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if preconditions:
            options["preconditions"] = dict(preconditions)
        if dry_run:
            options["dryRun"] = ["All"]
        return self._json("DELETE", self._object_path(ref), body=options, ref=ref)


def for_operator(client: KubernetesClient, operator_name: str) -> KubernetesClient:
    """``client`` (same transport, same discovery cache) speaking as ``operator_name``."""
    named = KubernetesClient(client.api_client, request_timeout=client._timeout,
                             operator_name=operator_name)
    named._lock = client._lock
    named._discovery = client._discovery
    return named


def _writes(dry_run: bool, manager: str) -> list[tuple[str, Any]]:
    return _query(dryRun=_dry(dry_run), fieldManager=manager)


def _dry(dry_run: bool) -> str | None:
    return "All" if dry_run else None


def _list_query(options: ListOptions, *, watch: bool) -> list[tuple[str, Any]]:
    """The URL query of a list (selectors, paging) or a watch (selectors, resume, bounds)."""
    if not watch:
        return _query(
            labelSelector=options.label_selector, fieldSelector=options.field_selector,
            limit=options.limit, **{"continue": options.continue_token},
        )
    return _query(
        watch="true", labelSelector=options.label_selector,
        fieldSelector=options.field_selector, resourceVersion=options.resource_version,
        timeoutSeconds=options.timeout_seconds,
        allowWatchBookmarks="true" if options.allow_bookmarks else None,
    )


def _query(**params: Any) -> list[tuple[str, Any]]:
    return [(k, v) for k, v in params.items() if v is not None]

