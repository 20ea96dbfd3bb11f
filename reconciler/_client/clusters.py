"""The connections to the clusters children are placed in: one client per cluster Secret.

Why it exists: a placed child (``builders.placed``, issue 41) is written through its cluster's
own client. :class:`ClusterConnections` reads the clusters ``ClusterSecrets`` declares (one LIST
of the Secrets through the caller's ``ReadCache``: the driver's informer answers it with no
request) and keeps one ``KubernetesClient`` per cluster, built from the Secret's kubeconfig and
rebuilt when the Secret's ``resourceVersion`` changes (rotated credentials); a client whose
Secret is gone or no longer selected is closed and dropped.

Boundary: connections only. Which cluster a child goes to, and what is written there, is the
reconcile's (``reconciler._reconcile.placement``); parsing a Secret is
``reconciler._client.cluster_secrets``' (pure). Nothing here logs or raises a kubeconfig's
content: a cluster whose Secret is unusable is named with the reason only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from reconciler._base.errors import ClusterUnavailableError, KubeconfigError
from reconciler._client.caches import ReadCache
from reconciler._client.cluster_secrets import (
    ClusterRecord,
    ClusterSecretError,
    ClusterSecrets,
    parse_cluster_secret,
)
from reconciler._client.connect import load_client_from_dict
from reconciler._client.protocol import ClusterClient

__all__ = ["ClusterConnections", "ClusterUnavailableError", "ClusterView"]

_log = logging.getLogger(__name__)

Connect = Callable[[ClusterRecord, ClusterSecrets, str | None], ClusterClient]
"""How a cluster's client is made from its record, the Secrets' settings and the operator's
name (its field manager and User-Agent there)."""


def kubernetes_client(record: ClusterRecord, secrets: ClusterSecrets,
                      operator_name: str | None = None) -> ClusterClient:
    """A ``KubernetesClient`` for ``record``'s cluster (no retries, ``request_timeout`` bounded:
    an unreachable cluster fails fast and is tried again later by the reconcile), writing as
    ``operator_name`` (its ``fieldManager``, as at home)."""
    from reconciler._client.kubernetes import KubernetesClient  # the HTTP client: on first use

    api_client = load_client_from_dict(record.kubeconfig,
                                       source=f"cluster {record.name!r}")
    return KubernetesClient(api_client, request_timeout=secrets.request_timeout,
                            operator_name=operator_name)


@attrs.frozen(kw_only=True)
class ClusterView:
    """The clusters as one read of their Secrets found them: ``clusters`` by name, ``broken``
    (a Secret with a ``kubeconfig`` key that cannot be used: the reason) and ``unreadable``
    (why the Secrets could not be read at all, or None)."""

    clusters: Mapping[str, ClusterRecord] = attrs.field(factory=dict)
    broken: Mapping[str, str] = attrs.field(factory=dict)
    unreadable: str | None = None

    def removed(self, name: str) -> bool:
        """Whether no Secret declares cluster ``name`` (the Secrets were read)."""
        return self.unreadable is None and name not in self.clusters and name not in self.broken

    def why_not(self, name: str, secrets: ClusterSecrets) -> str | None:
        """Why no child can be placed in cluster ``name`` now, or None when it is known."""
        if self.unreadable is not None:
            return self.unreadable
        if name in self.clusters:
            return None
        if name in self.broken:
            return self.broken[name]
        return (f"no cluster {name!r}: no Secret {secrets.namespace}/{name} with a "
                f"'kubeconfig' key" + (f" matching {secrets.selector!r}" if secrets.selector
                                      else ""))


class ClusterConnections:
    """One client per cluster of ``secrets``, read through ``reader`` (a ``ReadCache`` of the
    operator's own cluster). ``connect`` makes a cluster's client (default: a
    ``KubernetesClient`` from its kubeconfig), writing as ``operator_name`` (the field manager
    the operator writes its home children with). Thread-safe: workers share it."""

    def __init__(self, secrets: ClusterSecrets, reader: ReadCache, *,
                 operator_name: str | None = None, connect: Connect | None = None) -> None:
        self.secrets = secrets
        self.reader = reader
        """Where the Secrets are listed from: a pass-through on its own, the driver's informer
        on the Secrets' namespace under a running operator (no request)."""
        self.on_drop: Callable[[str], None] | None = None
        """Told the name of each cluster whose client is dropped (its Secret gone): the
        driver stops that cluster's informers."""
        self.operator_name = operator_name
        self._connect: Connect = connect if connect is not None else kubernetes_client
        self._clients: dict[str, tuple[str, ClusterClient]] = {}
        self._lock = threading.Lock()
        self.connects = 0
        """Clients made so far (a rotated Secret makes a new one)."""

    def view(self) -> ClusterView:
        """The clusters now: one LIST of the Secrets (from the reader's cache under a running
        operator). Clients of clusters no longer there are closed."""
        items = self.reader.list("v1", "Secret", namespace=self.secrets.namespace,
                                 label_selector=self.secrets.selector)
        clusters: dict[str, ClusterRecord] = {}
        broken: dict[str, str] = {}
        for item in items:
            try:
                record = parse_cluster_secret(item)
            except ClusterSecretError as exc:
                name = str((item.get("metadata") or {}).get("name") or "")
                broken[name] = str(exc)
                continue
            if record is not None:
                clusters[record.name] = record
        self._drop(lambda name: name not in clusters)
        return ClusterView(clusters=clusters, broken=broken)

    def client(self, record: ClusterRecord) -> ClusterClient:
        """The client of ``record``'s cluster: the one made before while its Secret's
        ``resourceVersion`` is the same, else a new one (the old one closed). Raises
        ``ClusterUnavailableError`` when its kubeconfig cannot be used."""
        with self._lock:
            kept = self._clients.get(record.name)
            if kept is not None and kept[0] == record.resource_version:
                return kept[1]
        try:
            made = self._connect(record, self.secrets, self.operator_name)
        except KubeconfigError as exc:
            raise ClusterUnavailableError(str(exc), cluster=record.name) from None
        with self._lock:
            old = self._clients.get(record.name)
            if old is not None and old[0] == record.resource_version:
                raced = old[1]  # another worker connected meanwhile: keep its client
            else:
                raced = None
                self._clients[record.name] = (record.resource_version, made)
                self.connects += 1
        if raced is not None:
            _close(made)
            return raced
        if old is not None:
            _log.info("cluster %r: its Secret changed (resourceVersion %s -> %s): reconnected",
                      record.name, old[0], record.resource_version)
            _close(old[1])
        return made

    def connected(self) -> list[str]:
        """The clusters a client is kept for, sorted."""
        with self._lock:
            return sorted(self._clients)

    def close(self) -> None:
        """Close every client (the operator stops)."""
        on_drop, self.on_drop = self.on_drop, None
        try:
            self._drop(lambda name: True)
        finally:
            self.on_drop = on_drop

    def _drop(self, gone: Callable[[str], bool]) -> None:
        with self._lock:
            dropped = [(n, c) for n, (_, c) in self._clients.items() if gone(n)]
            for name, _ in dropped:
                del self._clients[name]
        for name, client in dropped:
            _log.info("cluster %r: its Secret is gone: disconnected", name)
            _close(client)
            if self.on_drop is not None:
                self.on_drop(name)


def _close(client: Any) -> None:
    api = getattr(client, "api_client", None)
    close = getattr(api, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # closing a pool of a cluster we leave: nothing to do about it
            _log.debug("closing a cluster client failed", exc_info=True)
