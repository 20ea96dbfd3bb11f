"""Helm charts as builders: a chart rendered by Helm's own engine, one builder per object.

:func:`chart` renders a chart (a directory or a ``.tgz``) with values computed from the parent,
through Helm's Go code (``helm-python-sdk``: Helm v4's chart loader and template engine behind a
C ABI, loaded with ``ctypes``; the ``helm`` extra), splits the output into objects and returns
a :class:`Chart`: the builders of ``crds/`` (a component of their own, created first and never
updated, as Helm does), of the ``pre-install``/``pre-upgrade`` hooks (a component the rest
depends on, created once) and of the other objects (the chart's own component, PRESENT), each
a plain :data:`~builders.ResourceBuilder` that returns a fresh copy. Iterating a
:class:`Chart` gives those three components, so a chart goes anywhere builders go;
:meth:`Chart.components` names the last one and adds ``depends_on``/``ready_when``;
:meth:`Chart.with_overrides` puts strategic-merge overrides on top of chosen objects.

The rendering is cached by (chart digest, values digest, release, namespace, capabilities): a
resync of an unchanged parent renders nothing (:func:`cache_info` counts). A failing render is
cached too, so it is not retried hot; its :class:`~builders.ChartRenderError` names the chart,
the template and the line.

Boundary: pure as builders are (the chart's files are read, nothing else; ``lookup`` finds
nothing, as in ``helm template``). Applying, ordering, readiness and pruning are the
reconciler's, as for any builder. No Helm release is stored: the parent is the release.

What the rendered text becomes (which object goes in which group, namespaces, hooks, the
install order) is ``builders._chart_objects``'.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from builders._chart_objects import (
    CHART_ANNOTATION,
    CLUSTER_SCOPED_KINDS,
    HOOK_ANNOTATION,
    INSTALL_ORDER,
    KEEP_ANNOTATION,
    TEMPLATE_ANNOTATION,
    ChartObject,
    Rendering,
    hook_done,
    split_rendering,
)
from builders._compose import Component, ResourceBuilder, compose
from builders._dependencies import Precondition, ReadyRule
from builders._errors import (
    ChartError,
    ChartLoadError,
    ChartRenderError,
    HelmEngineMissingError,
    InvalidSpecError,
)
from builders._identity import stamp_identity
from builders._overrides import with_overrides
from builders._state import KubeObject

__all__ = [
    "CHART_ANNOTATION",
    "CLUSTER_SCOPED_KINDS",
    "HOOK_ANNOTATION",
    "INSTALL_ORDER",
    "KEEP_ANNOTATION",
    "TEMPLATE_ANNOTATION",
    "CacheInfo",
    "Chart",
    "ChartObject",
    "cache_info",
    "chart",
    "clear_cache",
    "engine_version",
    "hook_done",
]

_WHERE = re.compile(r"\(([^():\s]+):(\d+)(?::\d+)?\)")
"""Where Helm's template errors point: ``(mychart/templates/x.yaml:7:8)``."""
_MAX_CACHED = 256


