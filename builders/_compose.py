"""Making and combining builders: bind pure functions of the parent, compose, switch, repeat.

An operator is a function ``build(parent) -> list[ResourceBuilder]``. This module provides the
pieces that keep such functions free of boilerplate: :func:`resource_builder` binds a pure
function of the parent (and config) into a builder, :func:`compose` flattens builder lists and
components, :func:`present_if` turns a builder into an ABSENT stub of the same identity when a
condition is false, :func:`for_each` repeats one, and :class:`Component` names an ordered list.
:func:`run_builders` evaluates builders into ``(dict, DesiredState)`` pairs, converting client
models and turning every failure into a :class:`BuilderFailedError` naming the builder and the
parent.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, ClassVar, Concatenate, ParamSpec, TypeAlias

import attrs

from builders._convert import to_plain_object
from builders._dependencies import (
    Dependencies,
    GatedBuilder,
    Precondition,
    ReadyRule,
    dependencies_of,
    dependency_graph,
)
from builders._errors import BuilderFailedError
from builders._identity import identity_of
from builders._names import SHARED_LABEL
from builders._state import DesiredState, KubeObject

__all__ = [
    "Builders",
    "Component",
    "ResourceBuilder",
    "WrappingBuilder",
    "absent",
    "absent_stub",
    "builder_name",
    "compose",
    "describe_parent",
    "evaluate",
    "for_each",
    "placed",
    "placement_of",
    "present_if",
    "resource_builder",
    "run_builders",
    "shared",
]

P = ParamSpec("P")

ResourceBuilder: TypeAlias = Callable[[], tuple[KubeObject, DesiredState]]
"""A pure, zero-argument callable returning one object and the state it should be in."""

Builders: TypeAlias = "ResourceBuilder | Component | Iterable[Builders] | None"
"""What :func:`compose` accepts: builders, components, nested iterables of them, or None."""


def builder_name(builder: object) -> str:
    """A readable name for a builder: its own ``name``, or the function's qualified name."""
    name = getattr(builder, "name", None)
    if isinstance(name, str):
        return name
    return str(getattr(builder, "__qualname__", None) or repr(builder))


