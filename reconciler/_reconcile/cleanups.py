"""The cleanup finalizer's executor: the reads and writes ``reconciler._reconcile.finalizing``
decides.

``ParentCleanup.ensure(parent, children)`` runs inside a parent reconcile, before the children
are written: it adds the toolkit's finalizer (one merge patch, with the kinds to look for) when
the parent gets its first uncollectable child or the operator has ``on_delete``; otherwise it
makes no request. ``ParentCleanup.finalize(parent)`` runs when the worker finds the parent being
deleted: it lists the annotated kinds by the parent's owner-uid label (all namespaces), deletes
what is ours and outside the garbage collector's reach (a CRD with custom resources left only
when marked ``optk.dev/allow-data-loss``), runs ``on_delete``, and removes the finalizer. What
is not done yet is reported in a ``Cleanup`` condition on the parent; the worker retries with
backoff. ``delete_owned`` is the same deletion for ``optk uninstall``
(``reconciler._commands.uninstall``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from builders import ObjectRef
from builders.names import OWNER_UID_LABEL, SHARED_LABEL, label_value
from reconciler._base.clocks import Clock, RealClock
from reconciler._base.errors import ConflictError, DataLossError, NotFoundError, ReconcilerError
from reconciler._base.keys import meta_of
from reconciler._base.text import bounded
from reconciler._base.times import format_time, parse_time
from reconciler._client.protocol import ClusterClient, KubeObject
from reconciler._reconcile.conditions import merge_conditions
from reconciler._reconcile.finalizing import (
    CleanupStep,
    cleanup_condition,
    cleanup_kinds,
    crd_resource_types,
    decide_cleanup,
    finalizer_patch,
    is_uncollectable,
    needs_cleanup,
    owner_selector,
    refuses_data_loss,
)
from reconciler._reconcile.planning import is_owned
from reconciler._reconcile.sharing import (
    is_kept,
    is_shared,
    keep_patch,
    record_patch,
    release_patch,
    shared_record,
)

__all__ = [
    "CLEANUP_STUCK_AFTER", "CleanupOutcome", "OnDelete", "ParentCleanup", "delete_owned",
    "release_kept", "release_to_others",
]

_log = logging.getLogger("optk.cleanup")

OnDelete = Callable[[KubeObject], object]
"""An ``Operator.on_delete`` hook: called with the parent being deleted; raises to be retried."""

_MERGE = "application/merge-patch+json"
_JSON_PATCH = "application/json-patch+json"
_MAX_PASSES = 3  # delete, then look again: objects without finalizers are gone at once
CLEANUP_STUCK_AFTER = 120.0
"""Seconds after its deletion from which a cleanup still waiting is logged as stuck (WARNING):
before, waiting (children with finalizers of theirs, an ordered teardown) is ordinary (INFO
when its reason changes, DEBUG otherwise); a failure (a refusal, the hook's error) is a
WARNING at once."""


@attrs.frozen(kw_only=True)
class CleanupOutcome:
    """One ``finalize`` pass: whether the parent is released, and what is left if not."""

    done: bool
    reason: str = ""
    deleted: tuple[ObjectRef, ...] = ()
    alarming: bool = False
    """Not done because something failed, or waiting for longer than
    :data:`CLEANUP_STUCK_AFTER`: worth a WARNING (an ordinary wait is not)."""


def _custom_resources(client: ClusterClient, crd: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every custom resource of ``crd``, over its served versions (one LIST each, all
    namespaces; the same object seen in two versions counted once)."""
    found: dict[tuple[str | None, str], dict[str, Any]] = {}
    for api_version, kind in crd_resource_types(crd):
        try:
            items = client.list(api_version, kind)["items"]
        except NotFoundError:
            continue
        for item in items:
            ref = ObjectRef.of(item)
            found.setdefault((ref.namespace, ref.name), item)
    return list(found.values())


def _owned_by(obj: Mapping[str, Any], owner_uid: str | None) -> bool:
    labels = meta_of(obj).get("labels") or {}
    return bool(owner_uid) and labels.get(OWNER_UID_LABEL) == label_value(str(owner_uid))


def count_custom_resources(
    client: ClusterClient, crd: Mapping[str, Any], *, owner_uid: str | None = None
) -> int:
    """How many custom resources of ``crd`` exist that are users' data: those that are not
    children of the parent with ``owner_uid`` (they go with that parent anyway)."""
    return sum(1 for item in _custom_resources(client, crd) if not _owned_by(item, owner_uid))


def delete_owned(
    client: ClusterClient, obj: Mapping[str, Any], *, owner_uid: str | None = None
) -> bool:
    """Delete ``obj`` (background propagation). For a CRD, the custom resources that are
    children of the parent with ``owner_uid`` are deleted first; any other one left makes it
    raise ``DataLossError`` unless the CRD is marked. A child marked ``helm.sh/resource-policy:
    keep`` is released instead (:func:`release_kept`). Whether a delete was sent (False: gone
    or kept)."""
    ref = ObjectRef.of(obj)
    if is_kept(obj):
        release_kept(client, obj, owner_uid=owner_uid)
        return False
    if ref.kind == "CustomResourceDefinition":
        others = 0
        for item in _custom_resources(client, obj):
            if not _owned_by(item, owner_uid):
                others += 1
                continue
            item_ref = ObjectRef.of(item)
            with contextlib.suppress(NotFoundError):
                client.delete(item_ref.api_version, item_ref.kind, item_ref.name,
                              namespace=item_ref.namespace, propagation_policy="Background")
        refusal = refuses_data_loss(obj, custom_resources=others)
        if refusal is not None and release_to_others(client, obj, owner_uid=owner_uid):
            return False
        if refusal is not None:
            raise DataLossError(refusal, ref=ref, custom_resources=others)
    try:
        client.delete(ref.api_version, ref.kind, ref.name, namespace=ref.namespace,
                      propagation_policy="Background")
    except NotFoundError:
        return False
    return True


def release_kept(
    client: ClusterClient, live: Mapping[str, Any], *, owner_uid: str | None
) -> bool:
    """Let ``live``, marked ``helm.sh/resource-policy: keep``, go instead of deleting it: its
    owner label, owner annotation and owner reference to ``owner_uid`` removed
    (``sharing.keep_patch``, preconditioned on the ``resourceVersion``), so neither the
    toolkit nor the garbage collector deletes it. Whether it was released (False: not this
    parent's, or gone)."""
    if not owner_uid or not _owned_by(live, owner_uid):
        return False
    ref = ObjectRef.of(live)
    try:
        client.patch(ref.api_version, ref.kind, ref.name, keep_patch(live, owner_uid),
                     patch_type=_JSON_PATCH, namespace=ref.namespace)
    except NotFoundError:
        return False
    _log.info("%s kept (helm.sh/resource-policy: keep): released, not deleted", ref)
    return True


def release_to_others(
    client: ClusterClient, crd: Mapping[str, Any], *, owner_uid: str | None
) -> bool:
    """When every custom resource of ``crd`` left (besides ``owner_uid``'s own) is a child of
    another parent (its ``optk.dev/owner-uid`` label names one), the CRD is theirs to keep:
    its owner label is removed (``sharing.release_patch``, preconditioned on the
    ``resourceVersion``) instead of deleting it with their resources, and the parent that
    builds it next takes it over (woken by the change). Whether it was released; False when a
    user's resource (no owner label) is among them, or it is shared or not this parent's."""
    if not owner_uid or is_shared(crd) or not _owned_by(crd, owner_uid):
        return False
    foreign = [item for item in _custom_resources(client, crd) if not _owned_by(item, owner_uid)]
    if not foreign or any(not (meta_of(item).get("labels") or {}).get(OWNER_UID_LABEL)
                          for item in foreign):
        return False
    ref = ObjectRef.of(crd)
    client.patch(ref.api_version, ref.kind, ref.name, release_patch(crd),
                 patch_type=_JSON_PATCH, namespace=ref.namespace)
    _log.info("%s released to the parents of its %d custom resources", ref, len(foreign))
    return True


class ParentCleanup:
    """Adds, executes and removes the cleanup finalizer of one operator's parents."""

    def __init__(
        self,
        client: ClusterClient,
        *,
        on_delete: OnDelete | None = None,
        clock: Clock | None = None,
        dry_run: bool = False,
    ) -> None:
        self.client = client
        self.on_delete = on_delete
        self.clock: Clock = clock if clock is not None else RealClock()
        self.dry_run = dry_run
        self._hook_done: set[str] = set()
        self._lock = threading.Lock()
        self.teardown: Callable[[Mapping[str, Any]], str | None] | None = None
        """Run first by :meth:`finalize`: the ordered teardown of the children that belong to
        components (``ParentReconciler.teardown``); a reason while it must wait, else None."""

    # -- while the parent lives -------------------------------------------------------------

    def ensure(
        self, parent: Mapping[str, Any], children: Iterable[ObjectRef],
        shared: Iterable[ObjectRef] = (), *, remote: bool = False,
    ) -> dict[str, Any] | None:
        """Add the finalizer when ``parent`` needs it and lacks it (``shared``: its shared
        children, which need it wherever they are; ``remote``: it has children placed in other
        clusters, which its teardown deletes): the parent as the server returned it after
        the patch, or None when no write was needed."""
        wanted = needs_cleanup(parent, children, on_delete=self.on_delete is not None or remote,
                               shared=shared)
        ref = ObjectRef.of(parent)
        for attempt in range(2):
            decision = decide_cleanup(parent, wanted_kinds=wanted)
            if decision.step is not CleanupStep.ADD or self.dry_run:
                return None if attempt == 0 else dict(parent)
            try:
                live = self.client.patch(
                    ref.api_version, ref.kind, ref.name,
                    finalizer_patch(parent, add=True, kinds=decision.kinds),
                    patch_type=_MERGE, namespace=ref.namespace,
                )
            except ConflictError:
                if attempt:
                    raise
                # a stale read (our own earlier patch not seen yet): decide on a fresh one
                parent = self.client.get(ref.api_version, ref.kind, ref.name,
                                         namespace=ref.namespace)
                continue
            _log.info("%s: added the cleanup finalizer (%s)", ref, decision.reason)
            return live
        return None

    # -- while it is being deleted ----------------------------------------------------------

    def finalize(self, parent: Mapping[str, Any]) -> CleanupOutcome:
        """One cleanup pass over ``parent`` (being deleted). Never raises for the cluster's
        answers: what is left is in the outcome (and the parent's ``Cleanup`` condition)."""
        ref = ObjectRef.of(parent)
        uid = str(meta_of(parent).get("uid") or "")
        deleted: list[ObjectRef] = []
        try:
            if self.teardown is not None and (waiting := self.teardown(parent)) is not None:
                return self._waiting(parent, waiting, deleted)
            for _ in range(_MAX_PASSES):
                remaining, deleting = self._remaining(parent, uid)
                decision = decide_cleanup(
                    parent, remaining=remaining, deleting_now=deleting,
                    on_delete=self.on_delete is not None, on_delete_done=self._done(uid),
                )
                step = decision.step
                if step is CleanupStep.NONE:
                    return CleanupOutcome(done=True, deleted=tuple(deleted))
                if step is CleanupStep.DELETE_CHILDREN:
                    for child in decision.delete:
                        if delete_owned(self.client, remaining[child], owner_uid=uid):
                            deleted.append(child)
                            _log.info("%s: deleted %s", ref, child)
                    continue
                if step is CleanupStep.WAIT:
                    return self._waiting(parent, decision.reason, deleted)
                if step is CleanupStep.RUN_ON_DELETE:
                    self._run_hook(parent, uid)
                    continue
                self._remove(parent)
                _log.info("%s: cleanup done; removed the finalizer", ref)
                return CleanupOutcome(done=True, deleted=tuple(deleted))
            return self._waiting(parent, "children are still being deleted", deleted)
        except Exception as exc:  # the cluster's refusal or the hook's error: retried
            return self._waiting(parent, str(exc), deleted, failed=True)

    def _remaining(
        self, parent: Mapping[str, Any], uid: str
    ) -> tuple[dict[ObjectRef, Mapping[str, Any]], set[ObjectRef]]:
        found: dict[ObjectRef, Mapping[str, Any]] = {}
        deleting: set[ObjectRef] = set()
        for api_version, kind in cleanup_kinds(parent):
            try:
                items = self.client.list(api_version, kind,
                                         label_selector=owner_selector(uid))["items"]
            except NotFoundError:
                continue  # the kind is not served: nothing of it can remain
            for item in [*items, *self._shared_of(api_version, kind, uid)]:
                child = ObjectRef.of(item)
                if not (is_shared(item) or is_uncollectable(parent, child)) \
                        or not is_owned(item, owner_uid=uid)[0]:
                    continue
                found[child] = item
                if meta_of(item).get("deletionTimestamp"):
                    deleting.add(child)
        return found, deleting

    def _shared_of(self, api_version: str, kind: str, uid: str) -> list[dict[str, Any]]:
        """The shared children of kind that record the parent with ``uid``, this parent
        removed from each that others still build (a patch preconditioned on its
        ``resourceVersion``): what is left are those it is the last parent of."""
        try:
            items = self.client.list(api_version, kind,
                                     label_selector=f"{SHARED_LABEL}=true")["items"]
        except NotFoundError:
            return []
        last = []
        for item in items:
            record = shared_record(item)
            if uid not in record:
                continue
            others = {k: v for k, v in record.items() if k != uid}
            if not others:
                last.append(item)
                continue
            ref = ObjectRef.of(item)
            if not self.dry_run:
                self.client.patch(ref.api_version, ref.kind, ref.name,
                                  record_patch(item, others), patch_type=_JSON_PATCH,
                                  namespace=ref.namespace)
                _log.info("%s: left shared %s (kept for %d other parents)",
                          uid, ref, len(others))
        return last

    def _done(self, uid: str) -> bool:
        with self._lock:
            return uid in self._hook_done

    def _run_hook(self, parent: Mapping[str, Any], uid: str) -> None:
        assert self.on_delete is not None
        self.on_delete(dict(parent))
        with self._lock:
            self._hook_done.add(uid)
        _log.info("%s: on_delete succeeded", ObjectRef.of(parent))

    def _remove(self, parent: Mapping[str, Any]) -> None:
        ref = ObjectRef.of(parent)
        with contextlib.suppress(NotFoundError):  # gone already
            self.client.patch(ref.api_version, ref.kind, ref.name,
                              finalizer_patch(parent, add=False), patch_type=_MERGE,
                              namespace=ref.namespace)
        with self._lock:
            self._hook_done.discard(str(meta_of(parent).get("uid") or ""))

    def _waiting(
        self, parent: Mapping[str, Any], reason: str, deleted: list[ObjectRef], *,
        failed: bool = False,
    ) -> CleanupOutcome:
        """Report ``reason`` on the parent (only when the condition changes) and not done.
        Logged at WARNING when it ``failed`` or has waited past :data:`CLEANUP_STUCK_AFTER`,
        else at INFO when the reason changes and DEBUG when it repeats."""
        ref = ObjectRef.of(parent)
        now = self.clock.time()
        since = parse_time(meta_of(parent).get("deletionTimestamp"))
        stuck = since is not None and now - since >= CLEANUP_STUCK_AFTER
        reason = bounded(reason)
        wanted = cleanup_condition(waiting=True, reason="CleanupPending", message=reason)
        status = parent.get("status")
        existing = status.get("conditions") if isinstance(status, Mapping) else None
        conditions, changed = merge_conditions(existing, [wanted], format_time(now))
        if failed:
            _log.warning("%s: cleanup failed, retried: %s", ref, reason)
        elif stuck:
            _log.warning("%s: cleanup still waits %.0fs after the deletion: %s", ref,
                         now - since if since is not None else 0.0, reason)
        else:
            _log.log(logging.INFO if changed else logging.DEBUG, "%s: cleanup waits: %s",
                     ref, reason)
        if changed:
            for sub in ("status", None):
                try:
                    self.client.patch(ref.api_version, ref.kind, ref.name,
                                      {"status": {"conditions": conditions}}, patch_type=_MERGE,
                                      namespace=ref.namespace, subresource=sub)
                    break
                except NotFoundError:
                    continue
                except ReconcilerError as exc:
                    _log.warning("%s: writing the Cleanup condition failed: %s", ref, exc)
                    break
        return CleanupOutcome(done=False, reason=reason, deleted=tuple(deleted),
                              alarming=failed or stuck)
