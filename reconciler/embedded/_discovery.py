"""Discovery documents: ``/version``, ``/api``, ``/apis``, group and group-version resource lists.

Built on every request from the ``KindRegistry`` (so a CRD's types appear as soon as it is
created and vanish when it is deleted), in the shapes ``discovery.json`` records. Clients that ask
for aggregated discovery (kubectl 1.26+: ``Accept: application/json;g=apidiscovery.k8s.io;v=v2;
as=APIGroupDiscoveryList``) get it from ``/api`` and ``/apis``; the others get the legacy
documents, as from a 1.25 server.
"""

from __future__ import annotations

import re
from typing import Any

from reconciler.embedded._kinds import KindRegistry, ResourceType

__all__ = [
    "aggregated_discovery",
    "api_group",
    "api_group_list",
    "api_versions",
    "resource_list",
    "version_info",
]

_SUBRESOURCE_VERBS = {"status": ["get", "patch", "update"], "scale": ["get", "patch", "update"],
                      "finalize": ["update"]}


def version_info() -> dict[str, str]:
    """``/version``: the Kubernetes release the server imitates."""
    return {
        "major": "1", "minor": "25", "gitVersion": "v1.25.0-optk", "gitCommit": "embedded",
        "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.19",
        "compiler": "gc", "platform": "linux/amd64",
    }


def api_versions(address: str) -> dict[str, Any]:
    """``/api``: the core group's versions."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes version order: GA before beta before alpha, higher numbers first."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not match:
        return (3, 0, 0)
    major, level, minor = match.groups()
    rank = {"alpha": 2, "beta": 1}.get(level or "", 0)
    return (rank, -int(major), -int(minor or 0))


def _group_versions(registry: KindRegistry) -> dict[str, list[str]]:
    groups: dict[str, set[str]] = {}
    for rt in registry.all_types():
        if rt.group:
            groups.setdefault(rt.group, set()).add(rt.version)
    return {g: sorted(v, key=version_priority) for g, v in sorted(groups.items())}


def _group_document(group: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(registry: KindRegistry) -> dict[str, Any]:
    """``/apis``: every served group with its versions."""
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group_document(g, v) for g, v in _group_versions(registry).items()],
    }


def api_group(registry: KindRegistry, group: str) -> dict[str, Any] | None:
    """``/apis/<group>``, or None when the group is not served."""
    versions = _group_versions(registry).get(group)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_document(group, versions)}


def _resource_entry(rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": rt.plural,
        # a 1.25 server publishes singular names only for custom resources
        "singularName": rt.singular if rt.is_custom else "",
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    return entry


def resource_list(
    registry: KindRegistry, *, group: str, version: str
) -> dict[str, Any] | None:
    """``/api/v1`` or ``/apis/<group>/<version>``: the resources and subresources served there."""
    types = sorted(
        (rt for rt in registry.all_types() if rt.group == group and rt.version == version),
        key=lambda rt: rt.plural,
    )
    if not types:
        return None
    resources: list[dict[str, Any]] = []
    for rt in types:
        resources.append(_resource_entry(rt))
        for sub in sorted(rt.subresources):
            entry: dict[str, Any] = {
                "name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced,
                "kind": rt.kind, "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"]),
            }
            if sub == "scale":
                entry.update(group="autoscaling", version="v1", kind="Scale")
            resources.append(entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def _aggregated_resource(rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": rt.plural,
        "responseKind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "singularResource": rt.singular,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    subresources = []
    for sub in sorted(rt.subresources):
        kind = ({"group": "autoscaling", "version": "v1", "kind": "Scale"} if sub == "scale"
                else {"group": rt.group, "version": rt.version, "kind": rt.kind})
        subresources.append({"subresource": sub, "responseKind": kind,
                             "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"])})
    if subresources:
        entry["subresources"] = subresources
    return entry


def aggregated_discovery(
    registry: KindRegistry, *, core: bool, api_version: str = "apidiscovery.k8s.io/v2"
) -> dict[str, Any]:
    """Aggregated discovery (``APIGroupDiscoveryList``): ``/api`` (core) or ``/apis``.

    Clients that ask for it (kubectl 1.26+) learn every group, version and resource in one
    request instead of one per group-version.
    """
    groups: dict[str, dict[str, list[ResourceType]]] = {}
    for rt in registry.all_types():
        if (rt.group == "") == core:
            groups.setdefault(rt.group, {}).setdefault(rt.version, []).append(rt)
    items = []
    for group in sorted(groups):
        versions = sorted(groups[group], key=version_priority)
        items.append({
            "metadata": {"name": group, "creationTimestamp": None},
            "versions": [{
                "version": version,
                "resources": [_aggregated_resource(rt) for rt in
                              sorted(groups[group][version], key=lambda rt: rt.plural)],
                "freshness": "Current",
            } for version in versions],
        })
    return {"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {},
            "items": items}
