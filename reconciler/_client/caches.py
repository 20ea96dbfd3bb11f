"""Where the reconciler reads live objects from: the ``ReadCache`` interface, a pass-through and
the forwarding base of reader wrappers.

Reads dominate a steady-state reconcile, so they go through this small interface instead of the
cluster client directly. ``PassThroughCache`` asks the API server every time; the driver's informers
(a later issue) implement the same interface from memory. Writes never go through a cache, and a
reader that may be stale is fine: the reconciler's writes carry ``resourceVersion`` preconditions
and re-read from the cluster itself on a conflict.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from reconciler._base.errors import NotFoundError
from reconciler._client.protocol import ClusterClient, ListOptions

__all__ = ["ForwardingReader", "PassThroughCache", "ReadCache"]


@runtime_checkable
class ReadCache(Protocol):
    """Read access to live objects, possibly from memory and possibly a little behind."""

    @property
    def from_memory(self) -> bool:
        """True when reads cost no API request (informers); False when each read is one."""
        ...

    def get(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """The object, or ``None`` when it does not exist (or its kind is not served)."""
        ...

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """Every object matching the selector (all pages); empty when the kind is not served."""
        ...


class ForwardingReader(ReadCache):
    """A ``ReadCache`` that sends every read to ``inner`` unchanged: subclass it and override
    what the wrapper changes (the reader's twin of ``ForwardingClient``; ``CountingReader``
    is one)."""

    def __init__(self, inner: ReadCache) -> None:
        self.inner = inner

    @property
    def from_memory(self) -> bool:
        """As the wrapped reader."""
        return self.inner.from_memory

    def get(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """The wrapped reader's ``get``."""
        return self.inner.get(api_version, kind, name, namespace=namespace)

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """The wrapped reader's ``list``."""
        return self.inner.list(api_version, kind, namespace=namespace,
                               label_selector=label_selector)


class PassThroughCache:
    """A ``ReadCache`` that asks the cluster on every read: one request per call, never stale."""

    from_memory = False

    def __init__(self, client: ClusterClient, *, page_size: int = 500) -> None:
        self._client = client
        self._page_size = page_size

    def get(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """The live object from the API server, or ``None`` when it is missing."""
        try:
            return self._client.get(api_version, kind, name, namespace=namespace)
        except NotFoundError:
            return None

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """Every matching object, page by page (``limit``/``continue``)."""
        if not self._client.is_served(api_version, kind):
            return []
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = ListOptions(label_selector=label_selector, limit=self._page_size,
                               continue_token=token)
            body = self._client.list(api_version, kind, page, namespace=namespace)
            items.extend(body.get("items") or ())
            token = (body.get("metadata") or {}).get("continue") or None
            if not token:
                return items
