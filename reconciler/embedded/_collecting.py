"""The garbage collector and the namespace controller, as kube-controller-manager runs them.

It runs on the server's event loop, woken by every committed event, so it never races the API
handlers (both use ``Operations`` on the same thread, under the store's lock). It does what
``garbage-collection.json`` and ``finalizers.json`` record:

- a dependent whose owners (by ``ownerReferences[].uid``) are all gone is deleted (background),
  including dependents of an owner that never existed (dangling references); an owner of a kind
  the server does not serve counts as gone only when the collector saw it deleted (its
  ``absentOwnerCache``): custom resources removed with their CRD take their dependents with them;
- an owner deleted with ``propagationPolicy: Orphan`` (the ``orphan`` finalizer) has the
  references to it removed from its dependents, then the finalizer removed;
- an owner deleted with ``Foreground`` (the ``foregroundDeletion`` finalizer) has its dependents
  deleted first, and the finalizer removed once none is left;
- a namespace being deleted is emptied over time as 1.25's namespace controller does it: one
  resource type after another in an unpredictable order (a custom resource's children may go
  before it), ``NAMESPACE_STEP_SECONDS`` apart, each object deleted with its finalizers
  honoured; after each pass the namespace's deletion conditions are written, and once it is
  empty the ``kubernetes`` finalizer is removed and the namespace goes away. While it is
  terminating, creates in it are refused (``Operations``: 403 ``NamespaceTerminating``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
import threading
from collections.abc import Callable, Mapping
from typing import Any

from reconciler.embedded._calling import MustNotBlock
from reconciler.embedded._kinds import ResourceType
from reconciler.embedded._offloading import Offloader
from reconciler.embedded._operations import Operations
from reconciler.embedded._statuses import ApiStatusError
from reconciler.embedded._storage import Bucket, Key, StoredEvent
from reconciler.embedded._stored_objects import (
    FOREGROUND_FINALIZER,
    NAMESPACES,
    ORPHAN_FINALIZER,
    Target,
    copy_json,
)
from reconciler.embedded._times import now_timestamp

__all__ = ["NAMESPACE_STEP_SECONDS", "GarbageCollector", "namespace_conditions"]

NAMESPACE_STEP_SECONDS = 0.01
"""The namespace controller's pause before its first pass, between two resource types it
empties and between passes (a real one takes seconds; bounded: (types + 1) steps a pass)."""
_RECHECK_SECONDS = 0.1  # a pass that left content (finalizers) is repeated this much later

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

    def __init__(self, ops: Operations, *, offloader: Offloader | None = None) -> None:
        self.ops = ops
        self._offloader = offloader
        self._offloaded: set[Key] = set()  # writes on a worker, waiting on a webhook call
        self._loop_thread: int | None = None
        self._terminating: set[Key] = set()
        self._candidates: set[Key] = set()
        self._deleted_owners: set[str] = set()  # uids seen deleted while they had dependents
        self._scheduled = False
        self._running = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ns_due: dict[str, float] = {}  # namespace -> when its next step may run
        self._ns_order: dict[str, list[Bucket]] = {}  # namespace -> types left this pass

    def start(self) -> None:
        """Subscribe to the store; must run on the server's event loop."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
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
            dependents = self.ops.storage.dependents(str(uid)) if uid else []
            if dependents:
                self._deleted_owners.add(str(uid))
                self._candidates.update(dependents)
        else:
            self._note(event.bucket, event.obj)
        if self._terminating or self._candidates:
            self._schedule()

    def _schedule(self) -> None:
        if self._scheduled or not self._running or self._loop is None:
            return
        self._scheduled = True
        if threading.get_ident() == self._loop_thread:
            self._loop.call_soon(self._sweep)
        else:  # a write committed on a worker (_offloading)
            self._loop.call_soon_threadsafe(self._sweep)

    def _wake_in(self, namespace: str, delay: float) -> None:
        assert self._loop is not None
        self._ns_due[namespace] = self._loop.time() + delay
        self._loop.call_later(delay, self._schedule)

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
                self._deleted_owners = {uid for uid in self._deleted_owners
                                        if self.ops.storage.dependents(uid)}
        except Exception:
            log.exception("embedded apiserver: garbage collection sweep failed")

    def _type_of(self, key: Key, obj: Mapping[str, Any]) -> ResourceType | None:
        return self.ops.registry.by_kind(str(obj.get("apiVersion")), str(obj.get("kind")))

    def _delete(self, rt: ResourceType, obj: Mapping[str, Any], *, policy: str) -> None:
        meta = _meta(obj)
        if meta.get("deletionTimestamp"):
            return  # already being deleted; deleting again would only re-add finalizers
        self._write(_target(rt, obj), lambda: self.ops.delete(
            _target(rt, obj), options={"propagationPolicy": policy}))

    def _remove_finalizer(
        self, rt: ResourceType, obj: Mapping[str, Any], *, finalizer: str
    ) -> None:
        new = copy_json(obj)
        meta = new["metadata"]
        meta["finalizers"] = [f for f in meta.get("finalizers") or () if f != finalizer]
        self._write(_target(rt, new), lambda: self.ops.update(_target(rt, new), new))

    def _owner_may_exist(self, ref: Mapping[str, Any]) -> bool:
        """Whether an owner reference may still point at a live owner.

        An owner of a kind the server does not serve cannot be looked up; like
        kube-controller-manager, the collector then leaves the dependent alone, unless it saw
        that owner deleted (a custom resource removed with its CRD).
        """
        uid = str(ref.get("uid"))
        if self.ops.storage.get_by_uid(uid) is not None:
            return True
        if uid in self._deleted_owners:
            return False
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
            if (key[0], key[1]) == NAMESPACES:
                self._ns_due.pop(key[3], None)
                self._ns_order.pop(key[3], None)
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
        self._write(_target(rt, new), lambda: self.ops.update(_target(rt, new), new))

    def _write(self, target: Target, write: Callable[[], object]) -> None:
        """One write of the collector (404: already gone); one that calls a webhook (a
        validating webhook on DELETE, say) goes to a worker, once per object at a time, and
        its commit wakes the collector again."""
        key: Key = (target.rt.group, target.rt.plural, target.storage_namespace, target.name)
        if key in self._offloaded:
            return
        try:
            write()
        except ApiStatusError as exc:
            if exc.code != 404:
                raise
        except MustNotBlock:
            if self._offloader is None:
                raise
            self._offloaded.add(key)
            self._offloader.submit(write).add_done_callback(
                lambda done: self._written(key, done))

    def _written(self, key: Key, done: concurrent.futures.Future[object]) -> None:
        error = None if done.cancelled() else done.exception()
        if isinstance(error, ApiStatusError) and error.code == 404:
            error = None
        if error is not None:
            log.warning("embedded apiserver: garbage collection of %s failed: %s", key, error)
        if self._loop is not None and self._running:
            self._loop.call_soon_threadsafe(self._done_offloaded, key)

    def _done_offloaded(self, key: Key) -> None:
        self._offloaded.discard(key)  # a refused write is tried again at a later sweep

    def _finish_namespace(self, rt: ResourceType, ns: Mapping[str, Any]) -> None:
        """One step of the namespace controller for ``ns``, when its time has come."""
        assert self._loop is not None
        name = str(_meta(ns).get("name"))
        due = self._ns_due.get(name)
        if due is None:  # just deleted: the controller picks it up a step later
            self._wake_in(name, NAMESPACE_STEP_SECONDS)
            return
        if self._loop.time() < due:
            return  # a wake-up is scheduled
        order = self._ns_order.get(name)
        if order is None:  # a new pass: the types holding content, in map order (random)
            order = sorted({bucket for bucket, _ in self.ops.storage.in_namespace(name)})
            random.shuffle(order)
            self._ns_order[name] = order
        if order:
            bucket = order.pop()
            for found, obj in self.ops.storage.in_namespace(name):
                obj_rt = self._type_of((*found, name, ""), obj) if found == bucket else None
                if obj_rt is not None:
                    self._delete(obj_rt, obj, policy="Background")
            self._wake_in(name, NAMESPACE_STEP_SECONDS)
            return
        del self._ns_order[name]
        remaining = self.ops.storage.in_namespace(name)
        ns = self._write_conditions(rt, ns, remaining)
        if remaining or _meta(ns).get("finalizers"):
            self._wake_in(name, _RECHECK_SECONDS)  # finalizers hold content (or the namespace)
            return
        self._ns_due.pop(name, None)
        self.ops.force_remove(rt, ns)

    def _write_conditions(
        self, rt: ResourceType, ns: Mapping[str, Any],
        remaining: list[tuple[Bucket, Mapping[str, Any]]],
    ) -> Mapping[str, Any]:
        new = copy_json(ns)
        status = new.setdefault("status", {})
        status["conditions"] = namespace_conditions(
            remaining, old=status.get("conditions") or [], now=now_timestamp(),
            resource_of=self._resource_name,
        )
        if new == ns:
            return ns
        return self.ops.update(_target(rt, new), new, subresource="status")

    def _resource_name(self, bucket: Bucket, obj: Mapping[str, Any]) -> str:
        rt = self.ops.registry.by_kind(str(obj.get("apiVersion")), str(obj.get("kind")))
        return rt.group_resource if rt is not None else ".".join(p for p in bucket[::-1] if p)


