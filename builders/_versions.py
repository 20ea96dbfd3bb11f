"""Several versions of one custom resource kind: typed specs per version, one hub, pure conversions.

An API outlives its first version. :class:`ApiVersion` pairs a version name with its spec class,
its ``served``/``deprecated`` flags, printer columns (:class:`PrinterColumn`, owned here: a CRD
lists its columns per version, and ``builders._crds`` reads them from here) and the two pure
functions between its spec and the hub's (kubebuilder's hub and spoke); :class:`Versions` holds
them, one marked as the hub (the storage version), and converts whole objects between any two
versions through the hub (:meth:`Versions.convert`), as a conversion webhook must. What a spoke
cannot hold survives the trip in the annotation :data:`CONVERSION_ANNOTATION` (the Kubernetes
convention, as Cluster API does): a hub object converted to a spoke and back is itself again. The
admission functions (validation and defaulting, on the hub's spec) are registered here too, beside
the specs; the webhook server that calls all of these lives in ``reconciler.webhooks``. Pure: no
cluster, no I/O.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import attrs

from builders._errors import SpecFieldError, UnsupportedSpecTypeError
from builders._specs import from_spec_dict, to_spec_dict

__all__ = ["CONVERSION_ANNOTATION", "ApiVersion", "PrinterColumn", "Versions"]

CONVERSION_ANNOTATION = "optk.dev/conversion-data"
"""On an object served at a spoke: the hub's spec, when the spoke could not hold all of it."""

Convert = Callable[[Any], Any]
Validate = Callable[[Any, Any], Sequence[str]]
Default = Callable[[Any], Any]


@attrs.frozen(kw_only=True)
class PrinterColumn:
    """One ``kubectl get`` column of a CRD (``additionalPrinterColumns``)."""

    name: str
    """The column header (``Replicas``)."""
    json_path: str
    """Where the value is, from the object's root (``.spec.replicas``)."""
    type: Literal["string", "integer", "number", "boolean", "date"] = "string"
    """The column's type."""
    description: str | None = None
    """Shown by ``kubectl explain``-like tools."""
    priority: int = 0
    """0: always shown; greater: only with ``-o wide``."""

    def to_dict(self) -> dict[str, Any]:
        """The column as the CRD holds it."""
        out: dict[str, Any] = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.description:
            out["description"] = self.description
        if self.priority:
            out["priority"] = self.priority
        return out


@attrs.frozen(kw_only=True)
class ApiVersion:
    """One version of a kind: its spec class, flags, columns and conversions to and from the hub.

    ``to_hub(spec)`` turns an instance of ``spec`` into the hub's spec class, ``from_hub`` the
    reverse; both are pure, and both are None for the hub itself. ``deprecated`` makes the API
    server warn clients of this version (``deprecation_warning`` words it); ``served=False``
    keeps the version in the CRD but stops serving it.
    """

    name: str
    spec: type
    to_hub: Convert | None = None
    from_hub: Convert | None = None
    served: bool = True
    deprecated: bool = False
    deprecation_warning: str | None = None
    status: type | None = None
    printer_columns: tuple[PrinterColumn, ...] = attrs.field(default=(), converter=tuple)


def _identity(value: Any) -> Any:
    return value


def _version_of(api_version: object) -> str:
    return str(api_version or "").rpartition("/")[2]


