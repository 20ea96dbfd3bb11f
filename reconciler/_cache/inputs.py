"""Declared inputs at run time: resolved from informers, and the parents that read each one
re-reconciled exactly when it changes.

``Operator(inputs=fn)`` declares, as a pure function of the parent, the objects its builders read
besides the parent (``builders.inputs``); ``build(parent, inputs)`` then receives them as a
``builders.Inputs`` value. :class:`InputWatch` is the running side: it holds one informer per
(kind, namespace) from the runtime's informer pool (``reconciler._cache.pool``, shared with the
child informers) on first use (none for an operator that declares nothing; per name for a
CustomResourceDefinition, ``BY_NAME``: full objects, since ``kind_served`` needs the CRD's
status, see docs/driver.md on why not metadata-only), answers each
parent's references from those caches (no request per reconcile), and keeps the index from each
input to the parents that read it: a name reference by its ``ObjectRef``, a ``SelectorRef`` by
its (kind, namespace), where each event is matched against the selectors with the object's
labels before and after (so an object that starts or stops matching counts). An event of an
input queues exactly those parents, through the runtime's queue (so it is coalesced like any
event), after dropping their reused builds; a change to an object nobody reads triggers
nothing. A list refused (403) makes the references forbidden until the informer lists, when its
readers are queued again. An informer lives only while some parent reads its (kind, namespace):
when the last reader's references change or the last reader is deleted (``on_parent``: the
parent informer's DELETED), it is stopped (its watch closed) and dropped, its cache with it.

The clusters children may be placed in are an input too (``ClusterSelector``, issue 41): with
``clusters=ClusterSecrets(...)`` one informer on the Secrets of the clusters' namespace (its
label selector the ``ClusterSecrets``' own) answers every ``ClusterSelector`` (names and labels
only: :func:`clusters_of`) with the same index and triggers as a selector, and the connections
read the clusters from it too (:class:`ClusterSecretsReader`): it runs for as long as the
operator does, and no request is made to resolve a cluster.

:func:`bind_inputs` turns ``build(parent, inputs)`` into the one-argument build the rest of the
toolkit calls, over any ``InputSource``: the runtime's informers, or :func:`client_reader` (one
GET per reference, one LIST per selector) for ``optk plan``, and :data:`present_reader` for
``optk manifests`` and ``optk uninstall``.

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
from builders.inputs import Cluster, ClusterSelector, InputDeclaration, InputRef, SelectorRef
from reconciler._base.clocks import Clock, RealClock
from reconciler._base.errors import (
    ForbiddenError,
    InputDeclarationError,
    KindUnlistableError,
    NotFoundError,
    ReconcilerUsageError,
)
from reconciler._base.keys import ParentKey
from reconciler._base.text import quoted
from reconciler._cache.informers import Informer, WatchOptions
from reconciler._cache.pool import InformerPool, Scope
from reconciler._client.cluster_secrets import KUBECONFIG_KEY, ClusterSecrets
from reconciler._client.protocol import ClusterClient, ListOptions

__all__ = [
    "ClusterSecretsReader",
    "InputDeclarationError",
    "InputSource",
    "InputWatch",
    "bind_inputs",
    "client_reader",
    "one_argument_build",
    "present_reader",
    "resolve_inputs",
]

_log = logging.getLogger(__name__)

Read = tuple["Mapping[str, Any] | None", bool]
"""``(object or None, forbidden)``: one reference as a source knows it."""

Selected = tuple["list[Mapping[str, Any]] | None", bool]
"""``(objects matched or None, forbidden)``: one selector as a source knows it."""

Clusters = tuple["list[Cluster] | None", bool]
"""``(clusters matched or None, forbidden)``: one ``ClusterSelector`` as a source knows it."""


class InputSource(Protocol):
    """Where declared inputs are read from: the running operator's informers (``InputWatch``),
    the cluster itself (:func:`client_reader`), or nothing (:data:`present_reader`)."""

    def read(self, ref: ObjectRef) -> Read:
        """One reference: ``(object or None, forbidden)``."""
        ...

    def select(self, selector: SelectorRef) -> Selected:
        """The objects ``selector`` matches, sorted by namespace and name, or forbidden."""
        ...

    def clusters(self, selector: ClusterSelector) -> Clusters:
        """The clusters ``selector`` matches, sorted by name, or forbidden."""
        ...

BuildWithInputs = Callable[[KubeObject, Inputs], Iterable[ResourceBuilder]]

_Scope = tuple[str, str, str, str]  # apiVersion, kind, namespace ("": cluster-wide), name

BY_NAME = frozenset({"CustomResourceDefinition"})
"""Kinds read through one informer per object (a ``metadata.name`` field selector) rather than
per namespace: CustomResourceDefinitions are the largest objects of a cluster (their schemas),
clusters hold hundreds to thousands, and an operator reads a few (``kind_served``)."""

SYNC_TIMEOUT = 30.0
"""Seconds a first read of a (kind, namespace) waits for its informer's first list."""


