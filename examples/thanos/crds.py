"""The ``Thanos`` spec class and the CustomResourceDefinitions of the example.

``ThanosSpec`` declares the parent's spec (group ``monitoring.optk.dev``, version ``v1alpha1``)
as attrs classes; ``THANOS_CRD`` is generated from it (``builders.specs.crd_for``): a structural
schema, printer columns and a status subresource; its optional blocks ``query``,
``queryFrontend``, ``storeGateway`` and ``rule`` switch the components on, and the builders read
the spec as a ``ThanosSpec`` (``builders.spec_of``). ``SERVICE_MONITOR_CRD`` is a minimal
hand-written stand-in for the Prometheus operator's ``monitoring.coreos.com/v1`` ServiceMonitor,
the kind that "appears later" in the demo. The CRDs are plain dicts: install them with any client.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from builders.specs import (
    ApiVersion,
    CelRule,
    PrinterColumn,
    SpecFieldError,
    Versions,
    crd_for,
    spec_field,
)

GROUP = "monitoring.optk.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "Thanos"

SERVICE_MONITOR_GROUP = "monitoring.coreos.com"
SERVICE_MONITOR_API_VERSION = f"{SERVICE_MONITOR_GROUP}/v1"
SERVICE_MONITOR_KIND = "ServiceMonitor"
SERVICE_MONITOR_CRD_NAME = f"servicemonitors.{SERVICE_MONITOR_GROUP}"

# A host name (DNS-1123 subdomain) that an Ingress accepts.
_HOST_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?){0,3}$"
_IMAGE_PATTERN = r"^[a-z0-9][-a-z0-9./]{0,60}:[a-z0-9][-a-z0-9.]{0,20}$"


DEFAULT_IMAGE = "quay.io/thanos/thanos:v0.34.1"
"""The image when the parent names none."""

LogLevel = Literal["debug", "info", "warn", "error"]
"""The log levels every component accepts."""

_NAME_PATTERN = "^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$"
_STORAGE_PATTERN = "^[1-9][0-9]{0,3}(Mi|Gi|Ti)$"

# Defaults are declared with server_default=False: the operator fills them in (spec_of), the API
# server never stores them in the parent, so a release that changes a default reaches every parent.


@attrs.frozen(kw_only=True)
class Ingress:
    """Expose the component through an Ingress for this host."""

    host: str = spec_field(pattern=_HOST_PATTERN, max_length=100)
    ingress_class_name: str | None = spec_field(default=None, pattern=_NAME_PATTERN)


@attrs.frozen(kw_only=True)
class Component:
    """One Thanos component: its size and log level."""

    replicas: int = spec_field(default=1, minimum=0, maximum=20, server_default=False)
    log_level: LogLevel = spec_field(default="info", server_default=False)


@attrs.frozen(kw_only=True)
class ServingComponent(Component):
    """A stateless component that may be exposed through an Ingress."""

    ingress: Ingress | None = spec_field(default=None)


@attrs.frozen(kw_only=True)
class StorageComponent(Component):
    """A stateful component with a data volume."""

    storage: str = spec_field(default="10Gi", pattern=_STORAGE_PATTERN, max_length=8,
                              server_default=False)


STORAGE_IMMUTABLE = CelRule(
    rule="(has(self.storage) ? self.storage : '10Gi') == "
         "(has(oldSelf.storage) ? oldSelf.storage : '10Gi')",
    message="storage cannot change once the component runs: a StatefulSet's volume claims are "
            "immutable (remove the block, then add it with the new size)",
)
"""A transition rule on a stateful block: its ``storage`` (absent means 10Gi) never changes."""


@attrs.frozen(kw_only=True)
class ThanosSpec:
    """A Thanos deployment: each component block present switches that component on."""

    image: str = spec_field(default=DEFAULT_IMAGE, pattern=_IMAGE_PATTERN, server_default=False)
    service_monitors: bool = spec_field(
        default=True, server_default=False,
        description="Build ServiceMonitors when their CRD is served (default true).",
    )
    object_storage_secret: str | None = spec_field(
        default=None, pattern=_NAME_PATTERN,
        description="Secret holding objstore.yml for the store gateway and the ruler.",
    )
    query: ServingComponent | None = spec_field(
        default=None, description="Thanos Query: the PromQL API over every store.")
    query_frontend: ServingComponent | None = spec_field(
        default=None, description="Thanos Query Frontend: splitting and caching in front of Query.")
    store_gateway: StorageComponent | None = spec_field(
        default=None, description="Thanos Store Gateway: blocks from object storage.",
        rules=[STORAGE_IMMUTABLE])
    rule: StorageComponent | None = spec_field(
        default=None, description="Thanos Ruler: recording and alerting rules.",
        rules=[STORAGE_IMMUTABLE])


_COLUMNS = (
    PrinterColumn(name="Query", json_path=".spec.query.replicas", type="integer",
                  description="Thanos Query replicas (1 when the block leaves it out)."),
    PrinterColumn(name="Ready", json_path='.status.conditions[?(@.type=="Ready")].status'),
)

THANOS_CRD: dict[str, Any] = crd_for(
    ThanosSpec, group=GROUP, version=VERSION, kind=KIND, plural="thanoses", short_names=("th",),
    printer_columns=_COLUMNS,
)
"""The ``Thanos`` CRD, generated from :class:`ThanosSpec`: structural schema, status
subresource, four optional component blocks, printer columns, and the CEL rule that keeps a
stateful block's ``storage`` as it is."""


