"""The CustomResourceDefinitions of the Thanos example: ``Thanos`` and ``ServiceMonitor``.

``THANOS_CRD`` defines the parent kind (group ``monitoring.optk.dev``, version ``v1alpha1``) with
a structural schema and a status subresource; its optional blocks ``query``, ``queryFrontend``,
``storeGateway`` and ``rule`` switch the components on. ``SERVICE_MONITOR_CRD`` is a minimal
stand-in for the Prometheus operator's ``monitoring.coreos.com/v1`` ServiceMonitor, the kind that
"appears later" in the demo. These are plain dicts: install them with any client.
"""

from __future__ import annotations

from typing import Any

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
_LOG_LEVELS = ["debug", "info", "warn", "error"]


def _replicas() -> dict[str, Any]:
    return {"type": "integer", "minimum": 0, "maximum": 20}


def _ingress() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "Expose the component through an Ingress for this host.",
        "required": ["host"],
        "properties": {
            "host": {"type": "string", "pattern": _HOST_PATTERN, "maxLength": 100},
            "ingressClassName": {"type": "string", "pattern": "^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$"},
        },
    }


def _component(description: str, **extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "properties": {
            "replicas": _replicas(),
            "logLevel": {"type": "string", "enum": _LOG_LEVELS},
            **extra,
        },
    }


def _storage() -> dict[str, Any]:
    return {"type": "string", "pattern": "^[1-9][0-9]{0,3}(Mi|Gi|Ti)$"}


def _crd(
    *,
    group: str,
    version: str,
    kind: str,
    plural: str,
    spec: dict[str, Any],
    short_names: tuple[str, ...] = (),
    status: bool = False,
) -> dict[str, Any]:
    """A namespaced, single-version CRD whose objects have ``spec`` (and ``status``)."""
    properties: dict[str, Any] = {"spec": spec}
    served: dict[str, Any] = {"name": version, "served": True, "storage": True}
    if status:
        properties["status"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        served["subresources"] = {"status": {}}
    served["schema"] = {"openAPIV3Schema": {"type": "object", "properties": properties}}
    names: dict[str, Any] = {
        "plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List",
    }
    if short_names:
        names["shortNames"] = list(short_names)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": "Namespaced", "names": names, "versions": [served]},
    }


THANOS_CRD: dict[str, Any] = _crd(
    group=GROUP,
    version=VERSION,
    kind=KIND,
    plural="thanoses",
    short_names=("th",),
    status=True,
    spec={
        "type": "object",
        "properties": {
            "image": {"type": "string", "pattern": _IMAGE_PATTERN},
            "serviceMonitors": {
                "type": "boolean",
                "description": "Build ServiceMonitors when their CRD is served (default true).",
            },
            "objectStorageSecret": {
                "type": "string",
                "description": "Secret holding objstore.yml for the store gateway and the ruler.",
                "pattern": "^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$",
            },
            "query": _component(
                "Thanos Query: the PromQL API over every store.", ingress=_ingress()
            ),
            "queryFrontend": _component(
                "Thanos Query Frontend: splitting and caching in front of Query.",
                ingress=_ingress(),
            ),
            "storeGateway": _component(
                "Thanos Store Gateway: blocks from object storage.", storage=_storage()
            ),
            "rule": _component("Thanos Ruler: recording and alerting rules.", storage=_storage()),
        },
    },
)
"""The ``Thanos`` CRD: structural schema, status subresource, four optional component blocks."""

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
