"""Object helpers for what surrounds a workload: Services, Ingress, ConfigMaps and Secrets,
ServiceAccounts and RBAC, PodDisruptionBudgets.

The same contract as ``builders._objects`` (metadata, pod templates, workloads), whose small
private helpers these share: keyword-only functions returning fresh, schema-valid dicts that
share nothing with their arguments, raising :class:`InvalidSpecError` naming the field for what
Kubernetes would reject. ``builders.objects`` re-exports both modules.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from builders._errors import InvalidSpecError
from builders._names import validate_labels, validate_name
from builders._objects import _drop_none, _fresh

__all__ = [
    "cluster_role",
    "cluster_role_binding",
    "config_map",
    "headless_service",
    "ingress",
    "pod_disruption_budget",
    "policy_rule",
    "role",
    "role_binding",
    "secret",
    "service",
    "service_account",
    "service_port",
    "subject",
]


def service_port(
    *,
    port: int,
    name: str | None = None,
    target_port: int | str | None = None,
    protocol: str = "TCP",
) -> dict[str, Any]:
    """One Service port; ``target_port`` defaults to ``port``."""
    if name is not None:
        validate_name(name, field="spec.ports[].name", rule="label")
    return _drop_none(
        {
            "name": name,
            "port": port,
            "targetPort": target_port if target_port is not None else port,
            "protocol": protocol,
        }
    )


def _ports(ports: Mapping[str, int] | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(ports, Mapping):
        return [service_port(name=n, port=p) for n, p in ports.items()]
    return [_fresh(dict(p)) for p in ports]


def service(
    *,
    metadata: Mapping[str, Any],
    selector: Mapping[str, str] | None,
    ports: Mapping[str, int] | Sequence[Mapping[str, Any]],
    type: str = "ClusterIP",
    cluster_ip: str | None = None,
) -> dict[str, Any]:
    """A ``v1`` Service (its name must be a DNS-1035 label); ``ports`` maps names to numbers."""
    validate_name(metadata.get("name"), rule="dns1035")
    if selector:
        validate_labels(selector, field="spec.selector")
    spec = _drop_none(
        {
            "type": type,
            "clusterIP": cluster_ip,
            "selector": dict(selector) if selector else None,
            "ports": _ports(ports),
        }
    )
    return {"apiVersion": "v1", "kind": "Service", "metadata": _fresh(dict(metadata)), "spec": spec}


def headless_service(
    *,
    metadata: Mapping[str, Any],
    selector: Mapping[str, str],
    ports: Mapping[str, int] | Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """A headless Service (``clusterIP: None``), as StatefulSets need."""
    return service(metadata=metadata, selector=selector, ports=ports, cluster_ip="None")


def service_account(*, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A ``v1`` ServiceAccount."""
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _fresh(dict(metadata))}


def config_map(
    *,
    metadata: Mapping[str, Any],
    data: Mapping[str, str] | None = None,
    binary_data: Mapping[str, bytes] | None = None,
) -> dict[str, Any]:
    """A ``v1`` ConfigMap; ``binary_data`` values are base64-encoded for you."""
    out: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _fresh(dict(metadata)),
    }
    if data:
        out["data"] = dict(data)
    if binary_data:
        out["binaryData"] = {k: base64.b64encode(v).decode() for k, v in binary_data.items()}
    return out


def secret(
    *,
    metadata: Mapping[str, Any],
    data: Mapping[str, str | bytes] | None = None,
    type: str = "Opaque",
) -> dict[str, Any]:
    """A ``v1`` Secret; ``data`` values (text or bytes) are base64-encoded into ``data``."""
    out: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _fresh(dict(metadata)),
        "type": type,
    }
    if data:
        out["data"] = {
            k: base64.b64encode(v.encode() if isinstance(v, str) else v).decode()
            for k, v in data.items()
        }
    return out