# --- v1alpha2: the object storage secret becomes a block, the ruler block is renamed -----------

VERSION_2 = "v1alpha2"
API_VERSION_2 = f"{GROUP}/{VERSION_2}"


@attrs.frozen(kw_only=True)
class ObjectStorage:
    """Where the store gateway and the ruler read and write blocks."""

    secret_name: str = spec_field(
        pattern=_NAME_PATTERN, description="Secret holding objstore.yml.")


# Each version is its own class, copied rather than inherited (as Kubernetes copies types per
# version): a later change to one version must not silently change another's schema.
@attrs.frozen(kw_only=True)
class ThanosSpecV1Alpha2:
    """A Thanos deployment (v1alpha2): each component block present switches that component on."""

    image: str = spec_field(default=DEFAULT_IMAGE, pattern=_IMAGE_PATTERN, server_default=False)
    service_monitors: bool = spec_field(
        default=True, server_default=False,
        description="Build ServiceMonitors when their CRD is served (default true).",
    )
    object_storage: ObjectStorage | None = spec_field(default=None)
    query: ServingComponent | None = spec_field(
        default=None, description="Thanos Query: the PromQL API over every store.")
    query_frontend: ServingComponent | None = spec_field(
        default=None, description="Thanos Query Frontend: splitting and caching in front of Query.")
    store_gateway: StorageComponent | None = spec_field(
        default=None, description="Thanos Store Gateway: blocks from object storage.",
        rules=[STORAGE_IMMUTABLE])
    ruler: StorageComponent | None = spec_field(
        default=None, description="Thanos Ruler: recording and alerting rules.",
        rules=[STORAGE_IMMUTABLE])


def v1alpha1_to_hub(spec: ThanosSpec) -> ThanosSpecV1Alpha2:
    """v1alpha1 to v1alpha2: ``objectStorageSecret`` becomes ``objectStorage.secretName``,
    ``rule`` becomes ``ruler``."""
    secret = spec.object_storage_secret
    return ThanosSpecV1Alpha2(
        image=spec.image, service_monitors=spec.service_monitors,
        object_storage=ObjectStorage(secret_name=secret) if secret is not None else None,
        query=spec.query, query_frontend=spec.query_frontend, store_gateway=spec.store_gateway,
        ruler=spec.rule,
    )


def v1alpha1_from_hub(spec: ThanosSpecV1Alpha2) -> ThanosSpec:
    """v1alpha2 to v1alpha1 (the reverse of :func:`v1alpha1_to_hub`; nothing is lost)."""
    storage = spec.object_storage
    return ThanosSpec(
        image=spec.image, service_monitors=spec.service_monitors,
        object_storage_secret=storage.secret_name if storage is not None else None,
        query=spec.query, query_frontend=spec.query_frontend, store_gateway=spec.store_gateway,
        rule=spec.ruler,
    )