def declared_refs(declare: InputDeclaration, parent: KubeObject) -> tuple[InputRef, ...]:
    """The references ``declare(parent)`` names, checked (each an ``ObjectRef`` with a kind and
    a name, or a ``SelectorRef`` with a kind); a bad one is an :class:`InputDeclarationError`
    naming the parent and the value."""
    refs = tuple(declare(parent))
    for ref in refs:
        named = isinstance(ref, ObjectRef) and ref.kind and ref.name
        if not named and not (isinstance(ref, SelectorRef) and ref.kind and ref.api_version) \
                and not isinstance(ref, ClusterSelector):
            raise InputDeclarationError(
                f"inputs of {ObjectRef.of(parent)}: each input must be an ObjectRef with a "
                f"kind and a name, a SelectorRef with an apiVersion and a kind, or a "
                f"ClusterSelector, got {quoted(ref)}")
    return refs


def resolve_inputs(refs: Iterable[InputRef], source: InputSource) -> Inputs:
    """``refs`` read through ``source`` into an ``Inputs`` value."""
    found: dict[ObjectRef, Mapping[str, Any]] = {}
    selected: dict[SelectorRef, list[Mapping[str, Any]]] = {}
    missing: list[ObjectRef] = []
    forbidden: list[InputRef] = []
    clusters: dict[ClusterSelector, list[Cluster]] = {}
    for ref in refs:
        if isinstance(ref, ClusterSelector):
            found_clusters, refused = source.clusters(ref)
            if refused or found_clusters is None:
                forbidden.append(ref)
            else:
                clusters[ref] = found_clusters
            continue
        if isinstance(ref, SelectorRef):
            objs, refused = source.select(ref)
            if refused or objs is None:
                forbidden.append(ref)
            else:
                selected[ref] = objs
            continue
        obj, refused = source.read(ref)
        if refused:
            forbidden.append(ref)
        elif obj is None:
            missing.append(ref)
        else:
            found[ref] = obj
    return Inputs(found, missing=missing, forbidden=forbidden, selected=selected,
                  clusters=clusters)


def bind_inputs(build: BuildWithInputs, declare: InputDeclaration,
                source: InputSource) -> Callable[[KubeObject], Iterable[ResourceBuilder]]:
    """The one-argument build: ``build(parent, inputs)`` with ``parent``'s declared inputs
    read through ``source``."""

    def bound(parent: KubeObject) -> Iterable[ResourceBuilder]:
        return build(parent, resolve_inputs(declared_refs(declare, parent), source))

    bound.__name__ = getattr(build, "__name__", "build")
    bound.__qualname__ = getattr(build, "__qualname__", bound.__name__)
    return bound


