"""Fencing: no write from a replica whose lease may have expired.

Issue 12, defect 1: a leader paused past its lease (SIGSTOP, a long GC pause, a partition)
resumed and kept writing while another replica held the lease. ``WriteFence`` holds when this
replica last renewed its Lease successfully, measured from when the renew request was *sent*
(the server may have stamped it any time after that) by the injected clock; writes are allowed
only within ``validity`` (the election's ``renew_deadline``, a safety margin below the lease
duration, as client-go's leader election) of that moment. ``FencingClient`` wraps the runtime's
client: every write (create, patch, replace, delete; status, Events and the resync heartbeat
Lease go through it) checks the fence first and raises ``LeadershipLostError`` instead of
sending. Reads pass through. The Lease election itself (``reconciler._leadership.election``) writes
with the unfenced client: it is what renews the fence.
"""

from __future__ import annotations

import threading
from typing import Any

from reconciler._base.clocks import Clock
from reconciler._base.errors import LeadershipLostError, ReconcilerUsageError
from reconciler._client.protocol import ClusterClient, ForwardingClient, KubeObject

__all__ = ["FencingClient", "WriteFence"]


class WriteFence:
    """Up to when this replica may write: ``validity`` seconds after its last renew was sent.

    Closed until the first ``renewed``; ``revoke`` closes it at once (stepping down).
    """

    def __init__(self, *, clock: Clock, validity: float, identity: str = "") -> None:
        if not validity > 0:
            raise ReconcilerUsageError(
                f"a write fence needs a positive validity, got {validity}")
        self._clock = clock
        self.validity = validity
        self.identity = identity
        self._lock = threading.Lock()
        self._renewed_at: float | None = None

    def renewed(self, sent_at: float) -> None:
        """A renew (or acquire) sent at ``sent_at`` (clock monotonic) succeeded."""
        with self._lock:
            if self._renewed_at is None or sent_at > self._renewed_at:
                self._renewed_at = sent_at

    def revoke(self) -> None:
        """Close the fence: leadership was lost or given up."""
        with self._lock:
            self._renewed_at = None

    def valid(self) -> bool:
        """Whether a write may be sent now."""
        with self._lock:
            renewed = self._renewed_at
        return renewed is not None and self._clock.monotonic() < renewed + self.validity

    def check(self, action: str) -> None:
        """Raise ``LeadershipLostError`` naming ``action`` unless a write may be sent now."""
        with self._lock:
            renewed = self._renewed_at
        now = self._clock.monotonic()
        if renewed is not None and now < renewed + self.validity:
            return
        raise LeadershipLostError(
            identity=self.identity or "this replica", action=action,
            renewed_ago=None if renewed is None else now - renewed, deadline=self.validity,
        )


class FencingClient(ForwardingClient):
    """A ``ClusterClient`` decorator that sends a write only while ``fence`` is valid."""

    def __init__(self, inner: ClusterClient, *, fence: WriteFence) -> None:
        super().__init__(inner)
        self.fence = fence
        self.refused = 0
        """Writes refused by the fence (never sent)."""

    def _check(self, verb: str, api_version: str, kind: str, name: str,
               namespace: str | None) -> None:
        try:
            where = f"{namespace}/{name}" if namespace else name
            self.fence.check(f"{verb} {kind}.{api_version} {where}")
        except LeadershipLostError:
            self.refused += 1
            raise

    # reads and discovery pass through (ForwardingClient); writes are fenced
    def create(self, obj: KubeObject, *, dry_run: bool = False) -> dict[str, Any]:
        """Create, if the fence allows."""
        meta = obj.get("metadata") or {}
        self._check("create", str(obj.get("apiVersion")), str(obj.get("kind")),
                    str(meta.get("name") or meta.get("generateName") or ""),
                    meta.get("namespace"))
        return self.inner.create(obj, dry_run=dry_run)

    def patch(
        self, api_version: str, kind: str, name: str, patch: Any, *, patch_type: str,
        namespace: str | None = None, subresource: str | None = None, dry_run: bool = False,
        force: bool = False,
    ) -> dict[str, Any]:
        """Patch, if the fence allows."""
        self._check("patch", api_version, kind, name, namespace)
        return self.inner.patch(api_version, kind, name, patch, patch_type=patch_type,
                                namespace=namespace, subresource=subresource, dry_run=dry_run,
                             **({"force": True} if force else {}))

    def replace(
        self, obj: KubeObject, *, subresource: str | None = None, dry_run: bool = False
    ) -> dict[str, Any]:
        """Replace, if the fence allows."""
        meta = obj.get("metadata") or {}
        self._check("replace", str(obj.get("apiVersion")), str(obj.get("kind")),
                    str(meta.get("name") or ""), meta.get("namespace"))
        return self.inner.replace(obj, subresource=subresource, dry_run=dry_run)

    def delete(self, api_version: str, kind: str, name: str, **kwargs: Any) -> dict[str, Any]:
        """Delete, if the fence allows."""
        self._check("delete", api_version, kind, name, kwargs.get("namespace"))
        return self.inner.delete(api_version, kind, name, **kwargs)
