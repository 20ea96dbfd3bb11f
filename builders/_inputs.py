"""Declared inputs: what a parent's builders read besides the parent, as a typed read-only value.

An operator declares its inputs as a pure function of the parent
(``Operator(inputs=fn)``, ``fn(parent) -> Iterable[ObjectRef | SelectorRef]``: e.g. the Secret
named by ``spec.objectStorageSecret``, or every ConfigMap of the namespace labelled
``team=<parent>``); the driver resolves each reference from its informers and calls
``build(parent, inputs)`` with an :class:`Inputs` value. Builders stay pure functions of
``(parent, inputs)``: :class:`Inputs` is a frozen mapping of the declared references to deep copies
of the objects read (or to nothing: missing, forbidden), with ``require`` raising
``InputMissingError``/``InputForbiddenError`` (``builders._errors``), which the reconcile reports
on the parent as conditions naming the reference; ``selected(selector)`` is the list a
:class:`SelectorRef` matches, sorted by namespace and name.

The clusters children may be placed in (``builders.placed``, docs/clusters.md) are an input too:
a :class:`ClusterSelector` declares "the clusters whose labels include these", and
``inputs.clusters(selector)`` is the list of :class:`Cluster` values it matches (a name and the
labels, sorted by name). A builder selects clusters by label and places children by name; it
never sees a cluster's credentials (the Secret that declares a cluster stays the runtime's).

:func:`inputs_digest` and :func:`with_inputs_digest` are the ``checksum/config`` idiom: a digest of
the chosen inputs' contents stamped into a pod template annotation (``optk.dev/inputs-digest``) so
that a changed ConfigMap or Secret rolls the workload. The digest is the only trace of a value:
:class:`Inputs` has no ``repr`` of contents, and the errors name references only.

Boundary: pure values and functions. Resolution from informers, the index from an input to the
parents that read it, and the triggers are the driver's (``reconciler._cache.inputs``).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import attrs

from builders._errors import InputForbiddenError, InputMissingError
from builders._identity import ObjectRef
from builders._names import validate_labels
from objectmatcher import KubeObject

__all__ = [
    "CRD_API_VERSION",
    "INPUTS_DIGEST_ANNOTATION",
    "Cluster",
    "ClusterSelector",
    "InputDeclaration",
    "InputRef",
    "Inputs",
    "SelectorRef",
    "inputs_digest",
    "kind_served",
    "with_inputs_digest",
]

CRD_API_VERSION = "apiextensions.k8s.io/v1"

INPUTS_DIGEST_ANNOTATION = "optk.dev/inputs-digest"
"""The pod template annotation :func:`with_inputs_digest` sets."""


def _labels(value: Mapping[str, str] | Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    pairs = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((str(k), str(v)) for k, v in pairs))


def _valid_labels(instance: SelectorRef, attribute: Any,
                  value: tuple[tuple[str, str], ...]) -> None:
    validate_labels(dict(value), field=f"SelectorRef({instance.kind}).match_labels")


@attrs.frozen(kw_only=True, cache_hash=True)
class SelectorRef:
    """A declared input by label selector: every object of ``kind`` in ``namespace`` (None: a
    cluster-scoped kind, or every namespace) whose labels include all of ``match_labels`` (a
    mapping, kept as sorted pairs; empty selects every object of the kind there).
    ``inputs.selected(ref)`` gives the objects matched, sorted by namespace and name; the parents
    that declare it are reconciled when an object starts or stops matching or a matching one
    changes. Bad label keys or values are an ``InvalidSpecError`` naming the field."""

    api_version: str
    kind: str
    namespace: str | None = None
    match_labels: tuple[tuple[str, str], ...] = attrs.field(
        default=(), converter=_labels, validator=_valid_labels)

    @property
    def label_selector(self) -> str:
        """The selector as the API's ``labelSelector`` text (``a=b,c=d``; empty: everything)."""
        return ",".join(f"{key}={value}" for key, value in self.match_labels)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` (of this kind) is selected: in the namespace, with the labels."""
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        if self.namespace is not None and (meta.get("namespace") or None) != self.namespace:
            return False
        labels = meta.get("labels")
        labels = labels if isinstance(labels, Mapping) else {}
        return all(labels.get(key) == value for key, value in self.match_labels)

    def __str__(self) -> str:
        where = f"{self.namespace} " if self.namespace else ""
        return f"{self.kind}.{self.api_version} {where}-l {self.label_selector or '(every)'}"


def _valid_cluster_labels(instance: ClusterSelector, attribute: Any,
                          value: tuple[tuple[str, str], ...]) -> None:
    validate_labels(dict(value), field="ClusterSelector.match_labels")


def _label_map(value: Mapping[str, str]) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()}


@attrs.frozen(kw_only=True)
class Cluster:
    """One cluster children may be placed in, as builders see it: its ``name`` (what
    ``builders.placed(builder, cluster=name)`` takes) and its ``labels``; nothing else (its
    credentials stay with the runtime)."""

    name: str
    labels: Mapping[str, str] = attrs.field(factory=dict, converter=_label_map, hash=False)


@attrs.frozen(cache_hash=True)
class ClusterSelector:
    """A declared input: the clusters (docs/clusters.md) whose labels include all of
    ``match_labels`` (a mapping, kept as sorted pairs; empty: every cluster).
    ``inputs.clusters(selector)`` gives them as :class:`Cluster` values sorted by name; the
    parents that declare it are reconciled when a cluster starts or stops matching (its Secret
    added, labelled, unlabelled, removed) or a matching one changes. Bad label keys or values
    are an ``InvalidSpecError`` naming the field."""

    match_labels: tuple[tuple[str, str], ...] = attrs.field(
        default=(), converter=_labels, validator=_valid_cluster_labels)

    @property
    def label_selector(self) -> str:
        """The selector as label selector text (``a=b,c=d``; empty: every cluster)."""
        return ",".join(f"{key}={value}" for key, value in self.match_labels)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a cluster with ``labels`` is selected."""
        return all(labels.get(key) == value for key, value in self.match_labels)

    def __str__(self) -> str:
        return f"clusters -l {self.label_selector or '(every)'}"


InputRef = ObjectRef | SelectorRef | ClusterSelector
"""A declared input: one object by name, the objects a label selector matches, or the clusters
a :class:`ClusterSelector` matches."""

InputDeclaration = Callable[[KubeObject], Iterable[InputRef]]
"""``Operator(inputs=fn)``: the references a parent's builders read, a pure function of it."""

_VOLATILE_META = ("resourceVersion", "managedFields", "generation", "uid", "creationTimestamp")


def _content(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What of an input its digest covers: everything but server-kept metadata (so a no-op
    update or a relist leaves the digest unchanged)."""
    out = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        out["metadata"] = {k: v for k, v in meta.items()
                           if k in ("labels", "annotations") and v}
    return out


class Inputs(Mapping[ObjectRef, dict[str, Any]]):
    """The declared inputs of one parent, as read: a read-only mapping from each reference that
    exists and may be read to a private deep copy of the object.

    ``missing`` and ``forbidden`` hold the references that could not be read (a
    :class:`SelectorRef` is never missing: it matches nothing). ``require(ref)`` returns the
    object or raises ``InputMissingError``/``InputForbiddenError`` naming the reference (raise
    it inside a builder: only that builder's child waits, the others converge);
    ``selected(selector)`` returns the objects a selector matched. ``refs`` holds every declared
    reference of both kinds; ``versions`` is what a reused build is keyed on.
    """

    __slots__ = ("_clusters", "_found", "_selected", "forbidden", "missing", "refs")

    def __init__(self, found: Mapping[ObjectRef, Mapping[str, Any]] | None = None, *,
                 missing: Iterable[ObjectRef] = (), forbidden: Iterable[InputRef] = (),
                 selected: Mapping[SelectorRef, Iterable[Mapping[str, Any]]] | None = None,
                 clusters: Mapping[ClusterSelector, Iterable[Cluster]] | None = None,
                 ) -> None:
        self._found = {ref: copy.deepcopy(dict(obj)) for ref, obj in (found or {}).items()}
        self.missing = frozenset(missing)
        self.forbidden: frozenset[InputRef] = frozenset(forbidden) - self.missing
        self._selected = {
            sel: tuple(sorted((copy.deepcopy(dict(obj)) for obj in objs), key=_name_key))
            for sel, objs in (selected or {}).items() if sel not in self.forbidden}
        self._clusters = {sel: tuple(sorted(found, key=lambda c: c.name))
                          for sel, found in (clusters or {}).items()
                          if sel not in self.forbidden}
        self.refs: frozenset[InputRef] = (frozenset(self._found) | self.missing | self.forbidden
                                          | frozenset(self._selected)
                                          | frozenset(self._clusters))

    def __getitem__(self, ref: ObjectRef) -> dict[str, Any]:
        return copy.deepcopy(self._found[ref])

    def __iter__(self) -> Iterator[ObjectRef]:
        return iter(sorted(self._found, key=str))

    def __len__(self) -> int:
        return len(self._found)

    def __repr__(self) -> str:  # references only: a Secret's value never reaches a log
        selected = {str(sel): len(objs) for sel, objs in sorted(
            self._selected.items(), key=lambda item: str(item[0]))}
        clusters = {str(sel): [c.name for c in found] for sel, found in sorted(
            self._clusters.items(), key=lambda item: str(item[0]))}
        return (f"Inputs(found={sorted(map(str, self._found))}, "
                f"missing={sorted(map(str, self.missing))}, "
                f"forbidden={sorted(map(str, self.forbidden))}, selected={selected}"
                + (f", clusters={clusters})" if clusters else ")"))

    def clusters(self, selector: ClusterSelector) -> list[Cluster]:
        """The clusters ``selector`` matched, sorted by name (empty when none does);
        ``InputForbiddenError`` when the clusters may not be read, ``InputMissingError`` when
        ``selector`` was not declared."""
        if selector in self.forbidden:
            raise InputForbiddenError(ref=selector)
        if selector not in self._clusters:
            raise InputMissingError(ref=selector)
        return list(self._clusters[selector])

    def selected(self, selector: SelectorRef) -> list[dict[str, Any]]:
        """Copies of the objects ``selector`` matched, sorted by namespace and name (empty when
        none does); ``InputForbiddenError`` when they may not be read, ``InputMissingError``
        when ``selector`` was not declared."""
        if selector in self.forbidden:
            raise InputForbiddenError(ref=selector)
        if selector not in self._selected:
            raise InputMissingError(ref=selector)
        return copy.deepcopy(list(self._selected[selector]))

    def require(self, ref: ObjectRef) -> dict[str, Any]:
        """The input ``ref`` (a copy), or ``InputMissingError``/``InputForbiddenError``."""
        if ref in self._found:
            return self[ref]
        if ref in self.forbidden:
            raise InputForbiddenError(ref=ref)
        raise InputMissingError(ref=ref)

    def established(self, ref: ObjectRef) -> bool:
        """Whether the CustomResourceDefinition input ``ref`` (:func:`kind_served`) serves its
        kind: present, not being deleted, its ``Established`` condition True."""
        obj = self._found.get(ref)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return False
        conditions = (obj.get("status") or {}).get("conditions") or ()
        return any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in conditions)

    @property
    def versions(self) -> tuple[tuple[str, str], ...]:
        """``(reference, resourceVersion)`` of every declared input (``""``: not read), sorted:
        a build is reused only while these and the parent's version are unchanged."""
        out = []
        for ref in self.refs:
            if isinstance(ref, ClusterSelector):
                out.append((str(ref), _clusters_key(self._clusters.get(ref, ()))))
                continue
            if isinstance(ref, SelectorRef):
                out.append((str(ref), ",".join(
                    f"{'/'.join(_name_key(obj))}={_version_of(obj)}"
                    for obj in self._selected.get(ref, ()))))
                continue
            out.append((str(ref), _version_of(self._found.get(ref, {}))))
        return tuple(sorted(out))


def _clusters_key(clusters: Iterable[Cluster]) -> str:
    """The names and labels of ``clusters``, as one string (what a change of them changes)."""
    return ";".join(f"{c.name}:{','.join(f'{k}={v}' for k, v in sorted(c.labels.items()))}"
                    for c in clusters)


def _name_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _version_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def kind_served(api_version: str, *, plural: str) -> ObjectRef:
    """"Is this kind served" as an input: the reference of the CustomResourceDefinition that
    serves ``plural`` of ``api_version``'s group (``kind_served("monitoring.coreos.com/v1",
    plural="servicemonitors")``); ``inputs.established(ref)`` answers, and the parents that
    declare it are reconciled when the CRD appears, becomes Established or goes."""
    group = api_version.rpartition("/")[0]
    return ObjectRef(api_version=CRD_API_VERSION, kind="CustomResourceDefinition",
                     name=f"{plural}.{group}")


def _digested(inputs: Inputs, ref: InputRef) -> Any:
    if isinstance(ref, ClusterSelector):
        if ref not in inputs.refs or ref in inputs.forbidden:
            return None
        return [[c.name, dict(sorted(c.labels.items()))] for c in inputs.clusters(ref)]
    if isinstance(ref, SelectorRef):
        if ref not in inputs.refs or ref in inputs.forbidden:
            return None
        return [["/".join(_name_key(obj)), _content(obj)] for obj in inputs.selected(ref)]
    return _content(inputs[ref]) if ref in inputs else None


def inputs_digest(inputs: Inputs, refs: Iterable[InputRef] | None = None) -> str:
    """A SHA-256 digest (hex) of the contents of ``refs`` (default: every declared input); a
    missing or forbidden one counts as absent, a selector as the names and contents of what it
    matched. Only server-kept metadata is left out, so any change of data, labels or
    annotations changes it."""
    chosen = inputs.refs if refs is None else frozenset(refs)
    entries = [[str(ref), _digested(inputs, ref)] for ref in sorted(chosen, key=str)]
    text = json.dumps(entries, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def with_inputs_digest(workload: Mapping[str, Any], digest: str) -> dict[str, Any]:
    """A copy of ``workload`` (a Deployment, StatefulSet, DaemonSet, Job: anything with
    ``spec.template``) with ``optk.dev/inputs-digest: digest`` on its pod template, so that a
    changed input rolls it (the ``checksum/config`` idiom)."""
    out = copy.deepcopy(dict(workload))
    spec = out.setdefault("spec", {})
    template = spec.setdefault("template", {})
    meta = template.setdefault("metadata", {})
    annotations = dict(meta.get("annotations") or {})
    annotations[INPUTS_DIGEST_ANNOTATION] = digest
    meta["annotations"] = annotations
    return out
