"""Keyword-only helpers that build Kubernetes objects as fresh JSON-shaped dicts.

Each helper's output validates against the Kubernetes schema of
``objectmatcher.DEFAULT_KUBERNETES_VERSION``; workload helpers add the selector labels to the pod
template so the selector always matches. Use them inside your builders::

    from builders import objects

    objects.deployment(meta=..., selector_labels=..., containers=[objects.container(...)])

This public module only re-exports (the implementation is private); see ``docs/builders.md``.
"""

from __future__ import annotations

from builders._objects import (
    child_meta,
    container,
    copy_object,
    daemonset,
    deployment,
    object_meta,
    pod_template,
    probe,
    resources,
    statefulset,
    volume,
    volume_mount,
)
from builders._support_objects import (
    cluster_role,
    cluster_role_binding,
    config_map,
    headless_service,
    ingress,
    pod_disruption_budget,
    policy_rule,
    role,
    role_binding,
    secret,
    service,
    service_account,
    service_port,
    subject,
)

__all__ = [
    "child_meta",
    "cluster_role",
    "cluster_role_binding",
    "config_map",
    "container",
    "copy_object",
    "daemonset",
    "deployment",
    "headless_service",
    "ingress",
    "object_meta",
    "pod_disruption_budget",
    "pod_template",
    "policy_rule",
    "probe",
    "resources",
    "role",
    "role_binding",
    "secret",
    "service",
    "service_account",
    "service_port",
    "statefulset",
    "subject",
    "volume",
    "volume_mount",
]
