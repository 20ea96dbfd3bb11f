"""The Thanos operator: the ``Operator`` definition.

``operator`` is what ``optk run examples.thanos.operator:operator`` runs: ``Thanos`` parents, the
pure ``build_with_inputs`` of ``examples.thanos.builders``, the Thanos CRD installed at start, and
pruning of the kinds it builds. What the builders read besides the parent is declared
(``examples.thanos.builders.declared_inputs``): whether the ServiceMonitor CRD is served (an
activation input: ServiceMonitors are built only while it is, and every parent is reconciled the
moment it appears or goes) and the store gateway's object-storage Secret (missing: the parent
says ``InputMissing`` and the rest of its children converge; rotated: the StatefulSet rolls
once). No ``on_start`` hook and no ``resync_all()``: the driver's inputs do it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from builders.health import health_of
from examples.thanos import builders as thanos
from examples.thanos.crds import (
    API_VERSION,
    KIND,
    THANOS_CRD,
    THANOS_VERSIONED_CRD,
    THANOS_VERSIONS,
)
from reconciler import ClusterClient, Operator, OperatorRuntime, Policies
from reconciler.webhooks import Webhooks


def crd_established(crd: Mapping[str, Any] | None) -> bool:
    """Whether a CustomResourceDefinition is serving: ``builders.health``'s CRD rule
    (Established, names accepted, not being deleted)."""
    return bool(crd) and health_of(crd).current


PRUNE = (
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("v1", "Service"),
    ("networking.k8s.io/v1", "Ingress"),
)
"""Kinds whose children of a parent that are no longer built are deleted (renames, leftovers)."""


def make_operator() -> Operator:
    """The Thanos ``Operator``: its builders read the parent and the declared inputs."""
    return Operator(
        api_version=API_VERSION, kind=KIND, build=thanos.build_with_inputs,
        inputs=thanos.declared_inputs, name=thanos.OPERATOR_NAME, install=[THANOS_CRD],
        policies=Policies(prune=PRUNE),
    )


operator = make_operator()
"""The Thanos operator, as ``optk run examples.thanos.operator:operator`` loads it."""

WEBHOOKS = Webhooks(versions=[THANOS_VERSIONS], crds=[THANOS_VERSIONED_CRD],
                    name="thanos-webhooks")
"""The versioned operator's webhooks: conversion v1alpha1 <-> v1alpha2, validation, defaulting
(the Service ``thanos-webhooks`` in the operator's namespace)."""


def make_versioned_operator(*, webhooks: Webhooks = WEBHOOKS) -> Operator:
    """The Thanos operator serving v1alpha1 and v1alpha2 (stored) through its own webhooks; it
    still reads its parents at v1alpha1, as its builders do."""
    return attrs.evolve(make_operator(), install=[THANOS_VERSIONED_CRD], on_start=[webhooks])


versioned_operator = make_versioned_operator()
"""``optk run|manifests examples.thanos.operator:versioned_operator``: the two-version API."""

samples = Path(__file__).with_name("samples.yaml")
"""The sample parents ``optk manifests`` evaluates the builders over to derive the role."""


def start_operator(client: ClusterClient) -> OperatorRuntime:
    """Start a fresh Thanos operator against ``client`` (its inputs' informers stop with it)."""
    return make_operator().start(client)