# NamespaceCondition types in the order 1.25's namespace controller writes them, with the
# reason and message each has when nothing is wrong.
_NAMESPACE_CONDITIONS: tuple[tuple[str, str, str], ...] = (
    ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered",
     "All resources successfully discovered"),
    ("NamespaceDeletionGroupVersionParsingFailure", "ParsedGroupVersions",
     "All legacy kube types successfully parsed"),
    ("NamespaceDeletionContentFailure", "ContentDeleted",
     "All content successfully deleted, may be waiting on finalization"),
    ("NamespaceContentRemaining", "ContentRemoved", "All content successfully removed"),
    ("NamespaceFinalizersRemaining", "ContentHasNoFinalizers",
     "All content-preserving finalizers finished"),
)


def namespace_conditions(
    remaining: list[tuple[Bucket, Mapping[str, Any]]],
    *,
    old: list[Mapping[str, Any]],
    now: str,
    resource_of: Callable[[Bucket, Mapping[str, Any]], str],
) -> list[dict[str, Any]]:
    """The ``status.conditions`` of a terminating namespace after a pass of the controller.

    ``remaining`` is the content left (all of it waiting on finalizers, since everything was
    deleted); ``resource_of(bucket, obj)`` names an object's resource (``configmaps``,
    ``widgets.example.com``). A condition keeps its ``lastTransitionTime`` while its status
    does not change.
    """
    resources: dict[str, int] = {}
    finalizers: dict[str, int] = {}
    for bucket, obj in remaining:
        resource = resource_of(bucket, obj)
        resources[resource] = resources.get(resource, 0) + 1
        for finalizer in _meta(obj).get("finalizers") or ():
            finalizers[str(finalizer)] = finalizers.get(str(finalizer), 0) + 1
    problems: dict[str, tuple[str, str]] = {}
    if resources:
        problems["NamespaceContentRemaining"] = ("SomeResourcesRemain", (
            "Some resources are remaining: " + ", ".join(
                f"{r} has {n} resource instances" for r, n in sorted(resources.items()))))
    if finalizers:
        problems["NamespaceFinalizersRemaining"] = ("SomeFinalizersRemain", (
            "Some content in the namespace has finalizers remaining: " + ", ".join(
                f"{f} in {n} resource instances" for f, n in sorted(finalizers.items()))))
    before = {str(c.get("type")): c for c in old if isinstance(c, Mapping)}
    conditions = []
    for kind, ok_reason, ok_message in _NAMESPACE_CONDITIONS:
        reason, message = problems.get(kind, (ok_reason, ok_message))
        state = "True" if kind in problems else "False"
        previous = before.get(kind)
        since = (previous.get("lastTransitionTime") if previous is not None
                 and previous.get("status") == state else now)
        conditions.append({"type": kind, "status": state, "lastTransitionTime": since,
                           "reason": reason, "message": message})
    return conditions
