"""The ``ClusterClient`` protocol: everything the reconciler and the driver ask of a cluster.

Objects go in and out as JSON-shaped dicts, addressed by apiVersion/kind/namespace/name. The one
implementation over the official client is ``reconciler._client.kubernetes.KubernetesClient``;
anything else that honours this protocol (a recording wrapper, a cache-backed reader) can stand in
for it. Errors are raised as the ``reconciler._base.errors`` tree, never as third-party exceptions.

``list`` and ``watch`` take their options as one typed value, ``ListOptions`` (selectors, paging,
resume point, stream bounds); the same fields may be given as keywords (``ListFields``, typed
once here) as a shorthand that every implementation folds into a ``ListOptions`` with
``ListOptions.of``. An implementation honours the fields it can and ignores the ones it cannot
(``inactivity_timeout`` needs a client-side read timeout): callers never probe for capabilities.

``ForwardingClient`` is the base of every decorator of the protocol (request counting, the write
fence, the own-write recorder, the assigner's metadata view): each of its methods forwards to
``self.inner``, list and watch options folded into one ``ListOptions``, so a decorator overrides
only the calls it changes and the protocol's signatures are spelled once more, here, not once
per decorator.

A watch may come back as a ``WatchStream``: its events, and ``close()``, which ends the stream
from any thread (the blocked read returns, the connection is closed); ``Informer.stop`` uses it
so a stopped informer's thread and socket end at once. A decorator that maps events keeps it
closable with ``WatchStream.map``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol, TypedDict, Unpack, runtime_checkable

import attrs

from objectmatcher import KubeObject

__all__ = [
    "ClusterClient",
    "ForwardingClient",
    "KubeObject",
    "ListFields",
    "ListOptions",
    "WatchEvent",
    "WatchStream",
    "close_watch",
]

WatchEvent = Mapping[str, Any]
"""A raw watch event ``{"type": ..., "object": {...}}``; types as the API sends them.."""


class WatchStream(Iterator[WatchEvent]):
    """A watch's events that another thread can end: ``close()`` (idempotent, thread-safe)
    makes the blocked read return and frees the connection; iteration then stops."""

    __slots__ = ("_close", "_events")

    def __init__(self, events: Iterator[WatchEvent], close: Callable[[], None]) -> None:
        self._events, self._close = events, close

    def __iter__(self) -> WatchStream:
        return self

    def __next__(self) -> WatchEvent:
        return next(self._events)

    def close(self) -> None:
        """End the stream from any thread."""
        self._close()

    def map(self, function: Callable[[WatchEvent], WatchEvent]) -> WatchStream:
        """The events through ``function``, closed by this stream's ``close``."""
        return WatchStream((function(event) for event in self._events), self._close)


def close_watch(events: Iterator[WatchEvent]) -> None:
    """End ``events`` from another thread if it is a ``WatchStream``; other iterators end when
    their stream does (the server's ``timeoutSeconds``, the inactivity timeout)."""
    if isinstance(events, WatchStream):
        events.close()


class ListFields(TypedDict, total=False):
    """The fields of ``ListOptions`` as keywords of ``list``/``watch`` (a typed shorthand)."""

    label_selector: str | None
    field_selector: str | None
    limit: int | None
    continue_token: str | None
    resource_version: str | None
    timeout_seconds: int | None
    allow_bookmarks: bool
    inactivity_timeout: float | None


@attrs.frozen(kw_only=True)
class ListOptions:
    """What a list or watch asks for, besides the type and namespace.

    ``label_selector``/``field_selector`` filter (API syntax). A list pages with ``limit`` and
    ``continue_token`` (the previous page's ``metadata.continue``). A watch starts after
    ``resource_version``, asks the server to end the stream after ``timeout_seconds``, asks for
    BOOKMARK events with ``allow_bookmarks``, and, where the client can, gives up on a stream
    silent for ``inactivity_timeout`` seconds (``ApiError`` with code 0). Fields that do not
    apply to the call are ignored.
    """

    label_selector: str | None = None
    field_selector: str | None = None
    limit: int | None = None
    continue_token: str | None = None
    resource_version: str | None = None
    timeout_seconds: int | None = None
    allow_bookmarks: bool = True
    inactivity_timeout: float | None = None

    @classmethod
    def of(cls, options: ListOptions | None, fields: ListFields) -> ListOptions:
        """``options`` (or the defaults) with the keyword ``fields`` applied over it."""
        base = options if options is not None else cls()
        return attrs.evolve(base, **fields) if fields else base