def is_cluster_secret(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` (a Secret of the clusters' namespace) declares a cluster: it has a
    ``kubeconfig`` key (whether that kubeconfig can be used is the connection's to say)."""
    return any(KUBECONFIG_KEY in (obj.get(field) or {}) for field in ("data", "stringData"))


def clusters_of(secrets: Iterable[Mapping[str, Any]], selector: ClusterSelector) -> list[Cluster]:
    """The clusters ``secrets`` declare that ``selector`` matches, as builders see them (a name
    and labels: no credential), sorted by name."""
    out = []
    for secret in secrets:
        if not is_cluster_secret(secret):
            continue
        meta = secret.get("metadata") or {}
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        if selector.matches(labels):
            out.append(Cluster(name=str(meta.get("name") or ""), labels=labels))
    return sorted(out, key=lambda c: c.name)


class _ClientSource:
    """Each reference read with one GET, each selector with one LIST (for commands that run
    once: plans), the clusters with one LIST of their Secrets (none without ``clusters``)."""

    def __init__(self, client: ClusterClient, clusters: ClusterSecrets | None = None) -> None:
        self._client = client
        self._clusters = clusters

    def clusters(self, selector: ClusterSelector) -> Clusters:
        if self._clusters is None:
            return [], False
        try:
            body = self._client.list("v1", "Secret", ListOptions(
                label_selector=self._clusters.selector), namespace=self._clusters.namespace)
        except ForbiddenError:
            return None, True
        return clusters_of(body.get("items") or (), selector), False

    def read(self, ref: ObjectRef) -> Read:
        try:
            return self._client.get(ref.api_version, ref.kind, ref.name,
                                    namespace=ref.namespace), False
        except NotFoundError:
            return None, False
        except ForbiddenError:
            return None, True

    def select(self, selector: SelectorRef) -> Selected:
        try:
            body = self._client.list(selector.api_version, selector.kind,
                                     ListOptions(label_selector=selector.label_selector or None),
                                     namespace=selector.namespace)
        except NotFoundError:  # the kind is not served: nothing matches
            return [], False
        except ForbiddenError:
            return None, True
        return sorted(body.get("items") or (), key=_name_key), False


def client_reader(client: ClusterClient, clusters: ClusterSecrets | None = None) -> InputSource:
    """Inputs read from the cluster: one GET per reference, one LIST per selector, one LIST of
    the Secrets ``clusters`` declares per ``ClusterSelector`` (none: no cluster matches)."""
    return _ClientSource(client, clusters)


class _PresentSource:
    """Every reference present, as an object with only its identity (labelled as its selector
    asks, one per selector), a CustomResourceDefinition also Established (for what needs only
    the kinds the builders produce, with no cluster to read: the role ``optk manifests``
    derives, so a kind an activation input enables counts)."""

    def read(self, ref: ObjectRef) -> Read:
        meta = {"name": ref.name, **({"namespace": ref.namespace} if ref.namespace else {})}
        obj: dict[str, Any] = {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": meta}
        if ref.kind == "CustomResourceDefinition":
            obj["status"] = {"conditions": [{"type": "Established", "status": "True"}]}
        return obj, False

    def select(self, selector: SelectorRef) -> Selected:
        obj, _ = self.read(ObjectRef(api_version=selector.api_version, kind=selector.kind,
                                     namespace=selector.namespace,
                                     name=f"{selector.kind.lower()}-0"))
        assert obj is not None
        labels = dict(selector.match_labels)
        return [{**obj, "metadata": {**obj["metadata"], "labels": labels}}], False

    def clusters(self, selector: ClusterSelector) -> Clusters:
        return [Cluster(name=PRESENT_CLUSTER, labels=dict(selector.match_labels))], False


PRESENT_CLUSTER = "cluster-0"
"""The one cluster ``present_reader`` answers a ``ClusterSelector`` with (its labels the
selector's): a stand-in for the clusters chosen at run time."""


present_reader: InputSource = _PresentSource()
"""Every input present (a selector matches one object): see ``_PresentSource``."""


class _Declares(Protocol):
    """What :func:`one_argument_build` reads of an ``Operator``."""

    @property
    def build(self) -> Callable[..., Iterable[ResourceBuilder]]: ...

    @property
    def inputs(self) -> InputDeclaration | None: ...


def one_argument_build(operator: _Declares,
                       source: InputSource) -> Callable[[KubeObject], Iterable[ResourceBuilder]]:
    """``operator.build`` as ``build(parent)``: itself when it declares no inputs, else bound
    to ``source``."""
    if operator.inputs is None:
        return operator.build
    return bind_inputs(operator.build, operator.inputs, source)


class InputWatch:
    """The inputs of a running operator: informers per (kind, namespace) started on first use,
    the index input -> parents, and the trigger ``on_change(parent_key)`` for each reader of a
    changed input. ``alive(parent_key)`` says whether a parent still exists (a deleted one is
    dropped from the index instead of being queued). An informer no parent reads any more is
    stopped and dropped. An ``InputSource``. Thread-safe."""

    def __init__(self, client: ClusterClient, declare: InputDeclaration, *,
                 on_change: Callable[[ParentKey], None],
                 alive: Callable[[ParentKey], bool] | None = None,
                 clock: Clock | None = None, sync_timeout: float = SYNC_TIMEOUT,
                 options: WatchOptions | None = None, pool: InformerPool | None = None,
                 clusters: ClusterSecrets | None = None) -> None:
        self.declare = declare
        self.clusters_from = clusters
        """Where the clusters a ``ClusterSelector`` selects are declared (None: no clusters)."""
        self._on_change = on_change
        self._alive = alive
        self._sync_timeout = sync_timeout
        # the runtime's pool, shared with the child informers (a pool of its own otherwise)
        self._own_pool = pool is None
        self._pool = pool or InformerPool(client, clock=clock or RealClock(), options=options)
        self._pool.subscribe(self, lambda scope, kind, old, new: self._changed(
            _input_scope(scope), old, new), on_late_sync=lambda s: self._listed(_input_scope(s)))
        self._cluster_scope: _Scope | None = None if clusters is None else (
            "v1", "Secret", clusters.namespace,
            f"{_LABELLED}{clusters.selector}" if clusters.selector else "")
        self._lock = threading.Lock()
        self._informers: dict[_Scope, Informer] = {}
        self._readers: dict[InputRef, set[ParentKey]] = {}
        self._reads: dict[ParentKey, frozenset[InputRef]] = {}
        # the selectors read, by scope (a ClusterSelector's: the clusters' Secrets)
        self._selectors: dict[_Scope, set[SelectorRef | ClusterSelector]] = {}
        self._in_scope: dict[_Scope, int] = {}  # how many references read, by scope
        self._stopped = False
        self._held_clusters = False  # the connections read the clusters' Secrets: kept
        self.triggered = 0
        """Parents queued because an input they read changed."""
        self.released = 0
        """Informers stopped because no parent read their (kind, namespace) any more."""

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
        key = ObjectRef.of(parent).namespaced_name
        self._index(key, frozenset(refs))
        try:
            return resolve_inputs(refs, self)
        finally:
            if self._alive is not None and not self._alive(key):
                self.forget(key)  # deleted while it was being reconciled
            else:  # a read may have started an informer a concurrent forget gave up
                self._release({self._scope(ref) for ref in refs})

    def versions_of(self, parent: KubeObject) -> str:
        """The ``resourceVersion``s of ``parent``'s inputs as the caches hold them now (the
        inputs part of a reused build's key, ``BuildMemo.inputs_key``; a selector's as the
        names and versions of what it matches); "-" for one missing or forbidden, "!" when the
        declaration itself fails (then the build fails too)."""
        try:
            refs = declared_refs(self.declare, parent)
        except Exception:  # the build reports it; such a build is never kept
            return "!"
        parts = []
        for ref in refs:
            if isinstance(ref, ClusterSelector):
                try:
                    secrets, _ = self._cluster_secrets()
                except KindUnlistableError:
                    return "!"
                matched = ";".join(f"{_name(obj)}@{_version(obj)}" for obj in secrets or ()
                                   if is_cluster_secret(obj) and ref.matches(_labels(obj)))
                parts.append(f"{ref}={matched if secrets is not None else '-'}")
                continue
            if isinstance(ref, SelectorRef):
                try:
                    objs, _ = self.select(ref)
                except KindUnlistableError:  # the build fails the same way: never kept
                    return "!"
                matched = ";".join(f"{_name(obj)}@{_version(obj)}" for obj in objs or ())
                parts.append(f"{ref}={matched if objs is not None else '-'}")
                continue
            obj, _ = self.read(ref)
            meta = (obj or {}).get("metadata") or {}
            parts.append(f"{ref}={meta.get('resourceVersion') or '-'}")
        return "|" + ",".join(parts)

    def clusters(self, selector: ClusterSelector) -> Clusters:
        """The clusters ``selector`` matches, from the informer on the clusters' Secrets (names
        and labels only), sorted by name; ``(None, True)`` when the Secrets may not be listed.
        An operator without clusters declaring one is an ``InputDeclarationError``."""
        secrets, refused = self._cluster_secrets()
        if secrets is None:
            return None, refused
        return clusters_of(secrets, selector), False

    def cluster_secrets(self) -> list[Mapping[str, Any]]:
        """The Secrets of the clusters' namespace (as selected), from the same informer: what
        the connections read the clusters from (``reconciler._client.clusters``), with no
        request. Raises ``ForbiddenError`` when they may not be listed, ``KindUnlistableError``
        when they do not list in time."""
        secrets, _ = self._cluster_secrets(held=True)
        if secrets is None:
            raise ForbiddenError(f"the cluster Secrets of {self._cluster_scope_text} may not be "
                                 f"listed")
        return secrets

    def secrets_reader(self) -> ClusterSecretsReader:
        """A ``ReadCache`` whose ``list`` of Secrets is :meth:`cluster_secrets` (what
        ``ClusterConnections`` reads the clusters from: no request)."""
        return ClusterSecretsReader(self)

    @property
    def _cluster_scope_text(self) -> str:
        return "" if self.clusters_from is None else self.clusters_from.namespace

    def _cluster_secrets(self, *, held: bool = False) -> Selected:
        scope = self._cluster_scope
        if scope is None:
            raise InputDeclarationError(
                "a ClusterSelector is declared but the operator has no clusters "
                "(Operator(clusters=ClusterSecrets(...)))")
        if held:  # the connections hold it for as long as the operator runs
            with self._lock:
                self._held_clusters = True
        informer = self._informer(scope)
        if not informer.has_synced:
            informer.wait_synced(self._sync_timeout, until_refused=True)
        if not informer.has_synced:
            if informer.list_refused is not None:
                return None, True
            raise KindUnlistableError(api_version="v1", kind="Secret", cause=(
                informer.list_error or TimeoutError(
                    f"not listed within {self._sync_timeout:g}s")))
        return sorted(informer.cache.list(namespace=scope[2]), key=_name_key), False

    def read(self, ref: ObjectRef) -> Read:
        """One reference from its informer's cache: ``(object or None, forbidden)``."""
        informer = self._informer(self._scope(ref))
        if not informer.has_synced:
            informer.wait_synced(self._sync_timeout, until_refused=True)
        if not informer.has_synced:
            return None, informer.list_refused is not None
        return informer.cache.get(ref.namespace, ref.name), False

    def select(self, selector: SelectorRef) -> Selected:
        """The objects ``selector`` matches in its informer's cache, sorted by namespace and
        name, or ``(None, True)`` when the kind's list is refused; a cache that does not sync
        within the timeout for another reason is a ``KindUnlistableError`` (retried: an empty
        list would tell the builders that nothing matches)."""
        informer = self._informer(self._scope(selector))
        if not informer.has_synced:
            informer.wait_synced(self._sync_timeout, until_refused=True)
        if not informer.has_synced:
            if informer.list_refused is not None:
                return None, True
            raise KindUnlistableError(
                api_version=selector.api_version, kind=selector.kind,
                cause=informer.list_error or TimeoutError(
                    f"not listed within {self._sync_timeout:g}s"))
        objs = informer.cache.list(namespace=selector.namespace,
                                   label_selector=selector.label_selector or None)
        return sorted(objs, key=_name_key), False

    def _scope(self, ref: InputRef) -> _Scope:
        """The informer that answers ``ref`` (a ``ClusterSelector``: the clusters' Secrets)."""
        if isinstance(ref, ClusterSelector):
            if self._cluster_scope is None:
                raise InputDeclarationError(
                    "a ClusterSelector is declared but the operator has no clusters "
                    "(Operator(clusters=ClusterSecrets(...)))")
            return self._cluster_scope
        return _scope_of(ref)

    def _matches(self, selector: SelectorRef | ClusterSelector, obj: Mapping[str, Any]) -> bool:
        if isinstance(selector, ClusterSelector):
            return is_cluster_secret(obj) and selector.matches(_labels(obj))
        return selector.matches(obj)

    def readers(self, ref: InputRef) -> set[ParentKey]:
        """The parents that read ``ref`` at their last reconcile."""
        with self._lock:
            return set(self._readers.get(ref, ()))

    @property
    def scopes(self) -> list[_Scope]:
        """The (apiVersion, kind, namespace, name) watched now, sorted (name ``""``: every
        object of the kind there)."""
        with self._lock:
            return sorted(self._informers)

    def informer(self, api_version: str, kind: str, namespace: str = "",
                 name: str = "") -> Informer | None:
        """The informer of a (kind, namespace) while one runs (``""``: cluster-wide; ``name``
        for a kind of ``BY_NAME``)."""
        with self._lock:
            return self._informers.get((api_version, kind, namespace, name))

    def forget(self, parent: ParentKey) -> None:
        """``parent`` reads nothing any more (it was deleted)."""
        self._index(parent, frozenset())

    def on_parent(self, event_type: str, old: Mapping[str, Any] | None,
                  new: Mapping[str, Any]) -> None:
        """The parent informer's handler: a deleted parent reads nothing any more."""
        if event_type == "DELETED":
            self.forget(ObjectRef.of(new).namespaced_name)

    def stop(self) -> None:
        """Let go of every input informer (stopping those nothing else holds); no trigger
        after this returns."""
        with self._lock:
            self._stopped = True
            self._informers = {}
        if self._own_pool:
            self._pool.stop()
        else:
            self._pool.release_all(self)

    # -- internals --------------------------------------------------------------------------

    def _index(self, parent: ParentKey, refs: frozenset[InputRef]) -> None:
        """``parent`` reads ``refs`` now; the informers of the scopes nobody reads any more
        are released."""
        with self._lock:
            before = self._reads.pop(parent, frozenset())
            for ref in before - refs:
                readers = self._readers.get(ref)
                if readers is not None:
                    readers.discard(parent)
                    if not readers:
                        del self._readers[ref]
                        self._in_scope[self._scope(ref)] -= 1
                        if isinstance(ref, SelectorRef | ClusterSelector):
                            self._selectors[self._scope(ref)].discard(ref)
            for ref in refs - before:
                if ref not in self._readers:
                    scope = self._scope(ref)
                    self._in_scope[scope] = self._in_scope.get(scope, 0) + 1
                self._readers.setdefault(ref, set()).add(parent)
                if isinstance(ref, SelectorRef | ClusterSelector):
                    self._selectors.setdefault(self._scope(ref), set()).add(ref)
            if refs:
                self._reads[parent] = refs
        self._release({self._scope(ref) for ref in before - refs})

    def _release(self, scopes: Iterable[_Scope]) -> None:
        """Stop and drop the informers of ``scopes`` that no parent reads."""
        with self._lock:
            unused = [scope for scope in scopes if not self._in_scope.get(scope)
                      and not (self._held_clusters and scope == self._cluster_scope)]
            for scope in unused:
                self._in_scope.pop(scope, None)
                self._selectors.pop(scope, None)
            held = [s for s in unused if self._informers.pop(s, None) is not None]
            self.released += len(held)
        for scope in held:
            self._pool.release(_pool_scope(scope), self, owner=self)

    def _informer(self, scope: _Scope) -> Informer:
        with self._lock:
            if self._stopped:
                raise ReconcilerUsageError("the operator's inputs are stopped")
            informer = self._informers.get(scope)
            if informer is not None:
                return informer
            # this watch is one holder of the scope, however many parents read it
            informer = self._informers[scope] = self._pool.acquire(
                _pool_scope(scope), self, owner=self)
        return informer

    def _changed(self, scope: _Scope, old: Mapping[str, Any] | None,
                 new: Mapping[str, Any]) -> None:
        """An input's event: queue the readers of the object and of every selector that matches
        it before or after, unless nothing but server metadata changed."""
        if old is not None and _version(old) == _version(new):
            return  # the same version again (a relist): no change
        with self._lock:
            selectors = [sel for sel in self._selectors.get(scope, ())
                         if self._matches(sel, new)
                         or (old is not None and self._matches(sel, old))]
        parents = self.readers(ObjectRef.of(new))
        for sel in selectors:
            parents |= self.readers(sel)
        self._trigger(parents)

    def _listed(self, scope: _Scope) -> None:
        """A refused (kind, namespace) lists now: every reader of it looks again."""
        with self._lock:
            refs = [ref for ref in self._readers if self._scope(ref) == scope]
        self._trigger({key for ref in refs for key in self.readers(ref)})

    def _trigger(self, parents: Iterable[ParentKey]) -> None:
        for key in sorted(parents):
            if self._alive is not None and not self._alive(key):
                self.forget(key)
                continue
            self.triggered += 1
            self._on_change(key)


class ClusterSecretsReader:
    """The clusters' Secrets as a ``ReadCache`` over an :class:`InputWatch`'s informer: a
    ``list`` of them answers from memory (whatever selector is passed: it is the informer's)."""

    from_memory = True

    def __init__(self, watch: InputWatch) -> None:
        self._watch = watch

    def get(self, api_version: str, kind: str, name: str, *,
            namespace: str | None = None) -> dict[str, Any] | None:
        """A cluster Secret by name."""
        found = [s for s in self._watch.cluster_secrets() if _name_key(s)[1] == name]
        return dict(found[0]) if found else None

    def list(self, api_version: str, kind: str, *, namespace: str | None = None,
             label_selector: str | None = None) -> list[dict[str, Any]]:
        """Every cluster Secret (as ``ClusterSecrets`` selects them)."""
        return [dict(s) for s in self._watch.cluster_secrets()]


_LABELLED = "-l "
"""The last part of an input scope listed with a label selector (the clusters' Secrets under
``ClusterSecrets(selector=...)``); no object name has a space."""


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}


def _scope_of(ref: ObjectRef | SelectorRef) -> _Scope:
    """The informer that answers ``ref``: its (kind, namespace), and its name for a kind of
    ``BY_NAME`` read by name."""
    name = ref.name if isinstance(ref, ObjectRef) and ref.kind in BY_NAME else ""
    return ref.api_version, ref.kind, ref.namespace or "", name


def _pool_scope(scope: _Scope) -> Scope:
    """The pool's scope of an input scope: a namespace ("" is every namespace), and a
    ``metadata.name`` field selector for a kind read by name."""
    api_version, kind, namespace, name = scope
    if name.startswith(_LABELLED):
        return Scope(api_version=api_version, kind=kind, namespace=namespace or None,
                     label_selector=name.removeprefix(_LABELLED))
    return Scope(api_version=api_version, kind=kind, namespace=namespace or None,
                 field_selector=f"metadata.name={name}" if name else None)


def _input_scope(scope: Scope) -> _Scope:
    """The input scope of a pool scope (the inverse of :func:`_pool_scope`)."""
    if scope.label_selector:
        return scope.api_version, scope.kind, scope.namespace or "", \
            _LABELLED + scope.label_selector
    name = (scope.field_selector or "").removeprefix("metadata.name=")
    return scope.api_version, scope.kind, scope.namespace or "", name


def _name_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _name(obj: Mapping[str, Any]) -> str:
    return "/".join(part for part in _name_key(obj) if part)


def _version(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("resourceVersion") or "") if isinstance(meta, Mapping) else ""
