"""The HTTP face of the embedded server: an aiohttp application speaking the Kubernetes REST API.

One catch-all route parses Kubernetes paths (``/api/v1/namespaces/<ns>/<plural>/<name>/<sub>``
and the ``/apis/<group>/<version>/...`` equivalents), checks the bearer token, body size and
content type, applies injected faults, dispatches to ``Operations`` (or ``_watching`` for watches,
``_discovery`` and ``_openapi`` for the non-resource endpoints) and counts the request. Every
failure is answered with the ``Status`` body a real server sends; no request can crash the
server. Bodies are JSON (YAML accepted on writes); protobuf ``Accept`` headers get JSON, as a
client falls back. ``as=Table`` requests (kubectl get) get server-side tables.

Reading the request (path, bounded body, list query, delete options) is ``_requests``; this
module routes, answers and streams. Bodies are bounded before anything trusts them: over
``MAX_BODY_BYTES`` answers 413, a YAML
alias bomb 400 (``_encoding.load_yaml``; large YAML is decoded off the event loop), nesting
deeper than ``MAX_DEPTH`` 422. A client that disconnects mid-request is neither an error nor
counted: its handler just ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from reconciler.embedded import _discovery, _openapi
from reconciler.embedded import _tables as tables
from reconciler.embedded._accounting import RequestAccounting
from reconciler.embedded._bodies import check_ranges, decode_body
from reconciler.embedded._encoding import MAX_DEPTH, EncodeCache, encode
from reconciler.embedded._faults import FaultInjector
from reconciler.embedded._kinds import KindRegistry, ResourceType
from reconciler.embedded._offloading import Offloader
from reconciler.embedded._operations import Operations
from reconciler.embedded._patching import (
    APPLY_PATCH,
    MERGE_PATCH,
    PATCH_TYPES,
    STRATEGIC_MERGE_PATCH,
)
from reconciler.embedded._requests import (
    MAX_BODY_BYTES,
    NOT_FOUND_TEXT,
    WRITE_TYPES,
    ClientGoneError,
    ResourcePath,
    apply_configuration_of,
    content_type,
    delete_options,
    field_manager_of,
    is_table_request,
    list_query,
    lookup,
    parse_resource_path,
    read_body,
)
from reconciler.embedded._statuses import (
    ApiStatusError,
    bad_request,
    invalid,
    method_not_allowed,
    status_body,
)
from reconciler.embedded._stored_objects import CRDS, Target, warning_header
from reconciler.embedded._watching import WatchBudget, WatchRequest, serve_watch

__all__ = ["MAX_BODY_BYTES", "ApiApplication", "ResourcePath"]

log = logging.getLogger("reconciler.embedded")


_JSON = "application/json"

_COUNTED = web.RequestKey("optk.counted", bool)
"""Request key: this request was already accounted (a watch, when its stream started)."""

_TRUE = ("true", "1")


def _json_response(body: Any, *, status: int = 200,
                   headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(
        body=encode(body),
        status=status, content_type=_JSON, headers=headers,
    )


def _afresh(writing: dict[str, Any]) -> dict[str, Any]:
    """A write's options for one attempt (what an earlier attempt warned dropped)."""
    writing["warnings"].clear()
    return writing


def _aggregated_version(request: web.Request) -> str | None:
    """The aggregated discovery version the client accepts first (``v2``/``v2beta1``), if any."""
    for media in request.headers.get("Accept", "").split(","):
        params = dict(
            part.strip().split("=", 1) for part in media.split(";")[1:] if "=" in part
        )
        if (params.get("g") == "apidiscovery.k8s.io"
                and params.get("as") == "APIGroupDiscoveryList"
                and params.get("v") in ("v2", "v2beta1")):
            return params["v"]
    return None


def _verb(method: str, path: ResourcePath | None, *, watch: bool) -> str:
    if path is None:
        return method.lower()
    if method == "GET":
        if watch:
            return "watch"
        return "get" if path.name else "list"
    return {
        "POST": "create", "PUT": "update", "PATCH": "patch",
        "DELETE": "delete" if path.name else "deletecollection",
    }.get(method, method.lower())


