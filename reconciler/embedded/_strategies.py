"""The per-kind behaviour of the embedded server's built-in types: their ``KindStrategy``.

``BuiltinStrategy`` holds what built-in kinds share; a subclass per kind supplies its steps by
wiring together the defaulting (``_defaulting``), validation (``objectmatcher._validation``,
whose per-kind table the builders' testing kit uses too, and ``_names``) and custom-resource
(``_crds``) rules: Namespaces, Services (cluster IPs, node ports), Pods (QoS
class), Secrets, workloads, Events, RBAC, CRDs, ... ``builtin_strategies()`` maps each
(group, kind) to its strategy for ``_registry.make_registry``. Pure rules: no storage, no HTTP.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from objectmatcher import _validation
from reconciler.embedded import _crds, _defaulting
from reconciler.embedded._kinds import Invalid, KindStrategy, ResourceType, ServerContext
from reconciler.embedded._names import (
    NameRule,
    dns1035_label,
    dns1123_label,
    dns1123_subdomain,
    path_segment_name,
    validate_metadata,
    validate_metadata_name,
)
from reconciler.embedded._statuses import bad_request

__all__ = ["BuiltinStrategy", "StrategyFactory", "builtin_strategies"]

StrategyFactory = Callable[[ResourceType], KindStrategy]
"""Builds the ``KindStrategy`` of one served type."""


Cause = _validation.Cause


class BuiltinStrategy(KindStrategy):
    """The behaviour shared by built-in kinds; subclasses supply the per-kind steps.

    Every write is first "decoded" against the kind's 1.25 schema: values of the wrong type are
    refused, unknown fields dropped. Create: a kind with a status subresource starts from its
    initial status (what was sent is dropped), then ``default_on_create``. Update through the
    main resource: the stored status and ``creationTimestamp`` are kept, then ``default``.
    Validation: the name (``name_rule``) on create, ``metadata.uid`` on update, ``validate`` on
    both, and ``validate_changes`` (immutable fields) on update. ``generation`` follows
    ``generation_fields``.
    """

    name_rule: NameRule = staticmethod(dns1123_subdomain)
    changes_first: bool = False  # the order of the causes: immutable fields before the rest

    def default(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        """Fill the fields the server defaults for this kind (create and update)."""

    def default_on_create(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        """Defaults of a new object: ``default`` plus what only creation adds (admission)."""
        self.default(obj, ctx)

    def validate(self, obj: Mapping[str, Any]) -> list[Cause]:
        """The causes that make this object invalid on its own: the kind's rules of
        ``objectmatcher._validation`` (the table ``check_builders`` uses too)."""
        rt = self.resource_type
        return _validation.kind_causes(rt.group, rt.kind, obj)

    def validate_changes(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
        """The causes for fields that may not change (immutable fields)."""
        return []

    def generation_fields(self, obj: Mapping[str, Any]) -> Any:
        """The part of the object whose change bumps ``metadata.generation``: its ``spec``."""
        return obj.get("spec")

    @property
    def has_status_subresource(self) -> bool:
        """Whether ``/status`` is served, so the main resource ignores ``status``."""
        return "status" in self.resource_type.subresources

    def unknown_fields(self, obj: Mapping[str, Any]) -> list[str]:
        """Paths of the fields the kind's 1.25 schema does not have."""
        rt = self.resource_type
        return _defaulting.drop_unknown_fields(
            dict(obj), drop=False, api_version=rt.api_version, kind=rt.kind
        )

    def _decode(self, obj: dict[str, Any]) -> None:
        rt = self.resource_type
        self._canonical_quantities(obj)  # first: a null quantity is "0", not ""
        _defaulting.decode_builtin(obj, api_version=rt.api_version, kind=rt.kind)

    def _canonical_quantities(self, obj: dict[str, Any]) -> None:
        rt = self.resource_type
        if _defaulting.canonical_quantities(obj, api_version=rt.api_version, kind=rt.kind):
            raise bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                "quantities must match the regular expression "
                f"'{_defaulting.QUANTITY_PATTERN}'"
            )

    def prepare_create(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        """Refuse values of the wrong type, drop unknown fields, reset the status of a kind with
        a status subresource (what was sent is ignored), then fill the defaults."""
        self._decode(obj)
        if self.has_status_subresource:
            rt = self.resource_type
            status = _defaulting.initial_status(rt.group, rt.kind)
            if status is None:
                obj.pop("status", None)
            else:
                obj["status"] = status
        self.default_on_create(obj, ctx)

    def validate_create(self, obj: dict[str, Any]) -> None:
        """Name rule, labels/annotations/finalizers/owners, the kind's rules; ``Invalid`` if any."""
        causes = (
            validate_metadata_name(obj, self.name_rule)
            + validate_metadata(obj)
            + self.validate(obj)
        )
        if causes:
            raise Invalid(causes)

    def prepare_update(
        self, old: Mapping[str, Any], new: dict[str, Any], ctx: ServerContext
    ) -> None:
        """Refuse values of the wrong type, drop unknown fields, keep the stored status (status
        subresource) and creationTimestamp, then default."""
        self._decode(new)
        _defaulting.keep_server_fields(
            old, new, status_subresource=self.has_status_subresource
        )
        self.default(new, ctx)

    def validate_update(self, old: Mapping[str, Any], new: dict[str, Any]) -> None:
        """``metadata.uid``, labels and the like, the kind's own rules, its immutable fields."""
        own, changes = self.validate(new), self.validate_changes(old, new)
        causes = _validation.validate_uid_update(old, new) + validate_metadata(new) + (
            changes + own if self.changes_first else own + changes
        )
        if causes:
            raise Invalid(causes)

    def prepare_status_update(self, old: Mapping[str, Any], new: dict[str, Any]) -> None:
        """Through ``/status``: keep everything of ``old`` except ``status`` (pruned)."""
        _defaulting.keep_all_but_status(old, new)
        if "status" in new:  # only the status is the client's; the rest is stored as it was
            rt = self.resource_type
            _defaulting.drop_unknown_fields(
                {"status": new["status"]}, api_version=rt.api_version, kind=rt.kind
            )
            self._canonical_quantities(new)

    def spec_changed(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        """Whether ``generation_fields`` differ (only for kinds with a generation)."""
        if not self.resource_type.has_generation:
            return False
        return bool(self.generation_fields(old) != self.generation_fields(new))


class _Namespace(BuiltinStrategy):
    name_rule = staticmethod(dns1123_label)

    def default(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        _defaulting.default_namespace(obj)


class _Service(BuiltinStrategy):
    name_rule = staticmethod(dns1035_label)
    changes_first = True

    def prepare_update(
        self, old: Mapping[str, Any], new: dict[str, Any], ctx: ServerContext
    ) -> None:
        # A PUT of a desired Service without clusterIP or nodePorts keeps the allocated ones.
        _defaulting.keep_allocated_service_values(old, new)
        super().prepare_update(old, new, ctx)

    def default_on_create(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        _defaulting.default_service(obj, ctx, creating=True)

    def default(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        _defaulting.default_service(obj, ctx)

    def validate_changes(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
        return _validation.validate_service_update(old, new)

    def on_delete(self, obj: Mapping[str, Any], ctx: ServerContext) -> None:
        spec = obj.get("spec") or {}
        ip = spec.get("clusterIP")
        if ip and ip != "None":
            ctx.release_cluster_ip(str(ip))
        for port in spec.get("ports") or ():
            if port.get("nodePort"):
                ctx.release_node_port(int(port["nodePort"]))


class _Pod(BuiltinStrategy):
    def default_on_create(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        self.default(obj, ctx)
        _defaulting.mount_service_account_token(obj)
        obj["status"]["qosClass"] = _qos_class(obj.get("spec") or {})

    def default(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        _defaulting.default_pod(obj, ctx)

    def validate_changes(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
        return _validation.validate_pod_update(old, new)


def _qos_class(spec: Mapping[str, Any]) -> str:
    containers = list(spec.get("containers") or ()) + list(spec.get("initContainers") or ())
    any_set = False
    guaranteed = True
    for container in containers:
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        if requests or limits:
            any_set = True
        for name in ("cpu", "memory"):
            if name not in limits or requests.get(name, limits[name]) != limits[name]:
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


class _Secret(BuiltinStrategy):
    changes_first = True

    def default(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        _defaulting.default_secret(obj)

    def validate_changes(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
        return _validation.validate_secret_update(old, new)


class _ConfigMap(BuiltinStrategy):
    changes_first = True

    def validate_changes(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
        return _validation.validate_configmap_update(old, new)


class _PersistentVolumeClaim(BuiltinStrategy):
    def default_on_create(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        _defaulting.default_pvc(obj)  # with the protection finalizer: admission, create only

    def default(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            spec.setdefault("volumeMode", "Filesystem")

    def validate_changes(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
        return _validation.validate_pvc_update(old, new)


class _Workload(BuiltinStrategy):
    """Deployment, DaemonSet, ReplicaSet: selector/template rules and an immutable selector."""

    def default(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        _WORKLOAD_DEFAULTS[self.resource_type.kind](obj)

    def validate_changes(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
        return _validation.validate_workload_selector_update(old, new)


_WORKLOAD_DEFAULTS = {
    "Deployment": _defaulting.default_deployment,
    "DaemonSet": _defaulting.default_daemonset,
    "ReplicaSet": _defaulting.default_replicaset,
    "StatefulSet": _defaulting.default_statefulset,
}


class _Deployment(_Workload):
    def generation_fields(self, obj: Mapping[str, Any]) -> Any:
        # apps/v1 Deployments also bump generation on annotation changes (generation.json).
        return (obj.get("spec"), (obj.get("metadata") or {}).get("annotations") or {})


class _DaemonSet(_Workload):
    """apps/v1 DaemonSets carry their template generation in an annotation."""

    def default_on_create(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        super().default_on_create(obj, ctx)
        _defaulting.default_daemonset_template_generation(obj)

    def prepare_update(
        self, old: Mapping[str, Any], new: dict[str, Any], ctx: ServerContext
    ) -> None:
        super().prepare_update(old, new, ctx)
        _defaulting.default_daemonset_template_generation(new, old)


class _StatefulSet(_Workload):
    def validate_changes(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
        return _validation.validate_statefulset_update(old, new)


class _Job(BuiltinStrategy):
    def default(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        _defaulting.default_job(obj)

    def validate_changes(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
        return _validation.validate_job_update(old, new)


class _CoreEvent(BuiltinStrategy):
    def default(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        _defaulting.default_core_event(obj)


class _EventsEvent(BuiltinStrategy):
    def default(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        _defaulting.default_events_event(obj)

    def validate_create(self, obj: dict[str, Any]) -> None:
        # Only a new events.k8s.io Event must carry these; updates of old ones need not.
        super().validate_create(obj)
        causes = _validation.validate_events_event(obj)
        if causes:
            raise Invalid(causes)


class _HorizontalPodAutoscaler(BuiltinStrategy):
    def default(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        _defaulting.default_hpa(obj)

    def prepare_status_update(self, old: Mapping[str, Any], new: dict[str, Any]) -> None:
        super().prepare_status_update(old, new)
        _defaulting.default_hpa_status(new)


class _Rbac(BuiltinStrategy):
    name_rule = staticmethod(path_segment_name)


class _RoleBinding(_Rbac):
    def default(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        _defaulting.default_role_binding(obj)

    def validate_changes(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
        return _validation.validate_role_binding_update(old, new)


class _CustomResourceDefinition(BuiltinStrategy):
    def prepare_create(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        super().prepare_create(obj, ctx)
        # A real server's controller establishes the CRD moments after the POST; here the
        # stored object is established at once (as a GET shortly after would show it).
        obj["status"] = _crds.established_status(obj)

    def prepare_update(
        self, old: Mapping[str, Any], new: dict[str, Any], ctx: ServerContext
    ) -> None:
        super().prepare_update(old, new, ctx)
        new["status"] = _crds.updated_status(old, new)

    def default(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        _crds.default_crd(obj)

    def validate(self, obj: Mapping[str, Any]) -> list[Cause]:
        return _crds.validate_crd(obj)

    def validate_changes(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
        return _crds.validate_crd_update(old, new)


def builtin_strategies() -> dict[tuple[str, str], StrategyFactory]:
    """The strategy of every built-in (group, kind)."""
    rbac = "rbac.authorization.k8s.io"
    return {
        ("", "Namespace"): _Namespace,
        ("", "Service"): _Service,
        ("", "Pod"): _Pod,
        ("", "Secret"): _Secret,
        ("", "ConfigMap"): _ConfigMap,
        ("", "PersistentVolumeClaim"): _PersistentVolumeClaim,
        ("", "ServiceAccount"): BuiltinStrategy,
        ("", "ResourceQuota"): BuiltinStrategy,
        ("", "Event"): _CoreEvent,
        ("events.k8s.io", "Event"): _EventsEvent,
        ("apps", "Deployment"): _Deployment,
        ("apps", "StatefulSet"): _StatefulSet,
        ("apps", "DaemonSet"): _DaemonSet,
        ("apps", "ReplicaSet"): _Workload,
        ("batch", "Job"): _Job,
        ("coordination.k8s.io", "Lease"): BuiltinStrategy,
        ("networking.k8s.io", "Ingress"): BuiltinStrategy,
        ("policy", "PodDisruptionBudget"): BuiltinStrategy,
        ("autoscaling", "HorizontalPodAutoscaler"): _HorizontalPodAutoscaler,
        (rbac, "Role"): _Rbac,
        (rbac, "ClusterRole"): _Rbac,
        (rbac, "RoleBinding"): _RoleBinding,
        (rbac, "ClusterRoleBinding"): _RoleBinding,
        ("apiextensions.k8s.io", "CustomResourceDefinition"): _CustomResourceDefinition,
    }