@runtime_checkable
class ClusterClient(Protocol):
    """Reads and writes objects of any served kind."""

    def get(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        """The live object; ``NotFoundError`` when it does not exist."""
        ...

    def list(
        self,
        api_version: str,
        kind: str,
        options: ListOptions | None = None,
        *,
        namespace: str | None = None,
        **fields: Unpack[ListFields],
    ) -> dict[str, Any]:
        """The list body (``items``, ``metadata.resourceVersion``, ``metadata.continue``).

        Items carry ``apiVersion`` and ``kind`` (filled in when the server omits them).
        """
        ...

    def watch(
        self,
        api_version: str,
        kind: str,
        options: ListOptions | None = None,
        *,
        namespace: str | None = None,
        **fields: Unpack[ListFields],
    ) -> Iterator[WatchEvent]:
        """Stream raw watch events until the server ends the stream.

        A 410 sent as an ``ERROR`` event, or as the HTTP status, raises ``GoneError``.
        """
        ...

    def create(self, obj: KubeObject, *, dry_run: bool = False) -> dict[str, Any]:
        """Create ``obj``; ``AlreadyExistsError`` when the name is taken."""
        ...

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
        """Patch with the given content type (strategic merge, merge, JSON patch or apply;
        ``force`` takes conflicting fields over in a server-side apply)."""
        ...

    def replace(
        self, obj: KubeObject, *, subresource: str | None = None, dry_run: bool = False
    ) -> dict[str, Any]:
        """PUT the whole object (its ``metadata.resourceVersion`` is the precondition)."""
        ...

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: str | None = None,
        preconditions: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Delete; returns the object (finalizers pending) or the ``Status`` body."""
        ...

    def is_served(self, api_version: str, kind: str) -> bool:
        """Whether the server currently serves this kind (discovery, refreshed on a miss)."""
        ...

    def is_namespaced(self, api_version: str, kind: str) -> bool:
        """Whether objects of this kind live in a namespace; ``NotFoundError`` if not served."""
        ...


class ForwardingClient(ClusterClient):
    """A ``ClusterClient`` that sends every call to ``inner`` unchanged: subclass it and override
    what the decorator changes. ``list``/``watch`` forward one ``ListOptions`` (``options`` with the
    keyword fields applied), whichever style the caller used."""

    def __init__(self, inner: ClusterClient) -> None:
        self.inner = inner

    def get(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        """The wrapped client's ``get``."""
        return self.inner.get(api_version, kind, name, namespace=namespace)

    def list(
        self, api_version: str, kind: str, options: ListOptions | None = None, *,
        namespace: str | None = None, **fields: Unpack[ListFields],
    ) -> dict[str, Any]:
        """The wrapped client's ``list``."""
        return self.inner.list(api_version, kind, ListOptions.of(options, fields),
                               namespace=namespace)

    def watch(
        self, api_version: str, kind: str, options: ListOptions | None = None, *,
        namespace: str | None = None, **fields: Unpack[ListFields],
    ) -> Iterator[WatchEvent]:
        """The wrapped client's ``watch``."""
        return self.inner.watch(api_version, kind, ListOptions.of(options, fields),
                                namespace=namespace)

    def create(self, obj: KubeObject, *, dry_run: bool = False) -> dict[str, Any]:
        """The wrapped client's ``create``."""
        return self.inner.create(obj, dry_run=dry_run)

    def patch(
        self, api_version: str, kind: str, name: str, patch: Any, *, patch_type: str,
        namespace: str | None = None, subresource: str | None = None, dry_run: bool = False,
        force: bool = False,
    ) -> dict[str, Any]:
        """The wrapped client's ``patch``."""
        return self.inner.patch(api_version, kind, name, patch, patch_type=patch_type,
                                namespace=namespace, subresource=subresource, dry_run=dry_run,
                                **_forced(force))

    def replace(
        self, obj: KubeObject, *, subresource: str | None = None, dry_run: bool = False
    ) -> dict[str, Any]:
        """The wrapped client's ``replace``."""
        return self.inner.replace(obj, subresource=subresource, dry_run=dry_run)

    def delete(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None,
        propagation_policy: str | None = None, preconditions: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """The wrapped client's ``delete``."""
        return self.inner.delete(api_version, kind, name, namespace=namespace,
                                 propagation_policy=propagation_policy,
                                 preconditions=preconditions)

    def is_served(self, api_version: str, kind: str) -> bool:
        """The wrapped client's discovery."""
        return self.inner.is_served(api_version, kind)

    def is_namespaced(self, api_version: str, kind: str) -> bool:
        """The wrapped client's discovery."""
        return self.inner.is_namespaced(api_version, kind)


def _forced(force: bool) -> dict[str, bool]:
    """``force`` as keyword arguments, passed on only when set (clients that never apply
    need not know it)."""
    return {"force": True} if force else {}
