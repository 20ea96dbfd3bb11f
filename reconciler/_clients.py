"""The ``ClusterClient`` protocol: everything the reconciler and the driver ask of a cluster.

Objects go in and out as JSON-shaped dicts, addressed by apiVersion/kind/namespace/name. The one
implementation over the official client is ``reconciler._kubernetes.KubernetesClient``; anything
else that honours this protocol (a recording wrapper, a cache-backed reader) can stand in for it.
Errors are raised as the ``reconciler._errors`` tree, never as third-party exceptions.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "ClusterClient",
    "KubeObject",
    "WatchEvent",
]

KubeObject = Mapping[str, Any]
"""A Kubernetes object as JSON-shaped data (``apiVersion``, ``kind``, ``metadata``, ...)."""

WatchEvent = Mapping[str, Any]
"""A raw watch event ``{"type": ..., "object": {...}}``; types as the API sends them.."""


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
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> dict[str, Any]:
        """The list body (``items``, ``metadata.resourceVersion``, ``metadata.continue``).

        Items carry ``apiVersion`` and ``kind`` (filled in when the server omits them).
        """
        ...

    def watch(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
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
    ) -> dict[str, Any]:
        """Patch with the given content type (strategic merge, merge or JSON patch)."""
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