@attrs.frozen(kw_only=True)
class Versions:
    """The versions of one kind, ``hub`` naming the storage version every conversion goes through.

    ``validate(spec, old_spec)`` (``old_spec`` None on create) returns warnings and raises
    :class:`SpecFieldError` naming the field to refuse; ``default(spec)`` returns the spec with
    defaults filled in. Both see the hub's spec class (admission webhooks ask for the hub
    version; the API server converts first). Raises :class:`UnsupportedSpecTypeError` when the
    hub is missing, named twice, or a spoke lacks a conversion.
    """

    group: str
    kind: str
    hub: str
    versions: tuple[ApiVersion, ...] = attrs.field(converter=tuple)
    validate: Validate | None = None
    default: Default | None = None

    def __attrs_post_init__(self) -> None:
        names = [v.name for v in self.versions]
        if len(set(names)) != len(names) or self.hub not in names:
            raise UnsupportedSpecTypeError(
                spec=self.kind, field="versions",
                reason=f"hub {self.hub!r} must be one of the versions {names}, each named once")
        for version in self.versions:
            is_hub = version.name == self.hub
            if not is_hub and (version.to_hub is None or version.from_hub is None):
                raise UnsupportedSpecTypeError(
                    spec=version.spec.__name__, field=version.name,
                    reason="a spoke version needs to_hub and from_hub")

    @property
    def hub_version(self) -> ApiVersion:
        """The hub (storage) version."""
        return self.version(self.hub)

    def version(self, name: str) -> ApiVersion:
        """The version called ``name``; raises UnsupportedSpecTypeError for an unknown one."""
        for version in self.versions:
            if version.name == name:
                return version
        raise UnsupportedSpecTypeError(spec=self.kind, field="apiVersion",
                                       reason=f"no version {name!r} of {self.group}")

    def api_version(self, name: str) -> str:
        """``group/name``."""
        return f"{self.group}/{name}"

    def _to_hub(self, version: ApiVersion) -> Convert:
        return version.to_hub or _identity

    def _from_hub(self, version: ApiVersion) -> Convert:
        return version.from_hub or _identity

    def spec_to_hub(self, spec: Any, *, version: str) -> Any:
        """A spec of ``version`` as the hub's spec."""
        return self._to_hub(self.version(version))(spec)

    def spec_from_hub(self, hub: Any, *, version: str) -> Any:
        """A hub spec as a spec of ``version``."""
        return self._from_hub(self.version(version))(hub)

    def convert(self, obj: Mapping[str, Any], api_version: str) -> dict[str, Any]:
        """``obj`` (of any version of this kind) converted to ``api_version``, through the hub.

        Metadata and status are kept; the spec is converted (fields declared
        ``server_default=False`` are written only when they differ from their default). Going
        to a spoke that cannot hold all of the hub's spec, the hub's spec is kept in
        :data:`CONVERSION_ANNOTATION`; coming back from a spoke unchanged since, it is
        restored exactly. Raises SpecFieldError naming
        the object and field when ``obj``'s spec does not fit its version's class.
        """
        source = self.version(_version_of(obj.get("apiVersion")))
        target = self.version(_version_of(api_version))
        out = copy.deepcopy(dict(obj))
        out["apiVersion"] = self.api_version(target.name)
        if source.name == target.name:
            return out
        where = _describe(obj)
        try:
            spec: Any = from_spec_dict(source.spec, obj.get("spec") or {})
        except SpecFieldError as err:
            raise SpecFieldError(parent=where, field=err.field, value=err.value,
                                 reason=err.reason) from None
        metadata = dict(out.get("metadata") or {})
        annotations = dict(metadata.get("annotations") or {})
        saved = annotations.pop(CONVERSION_ANNOTATION, None)
        hub = self._to_hub(source)(spec)
        restored = self._restore(saved, source, spec)
        if restored is not None:
            hub = restored
        result = self._from_hub(target)(hub)
        if target.name != self.hub and self._to_hub(target)(result) != hub:
            annotations[CONVERSION_ANNOTATION] = json.dumps(
                {"spec": _dump(hub)}, sort_keys=True, separators=(",", ":"))
        if annotations:
            metadata["annotations"] = annotations
        else:
            metadata.pop("annotations", None)
        if metadata or "metadata" in out:
            out["metadata"] = metadata
        out["spec"] = _dump(result)
        return out

    def _restore(self, saved: object, source: ApiVersion, spec: Any) -> Any:
        """The hub spec the annotation kept, if the spoke's spec is still what it was made from."""
        if source.name == self.hub or not isinstance(saved, str):
            return None
        try:
            data = json.loads(saved)
            hub: Any = from_spec_dict(self.hub_version.spec, data["spec"])
        except (ValueError, KeyError, TypeError):
            return None  # unreadable: the spoke's own fields are the truth
        return hub if self._from_hub(source)(hub) == spec else None

    def default_spec(self, spec: Any) -> Any:
        """The hub spec with the registered defaulting applied (itself without one)."""
        return spec if self.default is None else self.default(spec)

    def validate_spec(self, spec: Any, old: Any) -> list[str]:
        """The registered validation's warnings; raises SpecFieldError to refuse."""
        return [] if self.validate is None else list(self.validate(spec, old))


def _dump(spec: Any) -> dict[str, Any]:
    """What a conversion writes: the operator's own defaults (``server_default=False``) left
    out while they hold their default, so they stay the operator's."""
    return to_spec_dict(spec, keep_operator_defaults=False)


def _describe(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    name = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p)
    return f"{obj.get('kind') or 'object'} {name or '<unnamed>'}"
