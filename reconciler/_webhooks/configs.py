"""Where the API server finds the webhooks: the CRD's conversion stanza and the webhook
configurations, with the CA injected (what cert-manager's cainjector does).

Pure functions of the operator's :class:`builders.specs.Versions`, the CA bundle and where the
webhook listens: a URL (``https://127.0.0.1:PORT`` beside a local API server, as in the tests)
or a Service (``optk manifests``). The choices, documented in ``docs/webhooks.md``:

- admission rules name only the hub version with ``matchPolicy: Equivalent``, so the API server
  converts first and the functions see hub specs; only ``CREATE`` and ``UPDATE`` of the main
  resource (the status subresource, which the operator writes, never calls them);
- validation ``failurePolicy: Fail`` (nothing invalid gets in while the operator is down),
  defaulting ``Ignore`` (the builders fill the same defaults in, so nothing breaks without it);
- ``timeoutSeconds: 5`` for admission (the API server's own budget is 10 s by default and the
  answer is a pure function); conversion has the API server's fixed 30 s;
- ``sideEffects: None``, review version ``v1`` only.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from builders.specs import Versions

__all__ = [
    "CONVERT_PATH",
    "MUTATE_PATH",
    "VALIDATE_PATH",
    "WebhookEndpoint",
    "webhook_configurations",
    "with_conversion_webhook",
]

CONVERT_PATH = "/convert"
VALIDATE_PATH = "/validate"
MUTATE_PATH = "/mutate"
ADMISSION_TIMEOUT_SECONDS = 5


@attrs.frozen(kw_only=True)
class WebhookEndpoint:
    """Where the webhook server listens, as the API server reaches it, and the CA it trusts.

    Either ``url`` (the base, ``https://127.0.0.1:9443``) or ``service_name`` with
    ``service_namespace`` and ``service_port``.
    """

    ca_pem: bytes = attrs.field(repr=False)
    url: str | None = None
    service_name: str | None = None
    service_namespace: str | None = None
    service_port: int = 443

    def client_config(self, path: str) -> dict[str, Any]:
        """The ``clientConfig`` for the webhook at ``path``, with the CA bundle (none when
        ``ca_pem`` is empty: the operator or cert-manager's cainjector injects it later)."""
        out: dict[str, Any] = {}
        if self.ca_pem:
            out["caBundle"] = base64.b64encode(self.ca_pem).decode()
        if self.url is not None:
            out["url"] = self.url.rstrip("/") + path
        else:
            out["service"] = {"name": self.service_name, "namespace": self.service_namespace,
                              "port": self.service_port, "path": path}
        return out


def with_conversion_webhook(crd: Mapping[str, Any], endpoint: WebhookEndpoint) -> dict[str, Any]:
    """``crd`` with ``spec.conversion`` pointing at the webhook (strategy ``Webhook``, review
    version ``v1``, the CA injected); a new dict."""
    out = copy.deepcopy(dict(crd))
    out["spec"]["conversion"] = {
        "strategy": "Webhook",
        "webhook": {"conversionReviewVersions": ["v1"],
                    "clientConfig": endpoint.client_config(CONVERT_PATH)},
    }
    return out


def _plural(versions: Versions, crds: Mapping[tuple[str, str], str]) -> str:
    return crds.get((versions.group, versions.kind)) or f"{versions.kind.lower()}s"


def webhook_configurations(
    versions: Sequence[Versions],
    *,
    name: str,
    endpoint: WebhookEndpoint,
    plurals: Mapping[tuple[str, str], str] | None = None,
    validation_failure_policy: Literal["Fail", "Ignore"] = "Fail",
    defaulting_failure_policy: Literal["Fail", "Ignore"] = "Ignore",
    timeout_seconds: int = ADMISSION_TIMEOUT_SECONDS,
) -> list[dict[str, Any]]:
    """The ValidatingWebhookConfiguration and MutatingWebhookConfiguration called ``name`` for
    the kinds of ``versions`` that register a validation or a defaulting (none: no object).
    ``plurals`` maps ``(group, kind)`` to the resource name (default: the kind plus ``s``)."""
    found = plurals or {}
    out: list[dict[str, Any]] = []
    for config_kind, path, policy, attr in (
        ("ValidatingWebhookConfiguration", VALIDATE_PATH, validation_failure_policy, "validate"),
        ("MutatingWebhookConfiguration", MUTATE_PATH, defaulting_failure_policy, "default"),
    ):
        hooks = []
        for v in versions:
            if getattr(v, attr) is None:
                continue
            plural = _plural(v, found)
            hook: dict[str, Any] = {
                "name": f"{path.strip('/')}.{plural}.{v.group}",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": policy,
                "matchPolicy": "Equivalent",
                "timeoutSeconds": timeout_seconds,
                "clientConfig": endpoint.client_config(path),
                "rules": [{"apiGroups": [v.group], "apiVersions": [v.hub],
                           "resources": [plural], "operations": ["CREATE", "UPDATE"],
                           "scope": "*"}],
            }
            if config_kind.startswith("Mutating"):
                hook["reinvocationPolicy"] = "Never"
            hooks.append(hook)
        if hooks:
            out.append({"apiVersion": "admissionregistration.k8s.io/v1", "kind": config_kind,
                        "metadata": {"name": name}, "webhooks": hooks})
    return out
