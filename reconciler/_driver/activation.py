"""Activation: parents whose components wait for a kind to be served are reconciled when a CRD
starts serving it.

``Component(when_served=True)`` holds a component back while the kinds it builds are not served
(its CRD missing or not yet Established): the reconcile reports ``KindNotServed`` and registers
the kind with the parent's waits (``reconciler._reconcile.waits``). :func:`watch_served_kinds` is
an ``Operator.on_start`` hook that runs one informer on every CustomResourceDefinition and, when a
CRD's Established verdict flips, queues exactly the parents that wait for a kind it serves: no
polling, no resync of every parent (the generalised form of the Thanos example's ServiceMonitor
switch). The facade exports it with its ``@watches`` declaration, so ``optk manifests`` grants
``list`` and ``watch`` on CRDs.

Boundary: the watch and the routing of its events only; which parents wait on which kind is the
registry's, what a waiting component does is ``reconciler._reconcile.ordering``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reconciler._cache.informers import Informer
from reconciler._driver.hooks import StartContext
from reconciler._reconcile.ordering import crd_established

__all__ = ["crd_kinds", "watch_served_kinds"]

CRD_API_VERSION = "apiextensions.k8s.io/v1"


def crd_kinds(crd: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The ``(apiVersion, kind)`` pairs a CRD serves (one per served version)."""
    spec = crd.get("spec") or {}
    kind = (spec.get("names") or {}).get("kind")
    return [(f"{spec.get('group')}/{version.get('name')}", str(kind))
            for version in spec.get("versions") or () if version.get("served", True) and kind]


def _serving(event_type: str, crd: Mapping[str, Any] | None) -> bool:
    return crd is not None and event_type != "DELETED" and crd_established(crd) is None


def watch_served_kinds(context: StartContext) -> Callable[[], None]:
    """``Operator(on_start=[watch_served_kinds])``: reconcile the parents waiting for a kind as
    soon as a CRD serves it; returns the informer's stop (the runtime calls it when it stops)."""
    waits = context.waits
    informer = Informer(context.client, CRD_API_VERSION, "CustomResourceDefinition")

    def on_event(event_type: str, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        before = _serving("MODIFIED", old) if event_type != "ADDED" else False
        if _serving(event_type, new) == before:
            return
        for kind in crd_kinds(new):
            for namespace, name in waits.waiting_on_kind(kind):
                context.request(namespace, name)

    informer.add_handler(on_event)
    return informer.start().stop
