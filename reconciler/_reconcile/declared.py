"""The children a parent declares: its builders evaluated once, the same way for every caller.

Seven places need what a parent's builders build: the reconcile (``reconciler._reconcile.parents``),
the warm start and the drift look at start (``reconciler._driver.standby``), the adoption of a
moved-in parent's children (``reconciler._sharding.shards``), ``optk trace``
(``reconciler._commands.traces``), the role ``optk manifests`` derives
(``reconciler._commands.rbac``) and ``optk uninstall`` (``reconciler._commands.uninstall``). Each
used to evaluate the builders itself, and the copies drifted apart (one indexed what a builder
returned directly, and an official client model such as ``V1ConfigMap`` broke it; sharding wrapped
every builder to add its label and hid the builders' components, so every gate was lost; the
trace keyed a cluster-scoped child under its parent's namespace). Labels a caller needs on every
child (the shard label) are an argument here. ``tests/test_architecture.py`` checks that no other
module of ``reconciler`` flattens, runs or unwraps builders.

Here is the one evaluation: :func:`declared_children` runs ``build`` over a private copy of the
parent, evaluates every builder with ``builders.composition.evaluate`` (client models converted,
identity checked, failures named after the builder), stamps the identity of DESIGN.md section 5
with ``builders.names.stamp_identity`` (and the caller's labels) and returns a
:class:`DeclaredChildren` value: the children in order, each with its component node, and every
builder that failed without stopping the others.

Boundary: a pure decision, like ``reconciler._reconcile.planning``. No client and no I/O: whether a
kind is namespaced comes from the caller as a callable (the reconcile asks its client's discovery; a
caller with no cluster to ask passes :func:`unknown_scope`); for a kind it does not know, a CRD
among the same parent's children says (:func:`declared_scopes`: a chart's CRDs and custom
resources, created in one reconcile before discovery serves the kind). What to do with a
failure is the caller's: the reconcile reports each one on the parent, the warm start and the
drift look skip them, the role derivation refuses or skips the parent, uninstall logs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from builders import BuilderFailedError, DesiredState, KubeObject, ObjectRef
from builders.composition import (
    Dependencies,
    dependencies_of,
    dependency_graph,
    evaluate,
    placement_of,
)
from builders.convert import is_client_model, to_plain_object
from builders.names import stamp_identity
from builders.objects import copy_object
from reconciler._reconcile.sharing import (
    OWNER_ANNOTATION,
    describe_parent,
    is_shared,
    wants_shared,
)

__all__ = [
    "BuilderFailure",
    "DeclaredChild",
    "DeclaredChildren",
    "Namespaced",
    "PlacedNamespaced",
    "declared_children",
    "declared_scopes",
    "stamp_child",
    "unknown_scope",
]

Namespaced = Callable[[str, str], bool | None]
"""``namespaced(api_version, kind)``: whether the kind is namespaced; None when it is not known
(not served, or no cluster to ask): then the scope a CRD among the parent's own children
declares for it, else a child is namespaced when it or its parent names a namespace."""

PlacedNamespaced = Callable[[str, str, str], bool | None]
"""``namespaced(cluster, api_version, kind)``: :data:`Namespaced` asked of the cluster a placed
child goes to (``builders.placed``): a kind only that cluster serves has its scope there."""


def declared_scopes(objects: Iterable[KubeObject]) -> dict[tuple[str, str], bool]:
    """``(group, kind) -> namespaced`` for each CustomResourceDefinition among ``objects``:
    the scope of a kind whose CRD the same parent creates, before discovery serves it (a chart's
    ``crds/`` and its custom resources, built in one reconcile)."""
    scopes: dict[tuple[str, str], bool] = {}
    for obj in objects:
        if obj.get("kind") != "CustomResourceDefinition":
            continue
        spec = obj.get("spec")
        if not isinstance(spec, Mapping):
            continue
        names = spec.get("names")
        if isinstance(names, Mapping) and spec.get("group") and names.get("kind"):
            scopes[(str(spec["group"]), str(names["kind"]))] = spec.get("scope") != "Cluster"
    return scopes


def _in_cluster(placed: PlacedNamespaced, cluster: str, home: Namespaced) -> Namespaced:
    """The scope of a kind in ``cluster``; the home cluster's answer when that cluster does not
    know the kind either (it cannot be reached, or does not serve it yet)."""

    def scoped(api_version: str, kind: str) -> bool | None:
        known = placed(cluster, api_version, kind)
        return home(api_version, kind) if known is None else known

    return scoped


def _with_declared(namespaced: Namespaced, scopes: Mapping[tuple[str, str], bool]) -> Namespaced:
    if not scopes:
        return namespaced

    def scoped(api_version: str, kind: str) -> bool | None:
        known = namespaced(api_version, kind)
        if known is not None:
            return known
        return scopes.get((api_version.rpartition("/")[0], kind))

    return scoped


def unknown_scope(api_version: str, kind: str) -> bool | None:
    """A :data:`Namespaced` lookup that knows no kind (for callers that need only the children's
    types and names, with no cluster to ask or none worth asking)."""
    del api_version, kind
    return None


@attrs.frozen(kw_only=True)
class DeclaredChild:
    """One evaluated child: its key, the object with its identity stamped, its desired state,
    the component node it belongs to (``builders.Component``; None for none) and the cluster
    it is placed in (``builders.placed``; None: the operator's own cluster)."""

    ref: ObjectRef
    obj: dict[str, Any]
    state: DesiredState
    node: Dependencies | None = None
    cluster: str | None = None


@attrs.frozen(kw_only=True)
class BuilderFailure:
    """A builder that declared no child: its name (``BuilderFailedError.builder``, or ``#<index>``
    when it failed after running, e.g. while its identity was stamped), its index in what
    ``build`` returned, and the exception."""

    name: str
    index: int
    error: Exception


@attrs.frozen(kw_only=True)
class DeclaredChildren:
    """What :func:`declared_children` found: the children in the builders' order, the builders
    that failed, and ``build_error`` when ``build(parent)`` itself raised (then nothing else).
    ``children`` are those of the operator's own cluster; ``placed`` those placed in other
    clusters (``builders.placed``, each with its ``cluster``), apart so that the callers that
    read or list the home cluster (the warm start, the drift look, trace, roles, uninstall)
    never mistake them for home children (only the reconcile writes them:
    ``reconciler._reconcile.placement``)."""

    children: tuple[DeclaredChild, ...] = ()
    placed: tuple[DeclaredChild, ...] = ()
    failures: tuple[BuilderFailure, ...] = ()
    build_error: Exception | None = None

    @property
    def failed(self) -> bool:
        """Whether ``build`` or any builder failed (so the children may be incomplete)."""
        return self.build_error is not None or bool(self.failures)

    @property
    def errors(self) -> tuple[Exception, ...]:
        """Every failure's exception: ``build``'s own first, then the builders' in order."""
        head = () if self.build_error is None else (self.build_error,)
        return (*head, *(failure.error for failure in self.failures))

    @property
    def types(self) -> set[tuple[str, str]]:
        """The children's ``(apiVersion, kind)`` pairs."""
        return {child.ref.type_key for child in self.children}


def stamp_child(
    parent: KubeObject, obj: KubeObject, state: DesiredState, *, operator_name: str,
    namespaced: Namespaced, labels: Mapping[str, str] | None = None, placed: bool = False,
) -> dict[str, Any]:
    """``obj`` (a dict or an official client model) as a new dict with the namespace, labels and
    controller owner reference of DESIGN.md section 5, as ``builders.stamp_identity`` decides
    them; an unknown kind's scope is taken from the child's or the parent's namespace.
    ``labels`` are set as if the builder had set them (over the builder's own, under the
    identity's; not on an ABSENT child, which needs only its name): the driver's shard label,
    ``optk.dev/shard``, when sharded. A child with no owner reference (another namespace,
    cluster-scoped) names its parent in the ``optk.dev/owner`` annotation; a shared one
    (``builders.shared``) loses the per-parent owner and instance labels and owner reference
    (``reconciler._reconcile.sharing``). A ``placed`` child (in another cluster,
    ``builders.placed``) gets no owner reference either: owner references do not cross
    clusters; its owner-uid label and the annotation name its parent, and the parent's
    inventory records it (``reconciler._reconcile.placement``)."""
    child = to_plain_object(obj) if is_client_model(obj) else dict(obj)
    if labels and not state.is_absent:
        meta = dict(child.get("metadata") or {})
        meta["labels"] = {**(meta.get("labels") or {}), **labels}
        child["metadata"] = meta
    ref = ObjectRef.of(child)
    scoped = namespaced(ref.api_version, ref.kind)
    if scoped is None:
        parent_meta = parent.get("metadata")
        parent_namespace = (parent_meta.get("namespace") if isinstance(parent_meta, Mapping)
                            else None)
        scoped = bool(ref.namespace or parent_namespace)
    stamped = stamp_identity(parent, child, operator_name=operator_name, namespaced=scoped,
                             absent=state.is_absent)
    if state.is_absent:
        return stamped
    parent_meta = parent.get("metadata")
    parent_namespace = parent_meta.get("namespace") if isinstance(parent_meta, Mapping) else None
    shared = is_shared(stamped)
    if placed:
        meta = {k: v for k, v in stamped["metadata"].items() if k != "ownerReferences"}
        stamped = {**stamped, "metadata": meta}
    elif shared:
        stamped = wants_shared(stamped)
    elif not parent_namespace or stamped["metadata"].get("namespace") == parent_namespace:
        return stamped  # an owner reference names the parent
    # no owner reference: the parent is named for people (sharing.OWNER_ANNOTATION)
    meta = dict(stamped["metadata"])
    meta["annotations"] = {**(meta.get("annotations") or {}),
                           OWNER_ANNOTATION: describe_parent(parent)}
    return {**stamped, "metadata": meta}


def declared_children(
    build: Callable[[KubeObject], Iterable[Any]], parent: KubeObject, *, operator_name: str,
    namespaced: Namespaced, labels: Mapping[str, str] | None = None,
    placed_namespaced: PlacedNamespaced | None = None,
) -> DeclaredChildren:
    """Evaluate ``build(parent)``'s builders in order into stamped children; never raises for a
    failing ``build`` or builder (see :class:`DeclaredChildren`).

    ``build`` and its builders get a private copy of ``parent`` (a dict or an official client
    model, converted), so a builder that edits its parent in place changes nothing outside;
    identity is stamped from ``parent`` as given. ``operator_name`` fills the ``managed-by``
    label; ``namespaced`` says which kinds are namespaced (:data:`Namespaced`), and
    ``placed_namespaced`` which are in the cluster a placed child goes to (without it, or when
    that cluster cannot say, ``namespaced`` answers for it too); ``labels`` go on every child
    besides its identity (the shard label of a sharded operator: a caller adds labels here,
    never by wrapping the builders, which would hide their components' gates).
    """
    plain = to_plain_object(parent) if is_client_model(parent) else parent
    private = copy_object(plain)
    try:
        builders = list(build(private))
        dependency_graph(builders)  # a cycle fails the whole build, naming it
    except Exception as exc:
        return DeclaredChildren(build_error=exc)
    children: list[DeclaredChild] = []
    placed: list[DeclaredChild] = []
    failures: list[BuilderFailure] = []
    built: list[tuple[int, Any, dict[str, Any], DesiredState]] = []
    for index, builder in enumerate(builders):
        try:
            # evaluate() converts client models, checks identity, and names the builder and
            # the parent in the BuilderFailedError it raises.
            obj, state = evaluate(builder, parent=private)
        except Exception as exc:
            name = exc.builder if isinstance(exc, BuilderFailedError) else f"#{index}"
            failures.append(BuilderFailure(name=name, index=index, error=exc))
            continue
        built.append((index, builder, obj, state))
    scopes = declared_scopes(obj for _, _, obj, state in built if not state.is_absent)
    scoped = _with_declared(namespaced, scopes)
    for index, builder, obj, state in built:
        try:
            cluster = placement_of(builder)
            child = stamp_child(
                plain, obj, state, operator_name=operator_name, labels=labels,
                namespaced=scoped if cluster is None or placed_namespaced is None else
                _with_declared(_in_cluster(placed_namespaced, cluster, namespaced), scopes),
                placed=cluster is not None)
        except Exception as exc:
            name = exc.builder if isinstance(exc, BuilderFailedError) else f"#{index}"
            failures.append(BuilderFailure(name=name, index=index, error=exc))
            continue
        (children if cluster is None else placed).append(DeclaredChild(
            ref=ObjectRef.of(child), obj=child, state=state, node=dependencies_of(builder),
            cluster=cluster))
    failures.sort(key=lambda failure: failure.index)
    return DeclaredChildren(children=tuple(children), placed=tuple(placed),
                            failures=tuple(failures))
