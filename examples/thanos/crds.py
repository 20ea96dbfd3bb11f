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

from builders.specs import PrinterColumn, crd_for, spec_field

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

    storage: str = spec_field(default="10Gi", pattern=_STORAGE_PATTERN, server_default=False)


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
        default=None, description="Thanos Store Gateway: blocks from object storage.")
    rule: StorageComponent | None = spec_field(
        default=None, description="Thanos Ruler: recording and alerting rules.")


THANOS_CRD: dict[str, Any] = crd_for(
    ThanosSpec, group=GROUP, version=VERSION, kind=KIND, plural="thanoses", short_names=("th",),
    printer_columns=[
        PrinterColumn(name="Query", json_path=".spec.query.replicas", type="integer",
                      description="Thanos Query replicas (1 when the block leaves it out)."),
        PrinterColumn(name="Ready", json_path='.status.conditions[?(@.type=="Ready")].status'),
    ],
)
"""The ``Thanos`` CRD, generated from :class:`ThanosSpec`: structural schema, status
subresource, four optional component blocks, printer columns."""


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
