"""Declared inputs at run time: resolved from informers, and the parents that read each one
re-reconciled exactly when it changes.

``Operator(inputs=fn)`` declares, as a pure function of the parent, the objects its builders read
besides the parent (``builders.inputs``); ``build(parent, inputs)`` then receives them as a
``builders.Inputs`` value. :class:`InputWatch` is the running side: it starts one informer per
(kind, namespace) on first use (none for an operator that declares nothing), answers each
parent's references from those caches (no request per reconcile), and keeps the index from each
input to the parents that read it. An event of an input queues exactly those parents, through
the runtime's queue (so it is coalesced like any event), after dropping their reused builds; a
change to an object nobody reads triggers nothing. A list refused (403) makes the references
forbidden until the informer lists, when its readers are queued again.

:func:`bind_inputs` turns ``build(parent, inputs)`` into the one-argument build the rest of the
toolkit calls, over any reader: the runtime's informers, or :func:`client_reader` (one GET per
reference) for ``optk plan``, ``optk manifests`` and ``optk uninstall``.

Boundary: resolution, the index and the trigger; what a missing input means for the parent is
the reconcile's (``InputMissingError`` is permanent: ``reconciler._reconcile.conditions``), and
the queue is the runtime's. Secret values never leave the caches but through ``Inputs``: nothing
here logs an object.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from builders import Inputs, KubeObject, ObjectRef, ResourceBuilder
from builders.inputs import InputDeclaration
from reconciler._base.clocks import Clock, RealClock
from reconciler._base.errors import ForbiddenError, NotFoundError, ReconcilerUsageError
from reconciler._base.keys import ParentKey
from reconciler._cache.informers import Informer
from reconciler._client.protocol import ClusterClient

__all__ = [
    "InputRead",
    "InputWatch",
    "bind_inputs",
    "client_reader",
    "one_argument_build",
    "present_reader",
    "resolve_inputs",
]

_log = logging.getLogger(__name__)

InputRead = Callable[[ObjectRef], "tuple[Mapping[str, Any] | None, bool]"]
"""``read(ref) -> (object or None, forbidden)``: one reference as some source knows it."""

BuildWithInputs = Callable[[KubeObject, Inputs], Iterable[ResourceBuilder]]

_Scope = tuple[str, str, str]  # apiVersion, kind, namespace ("" cluster-wide)

SYNC_TIMEOUT = 30.0
"""Seconds a first read of a (kind, namespace) waits for its informer's first list."""


def declared_refs(declare: InputDeclaration, parent: KubeObject) -> tuple[ObjectRef, ...]:
    """The references ``declare(parent)`` names, checked (each an ``ObjectRef`` with a kind and
    a name); a bad one is a ``ReconcilerUsageError`` naming the parent and the value."""
    refs = tuple(declare(parent))
    for ref in refs:
        if not isinstance(ref, ObjectRef) or not ref.kind or not ref.name:
            raise ReconcilerUsageError(
                f"inputs of {ObjectRef.of(parent)}: each input must be an ObjectRef with a "
                f"kind and a name, got {ref!r}")
    return refs


def resolve_inputs(refs: Iterable[ObjectRef], read: InputRead) -> Inputs:
    """``refs`` read through ``read`` into an ``Inputs`` value."""
    found: dict[ObjectRef, Mapping[str, Any]] = {}
    missing: list[ObjectRef] = []
    forbidden: list[ObjectRef] = []
    for ref in refs:
        obj, refused = read(ref)
        if refused:
            forbidden.append(ref)
        elif obj is None:
            missing.append(ref)
        else:
            found[ref] = obj
    return Inputs(found, missing=missing, forbidden=forbidden)


def bind_inputs(build: BuildWithInputs, declare: InputDeclaration,
                read: InputRead) -> Callable[[KubeObject], Iterable[ResourceBuilder]]:
    """The one-argument build: ``build(parent, inputs)`` with ``parent``'s declared inputs
    read through ``read``."""

    def bound(parent: KubeObject) -> Iterable[ResourceBuilder]:
        return build(parent, resolve_inputs(declared_refs(declare, parent), read))

    bound.__name__ = getattr(build, "__name__", "build")
    bound.__qualname__ = getattr(build, "__qualname__", bound.__name__)
    return bound


