"""The Thanos operator: the ``Operator`` definition, plus the watch that enables ServiceMonitors.

``operator`` is what ``optk run examples.thanos.operator:operator`` runs: ``Thanos`` parents, the
pure ``build`` of ``examples.thanos.builders``, the Thanos CRD installed at start, and pruning of
the kinds it builds. ServiceMonitors are built only while their CRD is served:
``ServiceMonitorSwitch`` holds that fact for ``build`` and, as the operator's ``on_start`` hook,
keeps it current from a CRD informer and resyncs every parent the moment the CRD appears or goes.
The hook runs wherever the operator runs: under ``optk run``, in ``start_operator(client)``
(``python -m examples.thanos`` and the demo use it) and in tests.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from builders import ResourceBuilder
from examples.thanos import builders as thanos
from examples.thanos.crds import (
    API_VERSION,
    KIND,
    SERVICE_MONITOR_API_VERSION,
    SERVICE_MONITOR_CRD_NAME,
    SERVICE_MONITOR_KIND,
    THANOS_CRD,
    THANOS_VERSIONED_CRD,
    THANOS_VERSIONS,
)
from reconciler import ClusterClient, Operator, OperatorRuntime, watches
from reconciler.informers import Informer
from reconciler.webhooks import Webhooks

CRD_API_VERSION = "apiextensions.k8s.io/v1"


def crd_established(crd: Mapping[str, Any] | None) -> bool:
    """Whether a CustomResourceDefinition is serving: Established and not being deleted."""
    if not crd or (crd.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (crd.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


class ServiceMonitorSwitch:
    """Whether the ServiceMonitor CRD is served, as ``build`` sees it; safe across threads."""

    def __init__(self) -> None:
        self._served = False
        self._lock = threading.Lock()

    @property
    def served(self) -> bool:
        """The last state seen by the watch (False until it reports)."""
        with self._lock:
            return self._served

    def build(self, parent: Mapping[str, Any]) -> list[ResourceBuilder]:
        """The operator's builders for ``parent`` with ServiceMonitors as currently served."""
        return thanos.build(parent, service_monitors=self.served)

    def watch(self, client: ClusterClient, runtime: OperatorRuntime) -> Informer:
        """Start an informer on the ServiceMonitor CRD; each flip resyncs every parent."""
        informer = Informer(
            client, CRD_API_VERSION, "CustomResourceDefinition",
            field_selector=f"metadata.name={SERVICE_MONITOR_CRD_NAME}",
        )

        def on_event(event_type: str, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
            served = event_type != "DELETED" and crd_established(new)
            with self._lock:
                changed, self._served = served != self._served, served
            if changed:
                runtime.resync_all()

        informer.add_handler(on_event)
        return informer.start()

    @watches((CRD_API_VERSION, "CustomResourceDefinition"),
             enables=[(SERVICE_MONITOR_API_VERSION, SERVICE_MONITOR_KIND)])
    def on_start(self, runtime: OperatorRuntime) -> Callable[[], None]:
        """The operator's ``on_start`` hook: run the CRD watch beside it; stop it with it."""
        return self.watch(runtime.client, runtime).stop


PRUNE = (
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("v1", "Service"),
    ("networking.k8s.io/v1", "Ingress"),
)
"""Kinds whose children of a parent that are no longer built are deleted (renames, leftovers)."""


def make_operator(switch: ServiceMonitorSwitch) -> Operator:
    """The Thanos ``Operator`` building with ``switch``."""
    return Operator(
        api_version=API_VERSION, kind=KIND, build=switch.build, name=thanos.OPERATOR_NAME,
        install=[THANOS_CRD], prune=PRUNE, on_start=[switch.on_start],
        reuse_builds=True,  # build reads only the parent and the switch, which calls resync_all
    )


service_monitors = ServiceMonitorSwitch()
"""The switch ``operator`` builds with."""

operator = make_operator(service_monitors)
"""The Thanos operator, as ``optk run examples.thanos.operator:operator`` loads it."""

WEBHOOKS = Webhooks(versions=[THANOS_VERSIONS], crds=[THANOS_VERSIONED_CRD],
                    name="thanos-webhooks")
"""The versioned operator's webhooks: conversion v1alpha1 <-> v1alpha2, validation, defaulting
(the Service ``thanos-webhooks`` in the operator's namespace)."""


def make_versioned_operator(switch: ServiceMonitorSwitch, *,
                            webhooks: Webhooks = WEBHOOKS) -> Operator:
    """The Thanos operator serving v1alpha1 and v1alpha2 (stored) through its own webhooks; it
    still reads its parents at v1alpha1, as its builders do."""
    return attrs.evolve(make_operator(switch), install=[THANOS_VERSIONED_CRD],
                        on_start=[switch.on_start, webhooks])


versioned_operator = make_versioned_operator(ServiceMonitorSwitch())
"""``optk run|manifests examples.thanos.operator:versioned_operator``: the two-version API."""

samples = Path(__file__).with_name("samples.yaml")
"""The sample parents ``optk manifests`` evaluates the builders over to derive the role."""


def start_operator(client: ClusterClient) -> OperatorRuntime:
    """Start a fresh Thanos operator against ``client``; its ServiceMonitor CRD watch runs as an
    ``on_start`` hook and stops with the runtime."""
    return make_operator(ServiceMonitorSwitch()).start(client)
