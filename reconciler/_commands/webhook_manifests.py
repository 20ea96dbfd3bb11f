"""What ``optk manifests`` adds for an operator that serves webhooks (a ``Webhooks`` start hook).

Pure: from the operator's :class:`reconciler.webhooks.Webhooks` hook and the deploy namespace,
the container port, the Service in front of the pods, the CRDs with their conversion stanza
(the Service, no CA: the operator injects it when it starts, and ``kubectl apply`` keeps what it
never set), the webhook configurations (likewise), and the RBAC rules the hook needs (its Secret,
its CRDs, its configurations). The rest of the stream is ``manifests``'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from reconciler._commands.rbac import PolicyRule
from reconciler._webhooks.serving import Webhooks

__all__ = ["WEBHOOK_PORT_NAME", "webhook_container_port", "webhook_objects", "webhook_rules",
           "webhooks_of"]

WEBHOOK_PORT_NAME = "webhooks"


def webhooks_of(on_start: Sequence[Any], *, namespace: str) -> tuple[Webhooks, ...]:
    """The ``Webhooks`` hooks among an operator's start hooks, placed in ``namespace``."""
    return tuple(attrs.evolve(h, namespace=namespace) for h in on_start
                 if isinstance(h, Webhooks))


def webhook_container_port(hooks: Sequence[Webhooks]) -> list[dict[str, Any]]:
    """The operator container's webhook port (none without webhooks)."""
    return [{"name": WEBHOOK_PORT_NAME, "containerPort": hooks[0].port, "protocol": "TCP"}
            ] if hooks else []


def webhook_objects(
    hooks: Sequence[Webhooks], *, selector: Mapping[str, str], metadata: Any,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The Services and webhook configurations to apply, and the CRDs (by name) to apply in
    place of the install's own: with their conversion stanza, without a CA."""
    objects: list[dict[str, Any]] = []
    crds: dict[str, dict[str, Any]] = {}
    for hook in hooks:
        namespace = hook.in_namespace
        objects.append({
            "apiVersion": "v1", "kind": "Service", "metadata": metadata(hook.name, namespace),
            "spec": {"selector": dict(selector), "ports": [
                {"name": WEBHOOK_PORT_NAME, "port": 443, "targetPort": WEBHOOK_PORT_NAME,
                 "protocol": "TCP"}]}})
        for obj in hook.objects(b""):
            if obj["kind"] == "CustomResourceDefinition":
                crds[obj["metadata"]["name"]] = obj
            else:
                objects.append(obj)
    return objects, crds


def webhook_rules(hooks: Sequence[Webhooks]) -> list[PolicyRule]:
    """What the hook reads and writes: its Secret (in its namespace), its CRDs' conversion
    stanza, its webhook configurations."""
    rules: list[PolicyRule] = []
    for hook in hooks:
        ns = hook.in_namespace
        if hook.certificates_dir is None:
            rules += [
                PolicyRule(api_groups=("",), resources=("secrets",), verbs=("create",),
                           namespace=ns, reason="webhooks: create the certificates' Secret"),
                PolicyRule(api_groups=("",), resources=("secrets",), verbs=("get", "update"),
                           resource_names=(hook.secret_name,), namespace=ns,
                           reason="webhooks: read and rotate the certificates"),
            ]
        crd_names = tuple(c["metadata"]["name"] for c in hook.crds
                          if len(c["spec"]["versions"]) > 1)
        if crd_names:
            rules.append(PolicyRule(
                api_groups=("apiextensions.k8s.io",), resources=("customresourcedefinitions",),
                verbs=("get", "update"), resource_names=crd_names,
                reason="webhooks: inject the CA into the conversion stanza"))
        configs = ("validatingwebhookconfigurations", "mutatingwebhookconfigurations")
        rules += [
            PolicyRule(api_groups=("admissionregistration.k8s.io",), resources=configs,
                       verbs=("create",), reason="webhooks: create the webhook configurations"),
            PolicyRule(api_groups=("admissionregistration.k8s.io",), resources=configs,
                       verbs=("get", "update"), resource_names=(hook.name,),
                       reason="webhooks: inject the CA into the webhook configurations"),
        ]
    return rules