def policy_rule(
    *,
    api_groups: Iterable[str],
    resources: Iterable[str],
    verbs: Iterable[str],
    resource_names: Iterable[str] | None = None,
) -> dict[str, Any]:
    """One RBAC rule (``api_groups=[""]`` is the core group)."""
    rule = {"apiGroups": list(api_groups), "resources": list(resources), "verbs": list(verbs)}
    if not rule["verbs"]:
        raise InvalidSpecError(field="rules[].verbs", value=[], reason="must not be empty")
    return {**rule, **({"resourceNames": list(resource_names)} if resource_names else {})}


def role(*, metadata: Mapping[str, Any], rules: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A namespaced ``rbac.authorization.k8s.io/v1`` Role."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _fresh(dict(metadata)),
        "rules": _fresh([dict(r) for r in rules]),
    }


def cluster_role(
    *, metadata: Mapping[str, Any], rules: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """A cluster-scoped ClusterRole (its metadata must have no namespace)."""
    return {**role(metadata=metadata, rules=rules), "kind": "ClusterRole"}


def subject(
    *, name: str, namespace: str | None = None, kind: str = "ServiceAccount"
) -> dict[str, Any]:
    """An RBAC binding subject (a ServiceAccount by default, which needs its namespace)."""
    out = {"kind": kind, "name": name}
    if kind == "ServiceAccount":
        if not namespace:
            raise InvalidSpecError(
                field="subjects[].namespace", value=namespace, reason="ServiceAccounts need one"
            )
        out["namespace"] = namespace
    else:
        out["apiGroup"] = "rbac.authorization.k8s.io"
    return out


def role_binding(
    *,
    metadata: Mapping[str, Any],
    role_name: str,
    subjects: Sequence[Mapping[str, Any]],
    cluster_role: bool = False,
) -> dict[str, Any]:
    """A RoleBinding to the Role (or, with ``cluster_role``, ClusterRole) ``role_name``."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _fresh(dict(metadata)),
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole" if cluster_role else "Role",
            "name": role_name,
        },
        "subjects": _fresh([dict(s) for s in subjects]),
    }


def cluster_role_binding(
    *, metadata: Mapping[str, Any], role_name: str, subjects: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """A ClusterRoleBinding to the ClusterRole ``role_name``."""
    binding = role_binding(
        metadata=metadata, role_name=role_name, subjects=subjects, cluster_role=True
    )
    return {**binding, "kind": "ClusterRoleBinding"}


def ingress(
    *,
    metadata: Mapping[str, Any],
    host: str,
    service_name: str,
    service_port: int | str,
    path: str = "/",
    path_type: str = "Prefix",
    ingress_class_name: str | None = None,
    tls_secret_name: str | None = None,
) -> dict[str, Any]:
    """A ``networking.k8s.io/v1`` Ingress routing ``host``/``path`` to one Service port."""
    validate_name(host, field="spec.rules[].host", rule="subdomain")
    port = {"number": service_port} if isinstance(service_port, int) else {"name": service_port}
    backend = {"service": {"name": service_name, "port": port}}
    spec: dict[str, Any] = _drop_none({"ingressClassName": ingress_class_name})
    spec["rules"] = [
        {
            "host": host,
            "http": {"paths": [{"path": path, "pathType": path_type, "backend": backend}]},
        }
    ]
    if tls_secret_name:
        spec["tls"] = [{"hosts": [host], "secretName": tls_secret_name}]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": _fresh(dict(metadata)),
        "spec": spec,
    }


def pod_disruption_budget(
    *,
    metadata: Mapping[str, Any],
    selector_labels: Mapping[str, str],
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
) -> dict[str, Any]:
    """A ``policy/v1`` PodDisruptionBudget; exactly one of min_available/max_unavailable."""
    if (min_available is None) == (max_unavailable is None):
        raise InvalidSpecError(
            field="spec.minAvailable/maxUnavailable",
            value=(min_available, max_unavailable),
            reason="set exactly one",
        )
    validate_labels(selector_labels, field="spec.selector.matchLabels")
    spec = _drop_none(
        {
            "minAvailable": min_available,
            "maxUnavailable": max_unavailable,
            "selector": {"matchLabels": dict(selector_labels)},
        }
    )
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _fresh(dict(metadata)),
        "spec": spec,
    }
