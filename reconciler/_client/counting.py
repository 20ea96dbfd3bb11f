"""Request accounting: a counting ``ClusterClient`` wrapper and a counting ``ReadCache`` wrapper.

A reconcile reports every request it made (``ReconcileResult.api_calls``, ``ParentResult
.api_calls``) so that callers and benchmarks can check "no write in a steady state". Nothing in
the reconcile counts by hand: the reconcilers talk to the cluster through ``CountingClient`` and
read through ``CountingReader``, which record one ``ApiCall`` per request into every recording
open on the current thread (``with recording() as calls: ...``). Recordings nest: a parent's
recording also holds what its children's recordings hold. Discovery (``is_served``,
``is_namespaced``) is not counted (the client caches it), and neither are reads of a reader that
reads from memory. Wrapping is idempotent (:func:`counting`, :func:`counting_reader`), so a request
is never counted twice.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any, Unpack

import attrs

from builders import ObjectRef
from reconciler._client.caches import ForwardingReader, ReadCache
from reconciler._client.protocol import (
    ClusterClient,
    ForwardingClient,
    KubeObject,
    ListFields,
    ListOptions,
    WatchEvent,
)

__all__ = [
    "ApiCall",
    "CountingClient",
    "CountingReader",
    "counting",
    "counting_reader",
    "recording",
    "uncounted",
]


@attrs.frozen(kw_only=True)
class ApiCall:
    """One request the reconciler sent (reads from an in-memory cache are not calls)."""

    verb: str
    """Kubernetes verb: ``get``, ``list``, ``watch``, ``create``, ``update``, ``patch``,
    ``delete``."""
    ref: ObjectRef


_local = threading.local()


def _open() -> list[list[ApiCall]]:
    stack: list[list[ApiCall]] | None = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


class recording:
    """Collect the requests counted on this thread inside the block, in order."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls: list[ApiCall] = []

    def __enter__(self) -> list[ApiCall]:
        _open().append(self.calls)
        return self.calls

    def __exit__(self, *exc: object) -> None:
        _open().pop()


def _record(verb: str, ref: ObjectRef) -> None:
    stack = getattr(_local, "stack", None)
    if stack:
        call = ApiCall(verb=verb, ref=ref)
        for calls in stack:
            calls.append(call)


class CountingClient(ForwardingClient):
    """A ``ClusterClient`` that records each request (verb and object) before sending it."""

    def get(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        """Counted ``get``."""
        _record("get", ObjectRef(api_version=api_version, kind=kind, name=name,
                                 namespace=namespace or None))
        return super().get(api_version, kind, name, namespace=namespace)

    def list(
        self, api_version: str, kind: str, options: ListOptions | None = None, *,
        namespace: str | None = None, **fields: Unpack[ListFields],
    ) -> dict[str, Any]:
        """Counted ``list`` (one call per page)."""
        _record("list", ObjectRef(api_version=api_version, kind=kind, name="",
                                  namespace=namespace or None))
        return super().list(api_version, kind, options, namespace=namespace, **fields)

    def watch(
        self, api_version: str, kind: str, options: ListOptions | None = None, *,
        namespace: str | None = None, **fields: Unpack[ListFields],
    ) -> Iterator[WatchEvent]:
        """Counted ``watch`` (one call per stream)."""
        _record("watch", ObjectRef(api_version=api_version, kind=kind, name="",
                                   namespace=namespace or None))
        return super().watch(api_version, kind, options, namespace=namespace, **fields)

    def create(self, obj: KubeObject, *, dry_run: bool = False) -> dict[str, Any]:
        """Counted ``create``."""
        _record("create", ObjectRef.of(obj))
        return super().create(obj, dry_run=dry_run)

    def patch(
        self, api_version: str, kind: str, name: str, patch: Any, *, patch_type: str,
        namespace: str | None = None, subresource: str | None = None, dry_run: bool = False,
        force: bool = False,
    ) -> dict[str, Any]:
        """Counted ``patch``."""
        _record("patch", ObjectRef(api_version=api_version, kind=kind, name=name,
                                   namespace=namespace or None))
        return super().patch(api_version, kind, name, patch, patch_type=patch_type,
                             namespace=namespace, subresource=subresource, dry_run=dry_run,
                             **({"force": True} if force else {}))

    def replace(
        self, obj: KubeObject, *, subresource: str | None = None, dry_run: bool = False
    ) -> dict[str, Any]:
        """Counted ``update`` (PUT)."""
        _record("update", ObjectRef.of(obj))
        return super().replace(obj, subresource=subresource, dry_run=dry_run)

    def delete(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None,
        propagation_policy: str | None = None, preconditions: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Counted ``delete``."""
        _record("delete", ObjectRef(api_version=api_version, kind=kind, name=name,
                                    namespace=namespace or None))
        return super().delete(api_version, kind, name, namespace=namespace,
                              propagation_policy=propagation_policy, preconditions=preconditions)


class CountingReader(ForwardingReader):
    """A ``ReadCache`` that records one ``get``/``list`` per read when its reader asks the server.

    It counts what the reconcile asked for (one ``list`` however many pages), and nothing for a
    reader that reads from memory (informers), even when such a reader falls back to the server.
    """

    def get(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """The wrapped reader's ``get``, counted unless it reads from memory."""
        if not self.inner.from_memory:
            _record("get", ObjectRef(api_version=api_version, kind=kind, name=name,
                                     namespace=namespace or None))
        return super().get(api_version, kind, name, namespace=namespace)

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """The wrapped reader's ``list``, counted once unless it reads from memory."""
        if not self.inner.from_memory:
            _record("list", ObjectRef(api_version=api_version, kind=kind, name="",
                                      namespace=namespace or None))
        return super().list(api_version, kind, namespace=namespace,
                            label_selector=label_selector)


def counting(client: ClusterClient) -> CountingClient:
    """``client`` wrapped in a ``CountingClient``, unless it already is one."""
    return client if isinstance(client, CountingClient) else CountingClient(client)


def counting_reader(reader: ReadCache) -> CountingReader:
    """``reader`` wrapped in a ``CountingReader``, unless it already is one."""
    return reader if isinstance(reader, CountingReader) else CountingReader(reader)


def uncounted(client: ClusterClient) -> ClusterClient:
    """The client under any ``CountingClient`` (for a reader whose reads are counted as reads)."""
    return client.inner if isinstance(client, CountingClient) else client