def client_reader(client: ClusterClient) -> InputRead:
    """Each reference read with one GET (for commands that run once: plans, manifests)."""

    def read(ref: ObjectRef) -> tuple[Mapping[str, Any] | None, bool]:
        try:
            return client.get(ref.api_version, ref.kind, ref.name, namespace=ref.namespace), False
        except NotFoundError:
            return None, False
        except ForbiddenError:
            return None, True

    return read


def present_reader(ref: ObjectRef) -> tuple[Mapping[str, Any] | None, bool]:
    """Every reference present, as an object with only its identity, a CustomResourceDefinition
    also Established (for what needs only the kinds the builders produce, with no cluster to
    read: the role ``optk manifests`` derives, so a kind an activation input enables counts)."""
    meta = {"name": ref.name, **({"namespace": ref.namespace} if ref.namespace else {})}
    obj: dict[str, Any] = {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": meta}
    if ref.kind == "CustomResourceDefinition":
        obj["status"] = {"conditions": [{"type": "Established", "status": "True"}]}
    return obj, False


class _Declares(Protocol):
    """What :func:`one_argument_build` reads of an ``Operator``."""

    @property
    def build(self) -> Callable[..., Iterable[ResourceBuilder]]: ...

    @property
    def inputs(self) -> InputDeclaration | None: ...


def one_argument_build(operator: _Declares,
                       read: InputRead) -> Callable[[KubeObject], Iterable[ResourceBuilder]]:
    """``operator.build`` as ``build(parent)``: itself when it declares no inputs, else bound
    to ``read``."""
    if operator.inputs is None:
        return operator.build
    return bind_inputs(operator.build, operator.inputs, read)


class InputWatch:
    """The inputs of a running operator: informers per (kind, namespace) started on first use,
    the index input -> parents, and the trigger ``on_change(parent_key)`` for each reader of a
    changed input. ``alive(parent_key)`` says whether a parent still exists (a deleted one is
    dropped from the index instead of being queued). Thread-safe."""

    def __init__(self, client: ClusterClient, declare: InputDeclaration, *,
                 on_change: Callable[[ParentKey], None],
                 alive: Callable[[ParentKey], bool] | None = None,
                 clock: Clock | None = None, sync_timeout: float = SYNC_TIMEOUT,
                 informer_options: Mapping[str, Any] | None = None) -> None:
        self._client = client
        self.declare = declare
        self._on_change = on_change
        self._alive = alive
        self._clock = clock or RealClock()
        self._sync_timeout = sync_timeout
        self._options = dict(informer_options or {})
        self._lock = threading.Lock()
        self._informers: dict[_Scope, Informer] = {}
        self._readers: dict[ObjectRef, set[ParentKey]] = {}
        self._reads: dict[ParentKey, frozenset[ObjectRef]] = {}
        self._stopped = False
        self.triggered = 0
        """Parents queued because an input they read changed."""

    # -- resolution -------------------------------------------------------------------------

    def bind(self, build: BuildWithInputs) -> Callable[[KubeObject], Iterable[ResourceBuilder]]:
        """``build(parent, inputs)`` as the runtime's one-argument build, its reads indexed."""

        def bound(parent: KubeObject) -> Iterable[ResourceBuilder]:
            return build(parent, self.resolve(parent))

        bound.__name__ = getattr(build, "__name__", "build")
        bound.__qualname__ = getattr(build, "__qualname__", bound.__name__)
        return bound

    def resolve(self, parent: KubeObject) -> Inputs:
        """``parent``'s declared inputs from the caches (informers started on first use);
        remembers that the parent reads them."""
        refs = declared_refs(self.declare, parent)
        ref = ObjectRef.of(parent)
        self._index(ref.namespaced_name, frozenset(refs))
        return resolve_inputs(refs, self.read)

    def versions_of(self, parent: KubeObject) -> str:
        """The ``resourceVersion``s of ``parent``'s inputs as the caches hold them now (the
        inputs part of a reused build's key, ``BuildMemo.inputs_key``); "-" for one missing or
        forbidden, "!" when the declaration itself fails (then the build fails too)."""
        try:
            refs = declared_refs(self.declare, parent)
        except Exception:  # the build reports it; such a build is never kept
            return "!"
        parts = []
        for ref in refs:
            obj, _ = self.read(ref)
            meta = (obj or {}).get("metadata") or {}
            parts.append(f"{ref}={meta.get('resourceVersion') or '-'}")
        return "|" + ",".join(parts)

    def read(self, ref: ObjectRef) -> tuple[Mapping[str, Any] | None, bool]:
        """One reference from its informer's cache: ``(object or None, forbidden)``."""
        informer = self._informer(ref)
        if not informer.has_synced:
            informer.wait_synced(self._sync_timeout, until_refused=True)
        if not informer.has_synced:
            return None, informer.list_refused is not None
        return informer.cache.get(ref.namespace, ref.name), False

    def readers(self, ref: ObjectRef) -> set[ParentKey]:
        """The parents that read ``ref`` at their last reconcile."""
        with self._lock:
            return set(self._readers.get(ref, ()))

    @property
    def scopes(self) -> list[_Scope]:
        """The (apiVersion, kind, namespace) watched now, sorted."""
        with self._lock:
            return sorted(self._informers)

    def forget(self, parent: ParentKey) -> None:
        """``parent`` reads nothing any more (it was deleted)."""
        self._index(parent, frozenset())

    def stop(self) -> None:
        """Stop every input informer; no trigger after this returns."""
        with self._lock:
            self._stopped = True
            informers, self._informers = list(self._informers.values()), {}
        for informer in informers:
            informer.stop()

    # -- internals --------------------------------------------------------------------------

    def _index(self, parent: ParentKey, refs: frozenset[ObjectRef]) -> None:
        with self._lock:
            before = self._reads.pop(parent, frozenset())
            for ref in before - refs:
                readers = self._readers.get(ref)
                if readers is not None:
                    readers.discard(parent)
                    if not readers:
                        del self._readers[ref]
            for ref in refs - before:
                self._readers.setdefault(ref, set()).add(parent)
            if refs:
                self._reads[parent] = refs

    def _informer(self, ref: ObjectRef) -> Informer:
        scope = (ref.api_version, ref.kind, ref.namespace or "")
        with self._lock:
            if self._stopped:
                raise ReconcilerUsageError("the operator's inputs are stopped")
            informer = self._informers.get(scope)
            if informer is not None:
                return informer
            informer = Informer(self._client, ref.api_version, ref.kind,
                                namespace=ref.namespace, clock=self._clock,
                                initial_events=False, **self._options)
            informer.add_handler(lambda kind, old, new: self._changed(old, new))
            informer.add_late_sync_handler(lambda: self._listed(scope))
            self._informers[scope] = informer
        return informer.start()

    def _changed(self, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        """An input's event: queue its readers, unless nothing but server metadata changed."""
        if old is not None and _version(old) == _version(new):
            return  # the same version again (a relist): no change
        self._trigger(self.readers(ObjectRef.of(new)))

    def _listed(self, scope: _Scope) -> None:
        """A refused (kind, namespace) lists now: every reader of it looks again."""
        with self._lock:
            refs = [ref for ref in self._readers
                    if (ref.api_version, ref.kind, ref.namespace or "") == scope]
        self._trigger({key for ref in refs for key in self.readers(ref)})

    def _trigger(self, parents: Iterable[ParentKey]) -> None:
        for key in sorted(parents):
            if self._alive is not None and not self._alive(key):
                self.forget(key)
                continue
            self.triggered += 1
            self._on_change(key)


def _version(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("resourceVersion") or "") if isinstance(meta, Mapping) else ""
