"""The reconcile's view of the cluster: reads served from the informer caches.

``InformerReader`` is the reconciler's ``ReadCache`` (``reconciler._client.caches``) over an
``InformerManager``'s informers: no API request per read once a type's informer has synced. It
only reads; informers (``reconciler._cache.informers``) keep the caches current.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler._base.errors import KindUnlistableError
from reconciler._cache.children import InformerManager
from reconciler._cache.informers import Informer, TypeKey
from reconciler._client.caches import PassThroughCache
from reconciler._client.protocol import ClusterClient

__all__ = ["InformerReader"]


class InformerReader:
    """The reconciler's ``ReadCache`` over the manager's informers (no API request per read).

    The first read of a type starts its informer and waits for its first list (``sync_timeout``);
    a type that is not served reads as missing; an informer that cannot sync in time falls back to
    reading from the API so a reconcile is never blocked for long. An informer whose lists fail
    (forbidden, say) is not waited for at all: the read raises ``KindUnlistableError`` at once,
    naming the kind and why, so one unlistable kind fails only the children of that kind, never
    every reconcile for ``sync_timeout`` (issue 21).
    """

    from_memory = True

    def __init__(
        self,
        client: ClusterClient,
        manager: InformerManager,
        *,
        sync_timeout: float = 30.0,
        extra: Mapping[TypeKey, Informer] | None = None,
    ) -> None:
        self._client = client
        self._manager = manager
        self._fallback = PassThroughCache(client)
        self._sync_timeout = sync_timeout
        self._extra = dict(extra or {})

    def _informer(self, api_version: str, kind: str) -> Informer | None:
        informer = self._extra.get((api_version, kind))
        if informer is not None:
            return informer
        informer = self._manager.informer(api_version, kind)
        if informer is None:
            if not self._client.is_served(api_version, kind):
                return None
            informer = self._manager.ensure(api_version, kind)
        if informer.has_synced or informer.wait_synced(self._sync_timeout, until_refused=True):
            return informer
        if (error := informer.list_refused) is not None:
            if not self._client.is_served(api_version, kind):
                # refused because the kind is no longer served (its CRD went): nothing of it
                # exists, which is what an ABSENT child asks (issue 38's Observer soak: a
                # parent building the Thanos kind ABSENT after the CRD's deletion failed)
                return None
            raise KindUnlistableError(api_version=api_version, kind=kind, cause=error)
        return None

    def get(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """The cached object, or ``None`` when it does not exist (or is not ours to watch)."""
        informer = self._informer(api_version, kind)
        if informer is None:
            if not self._client.is_served(api_version, kind):
                return None
            return self._fallback.get(api_version, kind, name, namespace=namespace)
        return informer.cache.get(namespace, name)

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """Cached objects matching the selector (none of a kind that is not served)."""
        informer = self._informer(api_version, kind)
        if informer is None:
            if not self._client.is_served(api_version, kind):
                return []
            return self._fallback.list(
                api_version, kind, namespace=namespace, label_selector=label_selector
            )
        return informer.cache.list(namespace=namespace, label_selector=label_selector)