def describe_parent(parent: KubeObject | None) -> str | None:
    """``Kind namespace/name`` of a parent for messages, or None when there is none."""
    if parent is None:
        return None
    meta = parent.get("metadata") if isinstance(parent, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name", "?")
    namespace = meta.get("namespace")
    where = f"{namespace}/{name}" if namespace else str(name)
    return f"{parent.get('kind', '?')} {where}"


def absent_stub(obj: KubeObject) -> dict[str, Any]:
    """The identity of ``obj`` only (apiVersion, kind, name, namespace): what ABSENT needs."""
    ref = identity_of(obj)
    meta: dict[str, Any] = {"name": ref.name}
    if ref.namespace is not None:
        meta["namespace"] = ref.namespace
    return {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": meta}


def _normalize(result: Any) -> tuple[dict[str, Any], DesiredState]:
    if isinstance(result, tuple):
        if len(result) != 2 or not isinstance(result[1], DesiredState):
            raise TypeError(
                f"a builder returns an object or (object, DesiredState), got a tuple {result!r}"
            )
        obj, state = result
    else:
        obj, state = result, DesiredState.PRESENT
    plain = to_plain_object(obj)
    identity_of(plain)
    return plain, state


def evaluate(
    builder: ResourceBuilder | Callable[[], Any], *, parent: KubeObject | None = None
) -> tuple[dict[str, Any], DesiredState]:
    """Run one builder: a fresh plain dict and its state, or a BuilderFailedError.

    The builder may return an object or ``(object, DesiredState)``; objects may be dicts or
    official client models. A builder that raises, or returns something without identity
    (apiVersion, kind, metadata.name), yields BuilderFailedError naming the builder and ``parent``
    (or the parent the builder was bound to), with the original error as its cause.
    """
    bound_parent = getattr(builder, "parent", None)
    if parent is None and isinstance(bound_parent, Mapping):
        parent = bound_parent
    try:
        return _normalize(builder())
    except BuilderFailedError:
        raise
    except Exception as exc:
        raise BuilderFailedError(
            builder=builder_name(builder),
            parent=describe_parent(parent),
            reason=f"{type(exc).__name__}: {exc}",
        ) from exc


def run_builders(
    builders: Builders, *, parent: KubeObject | None = None
) -> list[tuple[dict[str, Any], DesiredState]]:
    """Evaluate every builder of ``builders`` (flattened as by :func:`compose`), in order."""
    return [evaluate(b, parent=parent) for b in compose(builders)]


@attrs.frozen(kw_only=True, eq=False)
class BoundBuilder:
    """A pure function bound to its parent and arguments: a :data:`ResourceBuilder`.

    Made by :func:`resource_builder`; calling it runs the function and normalizes its result.
    """

    function: Callable[..., Any]
    """The decorated function."""
    parent: KubeObject
    """The parent the function is called with (first argument)."""
    args: tuple[Any, ...] = ()
    """Further positional arguments."""
    kwargs: Mapping[str, Any] = attrs.field(factory=dict)
    """Keyword arguments (for example the operator's config)."""

    @property
    def name(self) -> str:
        """The function's qualified name (used in BuilderFailedError messages)."""
        return builder_name(self.function)

    def __call__(self) -> tuple[KubeObject, DesiredState]:
        """Build: ``(object, state)`` as a fresh dict, or a BuilderFailedError."""
        try:
            return _normalize(self.function(self.parent, *self.args, **self.kwargs))
        except BuilderFailedError:
            raise
        except Exception as exc:
            raise BuilderFailedError(
                builder=self.name,
                parent=describe_parent(self.parent),
                reason=f"{type(exc).__name__}: {exc}",
            ) from exc

    def __repr__(self) -> str:
        return f"<builder {self.name} of {describe_parent(self.parent)}>"


def resource_builder(
    function: Callable[Concatenate[KubeObject, P], Any],
) -> Callable[Concatenate[KubeObject, P], ResourceBuilder]:
    """Decorator: a pure ``function(parent, *args, **kwargs)`` becomes a factory of builders.

    The function returns an object (dict or client model; the state is then PRESENT) or
    ``(object, DesiredState)``. Calling the decorated name with the parent (and config) does not
    build anything yet; it returns a :data:`ResourceBuilder` that does, naming the function and
    the parent in any BuilderFailedError::

        @resource_builder
        def config(parent, settings):
            return config_map(metadata=..., data=settings)

        builders = [config(parent, settings)]
    """

    @functools.wraps(function)
    def bind(parent: KubeObject, /, *args: P.args, **kwargs: P.kwargs) -> ResourceBuilder:
        return BoundBuilder(function=function, parent=parent, args=args, kwargs=kwargs)

    return bind


def _flat_tuple(items: Builders) -> tuple[ResourceBuilder, ...]:
    return tuple(compose(items))


def _dependency_names(value: str | Iterable[str]) -> tuple[str, ...]:
    return Dependencies(name="-", depends_on=value).depends_on


@attrs.frozen(kw_only=True)
class Component:
    """A named, ordered list of builders (for example ``query``: its Deployment and Service),
    and one node of the parent's dependency graph (``builders._dependencies``).

    ``depends_on`` names the components that must be ready before this one's children are
    created or updated (and that are torn down only after they are gone); ``ready_when`` says
    when one of this component's live children is ready (default: the health rule of its kind);
    ``precondition(parent, observed)`` holds this component back until it is true of the parent
    and the live children of its dependencies (by component name); ``when_served`` builds it
    only while the kinds it builds are served. Its builders carry all this to the reconciler
    (they are :class:`~builders._dependencies.GatedBuilder` values); a builder that already
    belongs to an inner component stays in that one. :func:`compose` refuses a cycle.
    """

    name: str
    """The component's name (also what ``app.kubernetes.io/component`` usually says)."""
    builders: tuple[ResourceBuilder, ...] = attrs.field(default=(), converter=_flat_tuple)
    """The builders, flattened, in order (each carrying this component's node)."""
    depends_on: tuple[str, ...] = attrs.field(default=(), converter=_dependency_names)
    """The components this one waits for (by name)."""
    ready_when: ReadyRule | None = None
    """When one of its live children is ready; None: the default health rule of its kind."""
    precondition: Precondition | None = None
    """Built only while this holds of ``(parent, observed dependencies)``; None: always."""
    when_served: bool = False
    """Built only while every kind it builds is served."""

    def __attrs_post_init__(self) -> None:
        node = self.node
        gated = tuple(b if dependencies_of(b) is not None else GatedBuilder(builder=b, node=node)
                      for b in self.builders)
        object.__setattr__(self, "builders", gated)
        dependency_graph(gated)  # a cycle inside one component's builders is refused here

    @property
    def node(self) -> Dependencies:
        """This component as a node of the dependency graph."""
        return Dependencies(name=self.name, depends_on=self.depends_on,
                            ready_when=self.ready_when, precondition=self.precondition,
                            when_served=self.when_served)

    def __iter__(self) -> Iterator[ResourceBuilder]:
        """Iterate over the builders in order."""
        return iter(self.builders)

    def __len__(self) -> int:
        """How many builders the component has."""
        return len(self.builders)


def compose(*items: Builders) -> list[ResourceBuilder]:
    """One flat, ordered list from builders, components, nested lists of them and Nones.

    Components' dependencies travel with their builders; a cycle among them is refused with
    :class:`~builders.DependencyCycleError` naming it (a ``depends_on`` naming a component not
    among ``items`` is left for the reconciler, which reports the dependent as waiting).
    """
    flat = _flatten(items)
    dependency_graph(flat)
    return flat


def _flatten(items: Iterable[Builders]) -> list[ResourceBuilder]:
    flat: list[ResourceBuilder] = []
    for item in items:
        if item is None:
            continue
        if isinstance(item, Component):
            flat.extend(item.builders)
        elif callable(item):
            flat.append(item)
        elif isinstance(item, Iterable) and not isinstance(item, str | bytes | Mapping):
            flat.extend(_flatten(item))
        else:
            raise TypeError(f"compose: expected builders, components or lists, got {item!r}")
    return flat


class WrappingBuilder:
    """Base of builders derived from another one: their name and parent come from it."""

    builder: ResourceBuilder | None
    wrapper_label: ClassVar[str] = "wrapped"

    @property
    def name(self) -> str:
        """``label(inner builder name)``, as BuilderFailedError messages show it."""
        inner = builder_name(self.builder) if self.builder is not None else "identity"
        return f"{self.wrapper_label}({inner})"

    @property
    def parent(self) -> KubeObject | None:
        """The parent the inner builder was bound to, if any."""
        return getattr(self.builder, "parent", None)


@attrs.frozen(kw_only=True, eq=False)
class _AbsentInstead(WrappingBuilder):
    """The ABSENT stub of another builder's identity (what :func:`present_if` returns if false)."""

    wrapper_label: ClassVar[str] = "present_if"
    builder: ResourceBuilder | None
    identity: KubeObject | None
    state: DesiredState

    def __call__(self) -> tuple[KubeObject, DesiredState]:
        if self.identity is not None:
            return absent_stub(to_plain_object(self.identity)), self.state
        assert self.builder is not None
        obj, _ = evaluate(self.builder)
        return absent_stub(obj), self.state


def present_if(
    condition: bool,
    builder: ResourceBuilder,
    *,
    identity: KubeObject | None = None,
    absent_state: DesiredState = DesiredState.ABSENT,
) -> ResourceBuilder:
    """``builder`` when ``condition`` holds, else a builder of its ABSENT identity stub.

    The stub carries identity only (apiVersion, kind, metadata name and namespace). It is taken
    from ``identity`` when given (use that when the builder cannot run without the switched-off
    config), otherwise from running ``builder``. ``absent_state`` may carry delete hooks.
    """
    if not absent_state.is_absent:
        raise ValueError(f"present_if: absent_state must be ABSENT, got {absent_state!r}")
    if condition:
        return builder
    return _AbsentInstead(builder=builder, identity=identity, state=absent_state)


@attrs.frozen(kw_only=True, eq=False)
class _Shared(WrappingBuilder):
    """Another builder's object marked shared (what :func:`shared` returns)."""

    wrapper_label: ClassVar[str] = "shared"
    builder: ResourceBuilder

    def __call__(self) -> tuple[KubeObject, DesiredState]:
        obj, state = evaluate(self.builder)
        meta = dict(obj.get("metadata") or {})
        meta["labels"] = {**(meta.get("labels") or {}), SHARED_LABEL: "true"}
        return {**obj, "metadata": meta}, state


def shared(builder: ResourceBuilder) -> ResourceBuilder:
    """``builder`` with its child declared shared: several parents may build the same object
    (a CRD, a ClusterRole), and it is kept while any of them builds it.

    The object gets the label ``optk.dev/shared: "true"`` and, from the reconciler, no
    ``optk.dev/owner-uid`` or ``app.kubernetes.io/instance`` label and no owner reference: the
    parents that build it are recorded on it instead (the ``optk.dev/shared-by`` annotation),
    and it is deleted only with the last of them (docs/builders.md, "Shared children"). Without
    it a cluster-scoped child belongs to the one parent its owner label names, and another
    parent that builds it skips it and names that parent.
    """
    if not callable(builder):
        raise TypeError(f"shared: builder must be callable, got {builder!r}")
    return _Shared(builder=builder)


@attrs.frozen(kw_only=True, eq=False)
class _Placed(WrappingBuilder):
    """Another builder's child, placed in the cluster named ``cluster`` (what :func:`placed`
    returns). The object is the inner builder's, unchanged: the placement travels on the
    builder, never on the object, so nothing of it is written to any cluster."""

    wrapper_label: ClassVar[str] = "placed"
    builder: ResourceBuilder
    cluster: str

    def __call__(self) -> tuple[KubeObject, DesiredState]:
        return evaluate(self.builder)


def placed(builder: ResourceBuilder, *, cluster: str) -> ResourceBuilder:
    """``builder`` with its child placed in another cluster, the one named ``cluster`` (a
    cluster of the operator's ``ClusterSecrets``: the name of its Secret); everything else
    about the child (its state, its identity, its labels) is as ``builder`` builds it. The
    reconciler applies it through that cluster's client, with no owner reference (they do not
    cross clusters): docs/clusters.md. Placing an already placed builder again moves it."""
    if not callable(builder):
        raise TypeError(f"placed: builder must be callable, got {builder!r}")
    if not isinstance(cluster, str) or not cluster:
        raise ValueError(f"placed: cluster must be a non-empty cluster name, got {cluster!r}")
    inner = builder.builder if isinstance(builder, _Placed) else builder
    return _Placed(builder=inner, cluster=cluster)


def placement_of(builder: object) -> str | None:
    """The cluster ``builder``'s child is placed in (:func:`placed`), or None for the
    operator's own cluster. Looks through the wrappers the composition adds (a component's
    ``GatedBuilder``, ``shared``, ``present_if``): the outermost placement wins."""
    seen = 0
    while builder is not None and seen < 32:  # wrappers nest a few deep; never a cycle
        if isinstance(builder, _Placed):
            return builder.cluster
        builder = getattr(builder, "builder", None)
        seen += 1
    return None


def absent(
    api_version: str, kind: str, *, name: str, namespace: str | None = None
) -> ResourceBuilder:
    """A builder of the ABSENT stub with this identity (an object that must not exist)."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    stub = {"apiVersion": api_version, "kind": kind, "metadata": meta}
    return _AbsentInstead(builder=None, identity=stub, state=DesiredState.ABSENT)


def for_each(items: Iterable[Any], builder: Callable[[Any], Builders]) -> list[ResourceBuilder]:
    """``builder(item)`` for every item, flattened: one builder (or list of them) per item."""
    if not callable(builder):
        raise TypeError(f"for_each: builder must be callable, got {builder!r}")
    return compose(*(builder(item) for item in items))
