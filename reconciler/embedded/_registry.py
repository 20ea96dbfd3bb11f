"""The served resource types of the embedded API server, and their per-kind behaviour.

``make_registry()`` returns the ``KindRegistry`` the server core consults: the built-in types
(with the discovery data a kube-apiserver 1.25 publishes for them: plural, singular, short names,
categories, verbs, scope and subresources, as ``discovery.json`` records) and the types that
CustomResourceDefinitions register while the server runs. Each type is paired with its
``KindStrategy``; the built-in kinds' strategies are in ``_strategies``. The registry knows
nothing of storage or HTTP.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from reconciler.embedded import _crds
from reconciler.embedded._admission import ADMISSION_GROUP, WebhookConfigurationStrategy
from reconciler.embedded._kinds import KindStrategy, ResourceType
from reconciler.embedded._strategies import StrategyFactory, builtin_strategies

__all__ = ["BUILTIN_TYPES", "Registry", "StrategyFactory", "make_registry"]

_READ_WRITE = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
# Namespaces cannot be deleted as a collection (discovery.json, /api/v1).
_NO_COLLECTION = ("create", "delete", "get", "list", "patch", "update", "watch")


def _rt(
    group: str,
    version: str,
    kind: str,
    plural: str,
    *,
    namespaced: bool = True,
    short_names: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
    subresources: tuple[str, ...] = (),
    verbs: tuple[str, ...] = _READ_WRITE,
    has_generation: bool = False,
) -> ResourceType:
    return ResourceType(
        group=group,
        version=version,
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        namespaced=namespaced,
        short_names=short_names,
        categories=categories,
        subresources=frozenset(subresources),
        verbs=verbs,
        has_generation=has_generation,
    )


# The built-in types. Discovery data as kube-apiserver 1.25 serves it (discovery.json records
# core/v1, apps/v1, rbac and apiextensions; the other groups follow the same release).
# ``has_generation`` is true exactly for the kinds whose registry strategy maintains
# metadata.generation in that release.
BUILTIN_TYPES: tuple[ResourceType, ...] = (
    # core/v1
    _rt("", "v1", "ConfigMap", "configmaps", short_names=("cm",)),
    _rt("", "v1", "Event", "events", short_names=("ev",)),
    _rt("", "v1", "Namespace", "namespaces", namespaced=False, short_names=("ns",),
        subresources=("status", "finalize"), verbs=_NO_COLLECTION),
    _rt("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", short_names=("pvc",),
        subresources=("status",)),
    _rt("", "v1", "Pod", "pods", short_names=("po",), categories=("all",),
        subresources=("status",)),
    _rt("", "v1", "ResourceQuota", "resourcequotas", short_names=("quota",),
        subresources=("status",)),
    _rt("", "v1", "Secret", "secrets"),
    _rt("", "v1", "ServiceAccount", "serviceaccounts", short_names=("sa",)),
    _rt("", "v1", "Service", "services", short_names=("svc",), categories=("all",),
        subresources=("status",)),
    # apps/v1
    _rt("apps", "v1", "DaemonSet", "daemonsets", short_names=("ds",), categories=("all",),
        subresources=("status",), has_generation=True),
    _rt("apps", "v1", "Deployment", "deployments", short_names=("deploy",), categories=("all",),
        subresources=("status", "scale"), has_generation=True),
    _rt("apps", "v1", "ReplicaSet", "replicasets", short_names=("rs",), categories=("all",),
        subresources=("status", "scale"), has_generation=True),
    _rt("apps", "v1", "StatefulSet", "statefulsets", short_names=("sts",), categories=("all",),
        subresources=("status", "scale"), has_generation=True),
    # autoscaling/v2
    _rt("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers",
        short_names=("hpa",), categories=("all",), subresources=("status",)),
    # batch/v1
    _rt("batch", "v1", "Job", "jobs", categories=("all",), subresources=("status",),
        has_generation=True),
    # coordination.k8s.io/v1
    _rt("coordination.k8s.io", "v1", "Lease", "leases"),
    # events.k8s.io/v1
    _rt("events.k8s.io", "v1", "Event", "events", short_names=("ev",)),
    # networking.k8s.io/v1
    _rt("networking.k8s.io", "v1", "Ingress", "ingresses", short_names=("ing",),
        subresources=("status",), has_generation=True),
    # policy/v1
    _rt("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", short_names=("pdb",),
        subresources=("status",), has_generation=True),
    # rbac.authorization.k8s.io/v1
    _rt("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings",
        namespaced=False),
    _rt("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", namespaced=False),
    _rt("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings"),
    _rt("rbac.authorization.k8s.io", "v1", "Role", "roles"),
    # admissionregistration.k8s.io/v1 (the webhooks ``_admission`` calls)
    _rt("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations", namespaced=False, categories=("api-extensions",)),
    _rt("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations", namespaced=False, categories=("api-extensions",)),
    # apiextensions.k8s.io/v1
    _rt("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions",
        namespaced=False, short_names=("crd", "crds"), categories=("api-extensions",),
        subresources=("status",), has_generation=True),
)

_Tables = tuple[
    dict[tuple[str, str, str], ResourceType],
    dict[tuple[str, str], ResourceType],
    dict[ResourceType, KindStrategy],
]


class Registry:
    """The ``KindRegistry`` of one server: built-in types plus the types CRDs register.

    Safe to use from several threads: changes (a CRD applied or removed) are made under a lock
    and published as one new snapshot of all tables, so a reader sees the old or the new one.
    """

    def __init__(
        self,
        builtin: tuple[ResourceType, ...] = BUILTIN_TYPES,
        *,
        strategies: Mapping[tuple[str, str], StrategyFactory] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._strategy_factories: dict[tuple[str, str], StrategyFactory] = dict(strategies or {})
        self._builtin = builtin
        # One snapshot, swapped whole: (group, version, plural) -> type; (apiVersion, kind) ->
        # type; type -> strategy.
        self._tables: _Tables = ({}, {}, {})
        # CRD name -> the types it serves
        self._custom: dict[str, tuple[ResourceType, ...]] = {}
        self._custom_strategies: dict[ResourceType, KindStrategy] = {}
        self._rebuild()

    def _rebuild(self) -> None:
        by_path = {(t.group, t.version, t.plural): t for t in self._builtin}
        by_kind = {(t.api_version, t.kind): t for t in self._builtin}
        for served in self._custom.values():  # a built-in type is never shadowed
            for t in served:
                by_path.setdefault((t.group, t.version, t.plural), t)
                by_kind.setdefault((t.api_version, t.kind), t)
        previous = self._tables[2]
        strategies: dict[ResourceType, KindStrategy] = {}
        for t in self._builtin:
            strategies[t] = previous.get(t) or self._make_strategy(t)
        strategies.update(self._custom_strategies)
        self._tables = (by_path, by_kind, strategies)

    def _make_strategy(self, resource_type: ResourceType) -> KindStrategy:
        factory = self._strategy_factories.get((resource_type.group, resource_type.kind))
        return factory(resource_type) if factory else KindStrategy(resource_type)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        """The type served at ``/apis/<group>/<version>/<plural>``, or None."""
        return self._tables[0].get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        """The type for an object's ``apiVersion``/``kind``, or None."""
        return self._tables[1].get((api_version, kind))

    def all_types(self) -> list[ResourceType]:
        """Every served type, built-in first, for discovery."""
        return list(self._tables[0].values())

    def strategy(self, resource_type: ResourceType) -> KindStrategy:
        """The behaviour of a served type (a base ``KindStrategy`` for an unknown one)."""
        found = self._tables[2].get(resource_type)
        return found if found is not None else KindStrategy(resource_type)

    def crd_applied(self, crd: Mapping[str, Any]) -> None:
        """A CRD was created or updated: serve (or change) its served versions."""
        served = _crds.custom_types(crd)
        name = str(crd.get("metadata", {}).get("name", ""))
        with self._lock:
            for old in self._custom.get(name, ()):
                self._custom_strategies.pop(old, None)
            self._custom[name] = tuple(t for t, _ in served)
            for t, strategy in served:
                self._custom_strategies[t] = strategy
            self._rebuild()

    def crd_removed(self, crd: Mapping[str, Any]) -> None:
        """A CRD is gone: stop serving its types."""
        name = str(crd.get("metadata", {}).get("name", ""))
        with self._lock:
            for old in self._custom.pop(name, ()):
                self._custom_strategies.pop(old, None)
            self._rebuild()


def make_registry() -> Registry:
    """A fresh registry with every built-in type and its strategy; no custom types yet."""
    strategies = builtin_strategies()
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        strategies[(ADMISSION_GROUP, kind)] = WebhookConfigurationStrategy
    return Registry(BUILTIN_TYPES, strategies=strategies)