def validate_thanos(spec: ThanosSpecV1Alpha2, old: ThanosSpecV1Alpha2 | None) -> list[str]:
    """The validation webhook's rule: a frontend needs Query behind it; warnings for what works
    but is probably not meant (a stateful component without object storage keeps its blocks on
    its volume only). Ratcheting: an update that keeps an old object's problem is accepted, so
    an object stored before the rule can still be updated (and its finalizers removed)."""
    def orphaned(s: ThanosSpecV1Alpha2) -> bool:
        return s.query_frontend is not None and s.query is None

    if orphaned(spec) and (old is None or not orphaned(old)):
        raise SpecFieldError(parent=None, field="spec.queryFrontend", value="{...}",
                             reason="needs spec.query: the frontend forwards to Thanos Query")
    warnings = []
    for name, block in (("storeGateway", spec.store_gateway), ("ruler", spec.ruler)):
        if block is not None and spec.object_storage is None:
            warnings.append(f"spec.{name} without spec.objectStorage keeps blocks on its volume "
                            "only")
    return warnings


DEFAULT_INGRESS_CLASS = "nginx"
"""The Ingress class the defaulting webhook writes into an ``ingress`` block that names none."""


def _with_class(block: ServingComponent | None) -> ServingComponent | None:
    if block is None or block.ingress is None or block.ingress.ingress_class_name is not None:
        return block
    ingress = attrs.evolve(block.ingress, ingress_class_name=DEFAULT_INGRESS_CLASS)
    return attrs.evolve(block, ingress=ingress)


def default_thanos(spec: ThanosSpecV1Alpha2) -> ThanosSpecV1Alpha2:
    """The defaulting webhook's rule: an ``ingress`` block without ``ingressClassName`` gets
    :data:`DEFAULT_INGRESS_CLASS` written into the object (visible, and kept if the cluster's
    default class changes later)."""
    return attrs.evolve(spec, query=_with_class(spec.query),
                        query_frontend=_with_class(spec.query_frontend))


THANOS_VERSIONS = Versions(
    group=GROUP, kind=KIND, hub=VERSION_2,
    versions=[
        ApiVersion(name=VERSION, spec=ThanosSpec, to_hub=v1alpha1_to_hub,
                   from_hub=v1alpha1_from_hub, printer_columns=_COLUMNS),
        ApiVersion(name=VERSION_2, spec=ThanosSpecV1Alpha2, printer_columns=_COLUMNS),
    ],
    validate=validate_thanos, default=default_thanos,
)
"""The two versions of ``Thanos``: v1alpha2 is the hub (stored), v1alpha1 converts to and from
it; validation and defaulting run on v1alpha2 specs."""

THANOS_VERSIONED_CRD: dict[str, Any] = crd_for(
    THANOS_VERSIONS, plural="thanoses", short_names=("th",))
"""The ``Thanos`` CRD serving both versions (storage v1alpha2); its conversion strategy is
``None`` until the operator's webhook is injected (``reconciler.webhooks``)."""


def _crd(
    *,
    group: str,
    version: str,
    kind: str,
    plural: str,
    spec: dict[str, Any],
) -> dict[str, Any]:
    """A namespaced, single-version CRD whose objects have ``spec`` (a hand-written schema)."""
    served: dict[str, Any] = {"name": version, "served": True, "storage": True}
    served["schema"] = {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}
    names: dict[str, Any] = {
        "plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List",
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": "Namespaced", "names": names, "versions": [served]},
    }


SERVICE_MONITOR_CRD: dict[str, Any] = _crd(
    group=SERVICE_MONITOR_GROUP,
    version="v1",
    kind=SERVICE_MONITOR_KIND,
    plural="servicemonitors",
    spec={
        "type": "object",
        "required": ["selector", "endpoints"],
        "properties": {
            "selector": {
                "type": "object",
                "properties": {
                    "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
                },
            },
            "endpoints": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "port": {"type": "string"},
                        "path": {"type": "string"},
                        "interval": {"type": "string"},
                    },
                },
            },
        },
    },
)
"""A minimal ``monitoring.coreos.com/v1`` ServiceMonitor CRD (the fields the example sets)."""
