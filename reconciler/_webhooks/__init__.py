"""The operator's webhooks: conversion, validation and defaulting served from pure functions.

Modules: ``reviews`` (pure: ConversionReview and AdmissionReview answers from
``builders.specs.Versions``), ``configs`` (pure: the CRD's conversion stanza and the webhook
configurations, CA injected), ``certificates`` (``WebhookCertificates``: made into a Secret and
rotated, or read from cert-manager's files), ``server`` (``WebhookServer``: HTTPS, per-connection
TLS context for rotation), ``serving`` (``Webhooks``: the ``on_start`` hook that serves, injects
the CA and rotates).

Private: the public names are re-exported by ``reconciler.webhooks``.
"""
