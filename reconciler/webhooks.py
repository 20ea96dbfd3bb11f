"""Webhooks from pure functions: conversion, validation and defaulting of a versioned API.

The operator's :class:`builders.specs.Versions` (spec classes per version, conversions through
the hub, ``validate`` and ``default``) are served over HTTPS by :class:`WebhookServer`
(``/convert``, ``/validate``, ``/mutate``); the answers themselves are the pure
:func:`conversion_response` and :func:`admission_response`. :class:`WebhookCertificates` are
made by the toolkit (kept in a Secret by :func:`ensure_secret`, rotated when a third of their
validity is left) or read from cert-manager's files; :func:`with_conversion_webhook` and
:func:`webhook_configurations` inject the CA where the API server reads it. See
``docs/webhooks.md``. :class:`Webhooks` puts it all in a running operator: an
``Operator(on_start=[Webhooks(...)])`` hook that serves, injects and rotates, and that
``optk manifests`` reads for the Service, the configurations and the RBAC.
"""

from __future__ import annotations

from reconciler._webhooks.certificates import WebhookCertificates, ensure_secret
from reconciler._webhooks.configs import (
    CONVERT_PATH,
    MUTATE_PATH,
    VALIDATE_PATH,
    WebhookEndpoint,
    webhook_configurations,
    with_conversion_webhook,
)
from reconciler._webhooks.reviews import VersionsIndex, admission_response, conversion_response
from reconciler._webhooks.server import WebhookServer
from reconciler._webhooks.serving import WEBHOOK_PORT, Webhooks, inject

__all__ = [
    "CONVERT_PATH",
    "MUTATE_PATH",
    "VALIDATE_PATH",
    "WEBHOOK_PORT",
    "VersionsIndex",
    "WebhookCertificates",
    "WebhookEndpoint",
    "WebhookServer",
    "Webhooks",
    "admission_response",
    "conversion_response",
    "ensure_secret",
    "inject",
    "webhook_configurations",
    "with_conversion_webhook",
]
