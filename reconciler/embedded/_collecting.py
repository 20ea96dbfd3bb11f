"""The garbage collector and the namespace controller, as kube-controller-manager runs them.

It runs on the server's event loop, woken by every committed event, so it never races the API
handlers (both use ``Operations`` on the same thread, under the store's lock). It does what
``garbage-collection.json`` and ``finalizers.json`` record:

- a dependent whose owners (by ``ownerReferences[].uid``) are all gone is deleted (background),
  including dependents of an owner that never existed (dangling references);
- an owner deleted with ``propagationPolicy: Orphan`` (the ``orphan`` finalizer) has the
  references to it removed from its dependents, then the finalizer removed;
- an owner deleted with ``Foreground`` (the ``foregroundDeletion`` finalizer) has its dependents
  deleted first, and the finalizer removed once none is left;
- a namespace being deleted has every object in it deleted (finalizers honoured); once it is
  empty the ``kubernetes`` finalizer is removed and the namespace goes away.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from reconciler.embedded._kinds import ResourceType
from reconciler.embedded._operations import (
    FOREGROUND_FINALIZER,
    NAMESPACES,
    ORPHAN_FINALIZER,
    Operations,
    Target,
    copy_json,
)
from reconciler.embedded._statuses import ApiStatusError
from reconciler.embedded._storage import Key, StoredEvent

__all__ = ["GarbageCollector"]

log = logging.getLogger("reconciler.embedded.gc")

_NAMESPACE_FINALIZER = "kubernetes"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _target(rt: ResourceType, obj: Mapping[str, Any]) -> Target:
    meta = _meta(obj)
    return Target(rt=rt, namespace=str(meta.get("namespace") or ""), name=str(meta.get("name")))


class GarbageCollector:
    """Owner-reference garbage collection and namespace deletion for one server."""

    def __init__(self, ops: Operations) -> None:
        self.ops = ops
        self._terminating: set[Key] = set()
        self._candidates: set[Key] = set()
        self._scheduled = False
        self._running = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """Subscribe to the store; must run on the server's event loop."""
        self._loop = asyncio.get_running_loop()
        self._running = True
        with self.ops.storage.lock:
            for bucket in self.ops.storage.buckets():
                for obj in self.ops.storage.items(bucket):
                    self._note(bucket, obj)
            self.ops.storage.subscribe_since(None, self._on_event)
        self._schedule()

    def stop(self) -> None:
        """Stop collecting."""
        self._running = False
        self.ops.storage.unsubscribe(self._on_event)

    def _note(self, bucket: tuple[str, str], obj: Mapping[str, Any]) -> None:
        meta = _meta(obj)
        key: Key = (bucket[0], bucket[1], str(meta.get("namespace") or ""),
                    str(meta.get("name") or ""))
        if meta.get("deletionTimestamp"):
            finalizers = meta.get("finalizers") or ()
            if (bucket == NAMESPACES or ORPHAN_FINALIZER in finalizers
                    or FOREGROUND_FINALIZER in finalizers):
                self._terminating.add(key)
        if meta.get("ownerReferences"):
            self._candidates.add(key)

    def _on_event(self, event: StoredEvent) -> None:
        if event.type == "DELETED":
            meta = _meta(event.obj)
            key: Key = (event.bucket[0], event.bucket[1], str(meta.get("namespace") or ""),
                        str(meta.get("name") or ""))
            self._terminating.discard(key)
            uid = meta.get("uid")
            if uid:
                self._candidates.update(self.ops.storage.dependents(str(uid)))
        else:
            self._note(event.bucket, event.obj)
        if self._terminating or self._candidates:
            self._schedule()

    def _schedule(self) -> None:
        if self._scheduled or not self._running or self._loop is None:
            return
        self._scheduled = True
        self._loop.call_soon(self._sweep)

    # -- the sweep ------------------------------------------------------------------------

    def _sweep(self) -> None:
        self._scheduled = False
        if not self._running:
            return
        try:
            with self.ops.storage.lock:
                for key in sorted(self._terminating):
                    self._finish(key)
                candidates, self._candidates = self._candidates, set()
                for key in sorted(candidates):
                    self._collect_if_orphaned(key)
        except Exception:
            log.exception("embedded apiserver: garbage collection sweep failed")

    def _type_of(self, key: Key, obj: Mapping[str, Any]) -> ResourceType | None:
        return self.ops.registry.by_kind(str(obj.get("apiVersion")), str(obj.get("kind")))

    def _delete(self, rt: ResourceType, obj: Mapping[str, Any], *, policy: str) -> None:
        meta = _meta(obj)
        if meta.get("deletionTimestamp"):
            return  # already being deleted; deleting again would only re-add finalizers
        try:
            self.ops.delete(_target(rt, obj), options={"propagationPolicy": policy})
        except ApiStatusError as exc:
            if exc.code != 404:
                raise

    def _remove_finalizer(
        self, rt: ResourceType, obj: Mapping[str, Any], *, finalizer: str
    ) -> None:
        new = copy_json(obj)
        meta = new["metadata"]
        meta["finalizers"] = [f for f in meta.get("finalizers") or () if f != finalizer]
        self.ops.update(_target(rt, new), new)

    def _owner_may_exist(self, ref: Mapping[str, Any]) -> bool:
        """Whether an owner reference may still point at a live owner.

        An owner of a kind the server does not serve cannot be looked up; like
        kube-controller-manager, the collector then leaves the dependent alone.
        """
        if self.ops.storage.get_by_uid(str(ref.get("uid"))) is not None:
            return True
        kind = self.ops.registry.by_kind(str(ref.get("apiVersion")), str(ref.get("kind")))
        return kind is None

    def _collect_if_orphaned(self, key: Key) -> None:
        obj = self.ops.storage.lookup(key)
        if obj is None:
            return
        refs = [r for r in _meta(obj).get("ownerReferences") or () if isinstance(r, Mapping)]
        if not refs or any(self._owner_may_exist(ref) for ref in refs):
            return
        rt = self._type_of(key, obj)
        if rt is not None:
            self._delete(rt, obj, policy="Background")

    def _finish(self, key: Key) -> None:
        obj = self.ops.storage.lookup(key)
        if obj is None:
            self._terminating.discard(key)
            return
        rt = self._type_of(key, obj)
        if rt is None:
            return
        meta = _meta(obj)
        finalizers = list(meta.get("finalizers") or ())
        uid = str(meta.get("uid"))
        if (key[0], key[1]) == NAMESPACES:
            self._finish_namespace(rt, obj)
            return
        if ORPHAN_FINALIZER in finalizers:
            for dep_key in self.ops.storage.dependents(uid):
                self._orphan(dep_key, uid)
            self._remove_finalizer(rt, obj, finalizer=ORPHAN_FINALIZER)
        elif FOREGROUND_FINALIZER in finalizers:
            dependents = self.ops.storage.dependents(uid)
            for dep_key in dependents:
                dep = self.ops.storage.lookup(dep_key)
                dep_rt = self._type_of(dep_key, dep) if dep is not None else None
                if dep is not None and dep_rt is not None:
                    self._delete(dep_rt, dep, policy="Background")
            if not self.ops.storage.dependents(uid):
                self._remove_finalizer(rt, obj, finalizer=FOREGROUND_FINALIZER)
        else:
            self._terminating.discard(key)

    def _orphan(self, dep_key: Key, owner_uid: str) -> None:
        dep = self.ops.storage.lookup(dep_key)
        if dep is None:
            return
        rt = self._type_of(dep_key, dep)
        if rt is None:
            return
        new = copy_json(dep)
        refs = [r for r in new["metadata"].get("ownerReferences") or ()
                if r.get("uid") != owner_uid]
        if refs:
            new["metadata"]["ownerReferences"] = refs
        else:
            new["metadata"].pop("ownerReferences", None)
        self.ops.update(_target(rt, new), new)

    def _finish_namespace(self, rt: ResourceType, ns: Mapping[str, Any]) -> None:
        name = str(_meta(ns).get("name"))
        remaining = self.ops.storage.in_namespace(name)
        for bucket, obj in remaining:
            obj_rt = self._type_of((bucket[0], bucket[1], name, ""), obj)
            if obj_rt is not None:
                self._delete(obj_rt, obj, policy="Background")
        if self.ops.storage.in_namespace(name):
            return
        if _meta(ns).get("finalizers"):
            return  # other finalizers still hold the namespace
        self.ops.force_remove(rt, ns)
