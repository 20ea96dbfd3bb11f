"""Reads answered from one LIST per kind: a snapshot of the cluster for a pass over a fleet.

``ListedReader`` is a ``ReadCache`` (``reconciler._client.caches``) as ``InformerReader`` is, over
lists instead of watches. The first read of a kind lists that kind once over the whole scope (one
namespace, or every namespace; cluster-scoped kinds cluster-wide), by the reader's label selector
(the operator's ``managed-by`` label, as its informers are scoped), page by page; every later read
of the kind, by any parent's owner-uid label or by name, is answered from memory. It never
watches, so it is a snapshot: right for ``optk plan --all`` (one pass over every parent), wrong for
a running operator. The boundary: it only reads; what is decided with the reads is the caller's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from builders.names import OWNER_UID_LABEL
from reconciler._base.errors import ReconcilerError
from reconciler._base.keys import meta_of
from reconciler._cache.selectors import LabelSelector
from reconciler._client.caches import PassThroughCache
from reconciler._client.protocol import ClusterClient

__all__ = ["ListedReader"]

_Key = tuple[str | None, str]  # namespace, name


class _Listed:
    """One kind's list: objects by (namespace, name) and by owner-uid label value."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.by_name: dict[_Key, dict[str, Any]] = {}
        self.by_owner: dict[str, list[dict[str, Any]]] = {}
        for item in items:
            meta = item.get("metadata") or {}
            self.by_name[(meta.get("namespace"), str(meta.get("name")))] = item
            owner = (meta.get("labels") or {}).get(OWNER_UID_LABEL)
            if owner is not None:
                self.by_owner.setdefault(str(owner), []).append(item)


class ListedReader:
    """A ``ReadCache`` over one LIST per kind (and per namespace outside the scope).

    ``namespace`` is the scope (None: every namespace); ``label_selector`` scopes every list.
    A kind that is not served reads as empty. ``lists`` counts the (kind, scope) pairs read. A
    list that fails (forbidden, a server error) raises its error, and so does every later read
    of that kind and scope, without another request: a snapshot is listed once.
    """

    from_memory = True

    def __init__(
        self,
        client: ClusterClient,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        page_size: int = 500,
    ) -> None:
        self._client = client
        self._pages = PassThroughCache(client, page_size=page_size)
        self._namespace = namespace
        self._selector = label_selector
        self._kinds: dict[tuple[str, str, str | None], _Listed] = {}
        self._failed: dict[tuple[str, str, str | None], ReconcilerError] = {}
        self._lock = threading.Lock()

    @property
    def lists(self) -> int:
        """How many (kind, scope) pairs were read (a kind not served costs no request)."""
        return len(self._kinds)

    def _scope(self, api_version: str, kind: str, namespace: str | None) -> str | None:
        """Where the list of a read in ``namespace`` goes: the reader's scope when the read
        falls inside it, the read's own namespace otherwise, cluster-wide for cluster kinds."""
        try:
            namespaced = self._client.is_namespaced(api_version, kind)
        except ReconcilerError:
            return namespace  # not served: listing answers empty
        if not namespaced:
            return None
        if self._namespace is None or namespace in (None, self._namespace):
            return self._namespace
        return namespace

    def _listed(self, api_version: str, kind: str, namespace: str | None) -> _Listed:
        key = (api_version, kind, self._scope(api_version, kind, namespace))
        with self._lock:  # one list per key, whichever thread asks first
            if (failure := self._failed.get(key)) is not None:
                raise failure  # once refused, refused for every parent: no list per parent
            found = self._kinds.get(key)
            if found is None:
                try:
                    items = self._pages.list(api_version, kind, namespace=key[2],
                                             label_selector=self._selector)
                except ReconcilerError as error:
                    self._failed[key] = error
                    raise
                found = self._kinds[key] = _Listed(items)
            return found

    def get(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """The listed object, or ``None`` when the list did not hold it."""
        return self._listed(api_version, kind, namespace).by_name.get((namespace, name))

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """The listed objects in ``namespace`` (None: all) matching ``label_selector``."""
        listed = self._listed(api_version, kind, namespace)
        selector = LabelSelector.parse(label_selector)
        candidates: Iterable[dict[str, Any]] = listed.by_name.values()
        for key, op, values in selector.requirements:
            if key == OWNER_UID_LABEL and op == "in" and len(values) == 1:
                candidates = listed.by_owner.get(next(iter(values)), [])  # the usual read
                break
        return [item for item in candidates
                if (namespace is None or meta_of(item).get("namespace") == namespace)
                and selector.matches(meta_of(item).get("labels"))]