def non_resource_response(
    request: web.Request, *, registry: KindRegistry, address: str,
    debug_requests: Callable[[], dict[str, Any]], crds: _openapi.CustomResourceDefinitions,
) -> web.Response:
    """The answer to a path that names no resource: ``/version``, discovery, OpenAPI, health
    and the request counts (``/debug/optk/requests``); 404 for anything else."""
    if request.method != "GET":
        raise method_not_allowed()
    p = request.path.rstrip("/") or "/"
    segments = [s for s in p.split("/") if s]
    body: Any = None
    if p == "/version":
        body = _discovery.version_info()
    elif p in ("/api", "/apis") and (aggregated := _aggregated_version(request)):
        body = _discovery.aggregated_discovery(
            registry, core=p == "/api", api_version=f"apidiscovery.k8s.io/{aggregated}"
        )
        return web.Response(
            body=encode(body),
            headers={"Content-Type": f"application/json;g=apidiscovery.k8s.io;"
                                     f"v={aggregated};as=APIGroupDiscoveryList"},
        )
    elif p == "/api":
        body = _discovery.api_versions(address)
    elif p == "/apis":
        body = _discovery.api_group_list(registry)
    elif p in ("/healthz", "/livez", "/readyz"):
        return web.Response(text="ok", content_type="text/plain")
    elif p == "/debug/optk/requests":
        body = debug_requests()
    elif p == "/api/v1":
        body = _discovery.resource_list(registry, group="", version="v1")
    elif len(segments) == 2 and segments[0] == "apis":
        body = _discovery.api_group(registry, segments[1])
    elif len(segments) == 3 and segments[0] == "apis":
        body = _discovery.resource_list(registry, group=segments[1], version=segments[2])
    elif p == "/openapi/v2":
        body = _openapi.openapi_v2(registry, crds)
    elif p == "/openapi/v3":
        body = _openapi.openapi_v3_index(registry, crds)
    elif p.startswith("/openapi/v3/"):
        body = _openapi.openapi_v3_document(registry, crds, p[len("/openapi/v3/"):])
    if body is None:
        raise ApiStatusError(404, NOT_FOUND_TEXT)
    return _json_response(body)


def _table(
    ops: Operations, rt: ResourceType, items: list[Mapping[str, Any]], *,
    metadata: Mapping[str, Any], include: str, with_columns: bool = True,
) -> dict[str, Any]:
    """``items`` as the server-side table of ``rt`` (a custom resource's printer columns are
    read from its CRD)."""
    printer_columns = None
    if rt.is_custom:
        crd = ops.storage.get(CRDS, namespace="", name=f"{rt.plural}.{rt.group}") or {}
        for version in (crd.get("spec") or {}).get("versions") or ():
            if version.get("name") == rt.version:
                printer_columns = version.get("additionalPrinterColumns")
    return tables.table(rt.kind, items, api_version=rt.api_version, metadata=metadata,
                        include_object=include, with_columns=with_columns,
                        printer_columns=printer_columns)


async def _scale(
    ops: Operations, run: Callable[..., Awaitable[Any]], request: web.Request, target: Target,
    *, verb: str, dry_run: bool,
) -> web.StreamResponse:
    """The ``/scale`` subresource (through ``run``: a custom resource's may call its CRD's
    conversion webhook)."""
    if verb == "get":
        return _json_response(await run(lambda: ops.get_scale(target)))
    if verb == "update":
        raw = await read_body(request, allowed=WRITE_TYPES)
        body = await decode_body(raw, content_type=content_type(request))
        return _json_response(await run(lambda: ops.update_scale(target, body, dry_run=dry_run)))
    if verb == "patch":
        raw = await read_body(request, allowed=PATCH_TYPES)
        return _json_response(await run(lambda: ops.patch_scale(
            target, raw, content_type=content_type(request), dry_run=dry_run)))
    raise method_not_allowed()


_DEFAULT_BUDGET = WatchBudget()


