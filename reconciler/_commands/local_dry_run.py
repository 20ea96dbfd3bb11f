"""Dry-run writes answered on this side: the fleet plan decides without sending a write.

``optk plan -f`` executes its plans as server-side dry runs (``dryRun=All``): one request per
create or patch, for defaulting and validation by the server. Over a fleet of a thousand parents
that is a thousand requests for a preview, so ``optk plan --all`` decides locally instead:
``LocalDryRunClient`` wraps the cluster client and answers the dry-run creates and patches of a
dry-run ``ParentReconciler`` here (a create returns the body as built, a patch returns the listed
object with ``objectmatcher.apply_patch`` applied: the applier whose semantics the matcher's
patches are built for), without a request. Every other write (not a dry run, an update, a delete)
is refused with ``ReconcilerUsageError``, so nothing can be written through it. Reads go to the
wrapped client. The boundary: it answers writes, it decides nothing; what the server alone knows
(its defaulting, validation, and the immutable fields whose refusal turns a patch into a
recreate) is not known here: ``server_dry_run=True`` sends the dry runs to the server after all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from builders import ObjectRef
from builders.objects import copy_object
from objectmatcher import PatchError, UnsupportedPatchError, apply_patch
from reconciler._base.errors import ReconcilerUsageError
from reconciler._client.caches import ReadCache
from reconciler._client.counting import CountingClient
from reconciler._client.protocol import ClusterClient, KubeObject

__all__ = ["LocalDryRunClient"]


def _refused(verb: str, ref: ObjectRef) -> ReconcilerUsageError:
    return ReconcilerUsageError(f"a fleet plan writes nothing: refused to {verb} {ref}")


class LocalDryRunClient(CountingClient):
    """``inner`` whose dry-run creates and patches are answered from ``live`` (no request)
    unless ``server_dry_run``; every write that is not a dry run is refused. A
    ``CountingClient``: what it sends is counted (``reconciler._client.counting``), what it
    answers itself is not, so a reconcile's ``api_calls`` are the requests the server saw."""

    def __init__(self, inner: ClusterClient, *, live: ReadCache,
                 server_dry_run: bool = False) -> None:
        super().__init__(inner)
        self._live = live
        self.server_dry_run = server_dry_run

    def create(self, obj: KubeObject, *, dry_run: bool = False) -> dict[str, Any]:
        """The body as built (no server defaults), or the server's dry run."""
        if not dry_run:
            raise _refused("create", ObjectRef.of(obj))
        if self.server_dry_run:
            return super().create(obj, dry_run=True)
        return copy_object(obj)

    def patch(
        self, api_version: str, kind: str, name: str, patch: Any, *, patch_type: str,
        namespace: str | None = None, subresource: str | None = None, dry_run: bool = False,
        force: bool = False,
    ) -> dict[str, Any]:
        """The listed object with the patch applied here, or the server's dry run."""
        ref = ObjectRef(api_version=api_version, kind=kind, name=name, namespace=namespace)
        if not dry_run or subresource is not None:
            raise _refused("patch", ref)
        if self.server_dry_run:
            return super().patch(api_version, kind, name, patch, patch_type=patch_type,
                                 namespace=namespace, dry_run=True, force=force)
        live = self._live.get(api_version, kind, name, namespace=namespace) or {}
        try:
            return apply_patch(live, patch, patch_type=patch_type)
        except (PatchError, UnsupportedPatchError):  # server-side apply: the server merges
            return copy_object(live)

    def replace(
        self, obj: KubeObject, *, subresource: str | None = None, dry_run: bool = False
    ) -> dict[str, Any]:
        """Refused: a fleet plan replaces nothing."""
        raise _refused("replace", ObjectRef.of(obj))

    def delete(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None,
        propagation_policy: str | None = None, preconditions: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Refused: a dry-run reconcile reports deletes without sending them."""
        raise _refused("delete", ObjectRef(api_version=api_version, kind=kind, name=name,
                                           namespace=namespace))