def _component_names(value: str | Iterable[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


@attrs.frozen(kw_only=True, eq=False)
class Chart:
    """A rendered chart: its builders in three groups, and the components they form.

    Iterating gives :meth:`components` with their defaults: ``<release>-crds`` (the ``crds/``
    objects), ``<release>-hooks`` (the ``pre-install``/``pre-upgrade`` hooks, after the CRDs)
    and ``<release>`` (everything else, after both); a group that is empty is left out, and so
    is the dependency on it.
    """

    chart: str
    """The chart's ``name-version``."""
    release: str
    """The release name the chart was rendered with (``.Release.Name``)."""
    namespace: str
    """The release namespace (``.Release.Namespace``); namespaced objects are put there."""
    crds: tuple[ResourceBuilder, ...]
    """The builders of the ``crds/`` objects (CREATED: created once, never updated)."""
    hooks: tuple[ResourceBuilder, ...]
    """The builders of the ``pre-install``/``pre-upgrade`` hooks, by weight (CREATED)."""
    objects: tuple[ResourceBuilder, ...]
    """The builders of the other objects, in Helm's install order (PRESENT)."""

    @property
    def crds_component(self) -> str:
        """The name of the CRDs' component: ``<release>-crds``."""
        return f"{self.release}-crds"

    @property
    def hooks_component(self) -> str:
        """The name of the hooks' component: ``<release>-hooks``."""
        return f"{self.release}-hooks"

    def components(
        self,
        name: str | None = None,
        *,
        depends_on: str | Iterable[str] = (),
        ready_when: ReadyRule | None = None,
        precondition: Precondition | None = None,
        when_served: bool = False,
    ) -> list[Component]:
        """The chart's components: the CRDs', the hooks' (after the CRDs and ``depends_on``;
        ready by :func:`hook_done`: a Job once complete, as Helm waits) and the objects'
        (``name``, default the release; after the CRDs, the hooks and ``depends_on``; ready by
        ``ready_when``, else each kind's health rule; built while ``precondition`` holds and,
        with ``when_served``, only while the kinds it builds are served). Empty groups are
        left out."""
        outside = _component_names(depends_on)
        found: list[Component] = []
        before: list[str] = []
        if self.crds:
            found.append(Component(name=self.crds_component, builders=self.crds))
            before.append(self.crds_component)
        if self.hooks:
            found.append(Component(name=self.hooks_component, builders=self.hooks,
                                   depends_on=(*before, *outside), ready_when=hook_done,
                                   precondition=precondition))
            before.append(self.hooks_component)
        if self.objects:
            found.append(Component(name=name or self.release, builders=self.objects,
                                   depends_on=(*before, *outside), ready_when=ready_when,
                                   precondition=precondition, when_served=when_served))
        return found

    def with_overrides(self, patches: Mapping[str, Mapping[str, Any] | None]) -> Chart:
        """This chart with ``patches`` merged onto chosen objects (``builders.overrides``: a
        strategic merge for built-in kinds), keyed by ``Kind/name`` (``Deployment/op``); a key
        that names no rendered object raises :class:`~builders.ChartError`."""
        wanted = dict(patches)
        groups = []
        for group in (self.crds, self.hooks, self.objects):
            replaced = []
            for builder in group:
                key = f"{getattr(builder, 'kind', '')}/{getattr(builder, 'object_name', '')}"
                patch = wanted.pop(key, None)
                replaced.append(builder if patch is None else with_overrides(builder, patch))
            groups.append(tuple(replaced))
        if wanted:
            raise ChartError(f"overrides name objects the chart does not render: "
                             f"{sorted(wanted)}", chart=self.chart)
        return attrs.evolve(self, crds=groups[0], hooks=groups[1], objects=groups[2])

    def __iter__(self) -> Iterator[ResourceBuilder]:
        """The builders of :meth:`components`, in order."""
        return iter(compose(self.components()))

    def __len__(self) -> int:
        """How many objects the chart renders (CRDs and hooks included)."""
        return len(self.crds) + len(self.hooks) + len(self.objects)


@attrs.frozen
class CacheInfo:
    """What the render cache did since the process started (or :func:`clear_cache`)."""

    hits: int
    """Calls answered from the cache (nothing rendered)."""
    renders: int
    """Calls that ran Helm's engine."""
    size: int
    """Renderings held now (at most 256, least recently used dropped)."""


_lock = threading.Lock()
_cache: OrderedDict[tuple[Any, ...], Rendering] = OrderedDict()
_digests: dict[tuple[Any, ...], str] = {}
_counts = {"hits": 0, "renders": 0}


def cache_info() -> CacheInfo:
    """The render cache's hits, renders and size."""
    with _lock:
        return CacheInfo(hits=_counts["hits"], renders=_counts["renders"], size=len(_cache))


def clear_cache() -> None:
    """Forget every rendering and reset the counts (tests and benchmarks)."""
    with _lock:
        _cache.clear()
        _digests.clear()
        _counts.update(hits=0, renders=0)


def engine_version() -> str:
    """Helm's version inside the engine (``v4.2.3``); HelmEngineMissingError without it."""
    return str(_engine("helm").helm_sdk_version())


def _engine(chart_name: str) -> Any:
    try:
        import helm_python
    except ImportError as exc:
        raise HelmEngineMissingError(
            f"Helm's engine is not installed ({exc}): pip install 'operator-toolkit[helm]' "
            f"(helm-python-sdk)", chart=chart_name) from exc
    return helm_python


def _source_digest(path: Path) -> str:
    """sha256 of the chart's files (names and contents), remembered by their stat."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        stats = [p.stat() for p in files]
        signature: tuple[Any, ...] = tuple(
            (str(p.relative_to(path)), st.st_mtime_ns, st.st_size)
            for p, st in zip(files, stats, strict=True))
    elif path.is_file():
        files = [path]
        stat = path.stat()
        signature = ((path.name, stat.st_mtime_ns, stat.st_size),)
    else:
        raise ChartLoadError("no such chart directory or archive", chart=str(path))
    key = (str(path), signature)
    with _lock:
        known = _digests.get(key)
    if known is not None:
        return known
    digest = hashlib.sha256()
    for file in files:
        digest.update(str(file.relative_to(path) if file != path else file.name).encode())
        digest.update(b"\0")
        digest.update(file.read_bytes())
        digest.update(b"\0")
    found = digest.hexdigest()
    with _lock:
        if len(_digests) > 4 * _MAX_CACHED:
            _digests.clear()
        _digests[key] = found
    return found


def _values_digest(values: Mapping[str, Any] | None) -> str:
    text = json.dumps(values or {}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def chart(
    source: str | os.PathLike[str],
    *,
    values: Mapping[str, Any] | None = None,
    release: str,
    namespace: str,
    api_versions: Collection[str] = (),
    kube_version: str | None = None,
    cluster_scoped: Collection[str] = (),
    skip_hooks: Collection[str] = (),
    keep_crds: bool = True,
    parent: KubeObject | None = None,
    managed_by: str | None = None,
) -> Chart:
    """The builders of the chart at ``source`` (a directory or a ``.tgz``) rendered by Helm's
    engine with ``values`` (over the chart's ``values.yaml``), as release ``release`` in
    ``namespace``.

    ``api_versions`` (``group/version`` or ``group/version/Kind``) are added to Helm's defaults
    in ``.Capabilities.APIVersions``, ``kube_version`` (``v1.31.0``) is
    ``.Capabilities.KubeVersion``. Namespaced objects are put in ``namespace`` (whatever the
    template said); cluster-scoped ones (:data:`CLUSTER_SCOPED_KINDS`, kinds the chart's CRDs
    declare cluster-scoped, ``cluster_scoped`` kinds) lose any namespace. ``NOTES.txt`` is
    ignored; ``test`` hooks are left out, so are the hooks named in ``skip_hooks``; any other
    hook but ``pre-install``/``pre-upgrade`` raises :class:`~builders.ChartHookError`. A
    template that fails raises :class:`~builders.ChartRenderError` (chart, template, line).
    The ``crds/`` objects are marked ``helm.sh/resource-policy: keep`` (:data:`KEEP_ANNOTATION`)
    unless ``keep_crds`` is False: like Helm, no uninstall deletes them (the reconciler releases
    them). With ``parent`` (and ``managed_by``, the operator's name) each object carries the
    identity the reconciler would stamp (``builders.names.stamp_identity``: the ``managed-by``,
    ``instance``, ``component`` and owner labels on its own metadata, never on a selector or a
    pod template, and the owner reference where Kubernetes allows one), so the builders pass the
    property kit's invariants as code builders do. Cached: the same inputs render once per
    process (the identity is stamped per call).
    """
    if parent is not None and not managed_by:
        raise InvalidSpecError(field="managed_by", value=managed_by,
                               reason="chart(parent=...) stamps the identity: name the operator")
    path = Path(source)
    capabilities = (tuple(sorted(api_versions)), kube_version, tuple(sorted(cluster_scoped)),
                    tuple(sorted(skip_hooks)), keep_crds)
    key = (str(path), _source_digest(path), _values_digest(values), release, namespace,
           capabilities)
    with _lock:
        rendering = _cache.get(key)
        if rendering is not None:
            _cache.move_to_end(key)
            _counts["hits"] += 1
    if rendering is None:
        rendering = _render(path, values, release=release, namespace=namespace,
                            api_versions=api_versions, kube_version=kube_version,
                            cluster_scoped=cluster_scoped, skip_hooks=skip_hooks,
                            keep_crds=keep_crds)
        with _lock:
            _counts["renders"] += 1
            _cache[key] = rendering
            while len(_cache) > _MAX_CACHED:
                _cache.popitem(last=False)
    if rendering.error is not None:
        raise _fresh(rendering.error)
    groups = [rendering.crds, rendering.hooks, rendering.objects]
    if parent is not None:
        groups = [tuple(_stamped(b, parent, str(managed_by), rendering.cluster) for b in group)
                  for group in groups]
    return Chart(chart=rendering.chart, release=release, namespace=namespace,
                 crds=groups[0], hooks=groups[1], objects=groups[2])


def _fresh(error: ChartError) -> ChartError:
    """A new exception equal to the cached ``error`` (its class, message and attributes), so
    that raising it again never changes the cached one (traceback, context)."""
    fresh = type(error).__new__(type(error))
    fresh.__dict__.update(error.__dict__)
    fresh.args = error.args
    return fresh


def _stamped(builder: ChartObject, parent: KubeObject, managed_by: str,
             cluster: Collection[str]) -> ChartObject:
    obj = stamp_identity(parent, builder.obj, operator_name=managed_by,
                         namespaced=builder.kind not in cluster)
    return attrs.evolve(builder, obj=obj)


def _render(
    path: Path, values: Mapping[str, Any] | None, *, release: str, namespace: str,
    api_versions: Collection[str], kube_version: str | None, cluster_scoped: Collection[str],
    skip_hooks: Collection[str], keep_crds: bool,
) -> Rendering:
    helm = _engine(str(path))
    try:
        loaded = helm.Chart.load(str(path))
    except helm.HelmError as exc:
        return Rendering(chart=str(path), error=ChartLoadError(str(exc), chart=str(path)))
    with loaded:
        metadata = loaded.metadata
        name = f"{metadata.get('name', path.name)}-{metadata.get('version', '0')}"
        try:
            texts = _render_texts(helm, loaded, dict(values or {}), release=release,
                                  namespace=namespace, api_versions=api_versions,
                                  kube_version=kube_version)
            crd_texts = [(str(crd["filename"]), str(crd["data"])) for crd in loaded.crds]
        except helm.HelmError as exc:
            return Rendering(chart=name, error=_render_error(name, str(exc)))
    try:
        return split_rendering(name, crd_texts, texts, namespace=namespace,
                               cluster_scoped=frozenset(cluster_scoped),
                               skip_hooks=frozenset(skip_hooks), keep_crds=keep_crds)
    except ChartError as exc:
        return Rendering(chart=name, error=exc)


def _render_texts(
    helm: Any, loaded: Any, values: dict[str, Any], *, release: str, namespace: str,
    api_versions: Collection[str], kube_version: str | None,
) -> dict[str, str]:
    if not api_versions and kube_version is None:
        rendered: dict[str, str] = loaded.render(values, name=release, namespace=namespace)
        return rendered
    # Chart.render of helm-python-sdk 0.2.2 passes no capabilities; its C ABI takes them
    # (helm_render's options: api_versions, kube_version), so the call is made as render does.
    options: dict[str, Any] = {"name": release, "namespace": namespace}
    if api_versions:
        options["api_versions"] = sorted(api_versions)
    if kube_version is not None:
        options["kube_version"] = kube_version
    from helm_python import _native

    text = _native.call_string("helm_render", loaded._raw(), json.dumps(values),
                               json.dumps(options))
    found: dict[str, str] = json.loads(text)
    return found


def _render_error(chart: str, message: str) -> ChartRenderError:
    where = _WHERE.search(message)
    if where is None:
        return ChartRenderError(chart=chart, template=None, line=None, reason=message)
    return ChartRenderError(chart=chart, template=where.group(1), line=int(where.group(2)),
                            reason=message)