class ApiApplication:
    """Builds the aiohttp application over one ``Operations`` and answers its requests."""

    def __init__(
        self,
        ops: Operations,
        *,
        token: str,
        accounting: RequestAccounting,
        faults: FaultInjector,
        address: Callable[[], str],
        bookmark_interval: float = 60.0,
        watch_budget: WatchBudget = _DEFAULT_BUDGET,
    ) -> None:
        self.ops = ops
        self.offloader = Offloader(ops.storage.lock)  # requests that call webhooks
        self.watch_budget = watch_budget
        self.token = token
        self.accounting = accounting
        self.faults = faults
        self.address = address
        self.bookmark_interval = bookmark_interval
        self._expected_auth = f"Bearer {token}".encode()
        self._cache = EncodeCache()
        self.active_watches = 0
        self._watch_tasks: set[asyncio.Task[Any]] = set()

    def make_app(self) -> web.Application:
        """The aiohttp application (one catch-all route)."""
        self.offloader.start()  # on the server's event loop
        app = web.Application(client_max_size=MAX_BODY_BYTES + 1)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    # -- entry ----------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Authenticate, route, answer and count one request."""
        path = parse_resource_path(request.path)
        watch = request.query.get("watch", "").lower() in _TRUE
        verb = _verb(request.method, path, watch=watch)
        resource = self._resource_label(path)
        code = 500
        try:
            response = await self._answer(request, path, verb=verb, resource=resource)
            code = response.status
            return response
        except ApiStatusError as exc:
            code = exc.code
            return self._error_response(exc)
        except asyncio.CancelledError:
            # the client went away (aiohttp cancels the handler of a closed connection):
            # nothing was answered, so nothing is counted or logged
            request[_COUNTED] = True
            raise
        except ClientGoneError:
            # its body ended early: nothing to answer (a raised ConnectionError would be
            # logged by aiohttp as an internal error), nothing counted
            request[_COUNTED] = True
            return web.Response(status=499, text="client closed request")
        except RecursionError:
            code = 422
            return self._error_response(invalid(None, "", causes=[{
                "reason": "FieldValueInvalid", "field": "",
                "message": f"Invalid value: nesting exceeds the maximum depth {MAX_DEPTH}",
            }]))
        except Exception:
            log.exception("embedded apiserver: internal error on %s %s", request.method,
                          request.path)
            code = 500
            return _json_response(
                status_body(500, "InternalError", message="Internal error occurred: see server log",
                            details={}),
                status=500,
            )
        finally:
            if path is not None and not request.get(_COUNTED):
                self.accounting.record(verb=verb, resource=resource, code=code,
                                       namespace=path.namespace, name=path.name,
                                       user_agent=request.headers.get("User-Agent"))

    def _error_response(self, exc: ApiStatusError) -> web.Response:
        if isinstance(exc.body, str):
            return web.Response(text=exc.body, status=exc.code, content_type="text/plain",
                                headers=exc.headers)
        return _json_response(exc.body, status=exc.code, headers=exc.headers)

    def _resource_label(self, path: ResourcePath | None) -> str:
        if path is None:
            return ""
        label = f"{path.plural}.{path.group}" if path.group else path.plural
        return f"{label}/{path.subresource}" if path.subresource else label

    def _authenticated(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "").encode()
        return hmac.compare_digest(header, self._expected_auth)

    async def _answer(
        self, request: web.Request, path: ResourcePath | None, *, verb: str, resource: str
    ) -> web.StreamResponse:
        if not self._authenticated(request):
            raise ApiStatusError(401, status_body(401, "Unauthorized", message="Unauthorized"))
        if path is None:
            return non_resource_response(
                request, registry=self.ops.registry, address=self.address(),
                crds=lambda: self.ops.storage.items(CRDS),
                debug_requests=lambda: {
                    **self.accounting.as_json(), "activeWatches": self.active_watches,
                },
            )
        decision = self.faults.decide(verb, resource)
        if decision.delay:
            await asyncio.sleep(decision.delay)
        if decision.error_code is not None:
            code = decision.error_code
            headers = {"Retry-After": str(decision.retry_after)} if decision.retry_after else {}
            reason, message = {
                403: ("Forbidden", f'{resource} is forbidden: User "optk" cannot {verb} '
                                   f'resource "{resource.split(".", 1)[0]}": injected fault'),
                429: ("TooManyRequests", "Too many requests, please try again later."),
                503: ("ServiceUnavailable", "the server is currently unable to handle the "
                                            "request"),
            }.get(code, ("InternalError", "Internal error occurred: injected fault"))
            details: dict[str, Any] = {}
            if decision.retry_after:
                details["retryAfterSeconds"] = decision.retry_after
            raise ApiStatusError(code, status_body(code, reason, message=message, details=details),
                                 headers=headers)
        response = await self._resource(request, path, verb=verb)
        if decision.lose and request.transport is not None:
            # done, then lost: the connection closes before any byte of the answer
            request.transport.abort()
        return response

    # -- resources ------------------------------------------------------------------------

    async def _resource(
        self, request: web.Request, path: ResourcePath, *, verb: str
    ) -> web.StreamResponse:
        rt = lookup(self.ops.registry, path)
        ops = self.ops
        namespace = path.namespace or ""
        dry_run = "All" in request.query.getall("dryRun", [])
        include = request.query.get("includeObject", "Metadata")
        table = is_table_request(request)
        if verb not in rt.verbs and path.subresource is None:
            raise method_not_allowed()
        if path.subresource == "scale":
            return await _scale(ops, self.offloader.run, request, self._target(rt, path),
                                verb=verb, dry_run=dry_run)
        run = self.offloader.run  # on a worker when a webhook is called (_offloading)
        if verb == "get":
            obj = await run(lambda: ops.get(self._target(rt, path)))
            if table:
                return _json_response(_table(self.ops, rt, [obj], metadata={}, include=include))
            return web.Response(body=self._cache.encode(obj), content_type=_JSON)
        if verb == "list":
            query = list_query(request, rt)
            body = await run(lambda: ops.list(rt, namespace=path.namespace, query=query))
            if table:
                return _json_response(_table(
                    ops, rt, body["items"], metadata=body["metadata"], include=include
                ))
            return _json_response(body)
        if verb == "watch":
            return await self._watch(request, rt, path=path,
                                     table_include=include if table else None)
        warnings: list[str] = []  # fieldValidation=Warn, answered in a Warning header
        writing: dict[str, Any] = {"field_validation": request.query.get("fieldValidation"),
                                   "warnings": warnings, "field_manager": field_manager_of(request)}
        if verb == "create":
            if path.name is not None:
                raise method_not_allowed()
            raw = await read_body(request, allowed=WRITE_TYPES)
            decoded = await decode_body(raw, content_type=content_type(request), rt=rt)
            check_ranges(rt, decoded)
            obj = await run(lambda: ops.create(rt, decoded, namespace=namespace, dry_run=dry_run,
                                               **_afresh(writing)))
            return await self._written(rt, obj, status=201, dry_run=dry_run, warnings=warnings)
        if verb == "update":
            raw = await read_body(request, allowed=WRITE_TYPES)
            decoded = await decode_body(raw, content_type=content_type(request), rt=rt)
            check_ranges(rt, decoded)
            obj = await run(lambda: ops.update(
                self._target(rt, path), decoded, subresource=path.subresource,
                dry_run=dry_run, **_afresh(writing)))
            return await self._written(rt, obj, status=200, dry_run=dry_run, warnings=warnings)
        if verb == "patch":
            raw = await read_body(request, allowed=PATCH_TYPES)
            if content_type(request) == APPLY_PATCH and path.subresource is None:
                applied: Any = raw
                if request.query.get("fieldManager"):  # else 422 before decoding, as real
                    applied = apply_configuration_of(await decode_body(
                        raw, content_type=APPLY_PATCH, rt=rt))
                    check_ranges(rt, applied)
                code, obj = await run(lambda: ops.apply(
                    self._target(rt, path), applied,
                    field_manager=request.query.get("fieldManager"),
                    force=request.query.get("force", "") in _TRUE, dry_run=dry_run))
                return await self._written(rt, obj, status=code, dry_run=dry_run)
            if content_type(request) in (MERGE_PATCH, STRATEGIC_MERGE_PATCH):
                with contextlib.suppress(ValueError, RecursionError):
                    check_ranges(rt, json.loads(raw), patch=raw)
            obj = await run(lambda: ops.patch(
                self._target(rt, path), raw, content_type=content_type(request),
                subresource=path.subresource, dry_run=dry_run, **_afresh(writing)))
            return await self._written(rt, obj, status=200, dry_run=dry_run, warnings=warnings)
        if verb in ("delete", "deletecollection"):
            options = await delete_options(request)
            dry_run = dry_run or "All" in (options.get("dryRun") or ())
            if verb == "delete":
                return _json_response(await run(lambda: ops.delete(
                    self._target(rt, path), options=options, dry_run=dry_run)))
            query = list_query(request, rt)  # with webhooks configured, all on a worker:
            return _json_response(await run(lambda: ops.delete_collection(
                rt, namespace=path.namespace, query=query, options=options, dry_run=dry_run,
            ), offload=ops.admission.configured()))
        raise method_not_allowed()

    async def _written(self, rt: ResourceType, obj: Mapping[str, Any], *, status: int,
                       dry_run: bool, warnings: list[str] | None = None) -> web.Response:
        """The response to a write, ``obj`` served at ``rt``: a committed object is stored and
        never changes, so its encoding is shared with the watch events that carry it (encoded
        once for both)."""
        served = await self.offloader.run(lambda: self.ops.served(obj, rt))
        body = encode(served) if dry_run else self._cache.encode(served)
        return web.Response(body=body, status=status, content_type=_JSON,
                            headers=warning_header(warnings or []))

    @staticmethod
    def _target(rt: ResourceType, path: ResourcePath) -> Target:
        return Target(rt=rt, namespace=path.namespace or "", name=str(path.name))

    async def _watch(
        self, request: web.Request, rt: ResourceType, *, path: ResourcePath,
        table_include: str | None,
    ) -> web.StreamResponse:
        query = list_query(request, rt)
        rv_text = query.resource_version
        if rv_text and not rv_text.isdigit():
            raise bad_request(f"invalid resource version: {rv_text}")
        timeout_text = request.query.get("timeoutSeconds")
        try:
            timeout = float(timeout_text) if timeout_text else None
        except ValueError as exc:
            raise bad_request(f"invalid timeoutSeconds: {timeout_text}") from exc
        wrap = None
        if table_include is not None:
            include = table_include

            def wrap(obj: Mapping[str, Any], first: bool) -> Mapping[str, Any]:
                return _table(self.ops, rt, [obj], metadata={}, include=include,
                                   with_columns=first)

        watch_request = WatchRequest(
            rt=rt,
            namespace=path.namespace if rt.namespaced else None,
            labels=query.labels,
            fields=query.fields,
            resource_version=query.resource_version,
            timeout=timeout,
            bookmarks=request.query.get("allowWatchBookmarks", "").lower() in _TRUE,
            send_initial_events=request.query.get("sendInitialEvents", "").lower() in _TRUE,
            wrap=wrap,
        )
        self.active_watches += 1
        task = asyncio.current_task()
        if task is not None:
            self._watch_tasks.add(task)
        def started() -> None:
            # A watch is counted when its stream starts, not when it ends: request_counts()
            # must show the watches a client holds open.
            self.accounting.record(verb="watch", resource=self._resource_label(path), code=200)
            request[_COUNTED] = True

        try:
            return await serve_watch(
                request, watch_request, ops=self.ops, faults=self.faults.current,
                bookmark_interval=self.bookmark_interval, cache=self._cache,
                max_buffer_bytes=lambda: self.watch_budget.limit(self.active_watches),
                on_started=started,
            )
        finally:
            self.active_watches -= 1
            if task is not None:
                self._watch_tasks.discard(task)

    def close(self) -> None:
        """End every open watch stream now and drop the work not started on the workers
        (the server is shutting down; calls in flight end at their timeouts)."""
        self.offloader.stop()
        for task in list(self._watch_tasks):
            task.cancel()
