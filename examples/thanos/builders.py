"""The pure builders of the Thanos example: one ``Component`` of children per spec block.

``build(parent, service_monitors=...)`` is the whole operator as a function of a ``Thanos`` parent:
each of ``query``, ``queryFrontend``, ``storeGateway`` and ``rule`` that is present in the spec
gets its workload (Deployment, or StatefulSet for the stateful two), its Service, an Ingress when
the block asks for one, and a ServiceMonitor when ``service_monitors`` says their CRD is served;
a missing block turns the same identities into ABSENT stubs, so switching a component off
deletes what it had. The query frontend's component depends on the query one (its children are
written only once the query Deployment is Available). Defaults (image, replicas, ports, storage)
are filled in here, never stored in the parent. Nothing here reads a cluster: what the operator
reads besides the parent is declared (``declared_inputs``: the ServiceMonitor CRD, the
object-storage Secret) and handed to ``build_with_inputs`` as ``builders.Inputs``. The builders
read the parent's spec as a typed ``ThanosSpec`` (``builders.spec_of``), so a spec the class
rejects fails with the parent and the field named, and defaults come from the class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

import builders as b
from builders import objects
from builders.inputs import inputs_digest, kind_served, with_inputs_digest
from examples.thanos.crds import DEFAULT_IMAGE as DEFAULT_IMAGE
from examples.thanos.crds import (
    SERVICE_MONITOR_API_VERSION,
    SERVICE_MONITOR_KIND,
    Component,
    ServingComponent,
    StorageComponent,
    ThanosSpec,
)

OPERATOR_NAME = "thanos-operator"
"""The ``app.kubernetes.io/managed-by`` value of every child."""

HTTP_PORT = 10902
GRPC_PORT = 10901
FRONTEND_PORT = 9090
OBJSTORE_PATH = "/etc/thanos/objstore"


@attrs.frozen(kw_only=True)
class ComponentKind:
    """What is fixed about one Thanos component: its spec block, name suffix and shape."""

    key: str
    """The block of ``spec`` that switches it on (``queryFrontend``)."""
    attribute: str
    """The block's attribute of ``ThanosSpec`` (``query_frontend``)."""
    component: str
    """The ``app.kubernetes.io/component`` value and name suffix (``query-frontend``)."""
    stateful: bool = False
    """A StatefulSet with a headless Service and a data volume, else a Deployment."""
    exposable: bool = False
    """Whether the block may ask for an Ingress."""
    http_port: int = HTTP_PORT
    """The HTTP (metrics, UI, API) port."""
    grpc: bool = True
    """Whether it serves the Store API on ``GRPC_PORT``."""
    depends_on: tuple[str, ...] = ()
    """The components whose children must be ready before this one's are written (by name)."""


QUERY = ComponentKind(key="query", attribute="query", component="query", exposable=True)
QUERY_FRONTEND = ComponentKind(
    key="queryFrontend", attribute="query_frontend", component="query-frontend", exposable=True,
    http_port=FRONTEND_PORT, grpc=False, depends_on=("query",),
)
"""The query frontend waits for the query Deployment to be Available (it proxies to it)."""
STORE_GATEWAY = ComponentKind(
    key="storeGateway", attribute="store_gateway", component="store-gateway", stateful=True
)
RULE = ComponentKind(key="rule", attribute="rule", component="rule", stateful=True)
COMPONENTS = (QUERY, QUERY_FRONTEND, STORE_GATEWAY, RULE)
"""Every component, in the order their children are built."""


def spec(parent: Mapping[str, Any]) -> ThanosSpec:
    """The parent's spec as a ``ThanosSpec`` (raises ``SpecFieldError`` naming the field)."""
    return b.spec_of(parent, ThanosSpec)


def block(typed: ThanosSpec, kind: ComponentKind) -> Component | None:
    """The spec's block for ``kind``, or None when the component is switched off."""
    value: Component | None = getattr(typed, kind.attribute)
    return value


def _meta(parent: Mapping[str, Any], kind: ComponentKind) -> dict[str, Any]:
    return b.child_meta(parent, component=kind.component, managed_by=OPERATOR_NAME)


def _name(parent: Mapping[str, Any], kind: ComponentKind) -> str:
    return b.child_name(str(parent["metadata"]["name"]), kind.component)


def _service_host(parent: Mapping[str, Any], kind: ComponentKind) -> str:
    return f"{_name(parent, kind)}.{parent['metadata'].get('namespace', 'default')}.svc"


def _ports(kind: ComponentKind) -> dict[str, int]:
    return {"http": kind.http_port, **({"grpc": GRPC_PORT} if kind.grpc else {})}


def _args(
    parent: Mapping[str, Any], kind: ComponentKind, typed: ThanosSpec, config: Component
) -> list[str]:
    args = [
        "store" if kind is STORE_GATEWAY else kind.component,
        f"--log.level={config.log_level}",
        f"--http-address=0.0.0.0:{kind.http_port}",
    ]
    if kind.grpc:
        args.append(f"--grpc-address=0.0.0.0:{GRPC_PORT}")
    if kind is QUERY:
        # Query fans out to every Store API the parent runs, found by DNS SRV records.
        args += [
            f"--endpoint=dnssrv+_grpc._tcp.{_service_host(parent, other)}"
            for other in (STORE_GATEWAY, RULE)
            if block(typed, other) is not None
        ]
    if kind is QUERY_FRONTEND:
        args.append(
            f"--query-frontend.downstream-url=http://{_service_host(parent, QUERY)}:{HTTP_PORT}"
        )
    if kind is RULE and block(typed, QUERY) is not None:
        args.append(f"--query={_service_host(parent, QUERY)}:{HTTP_PORT}")
    if kind.stateful:
        args.append("--data-dir=/var/thanos/data")
        if typed.object_storage_secret:
            args.append(f"--objstore.config-file={OBJSTORE_PATH}/objstore.yml")
    return args


SERVICE_MONITORS_SERVED = kind_served(SERVICE_MONITOR_API_VERSION, plural="servicemonitors")
"""The activation input: the ServiceMonitor CRD (``Inputs.established``: the kind is served)."""


def object_storage(parent: Mapping[str, Any],
                   typed: ThanosSpec | None = None) -> b.ObjectRef | None:
    """The Secret ``spec.objectStorageSecret`` names, in the parent's namespace, or None."""
    typed = spec(parent) if typed is None else typed
    if not typed.object_storage_secret:
        return None
    return b.ObjectRef(api_version="v1", kind="Secret", name=str(typed.object_storage_secret),
                       namespace=parent["metadata"].get("namespace") or "default")


def declared_inputs(parent: Mapping[str, Any]) -> list[b.ObjectRef]:
    """What the builders read besides the parent (``Operator(inputs=...)``): whether the
    ServiceMonitor kind is served, and the store gateway's object-storage Secret."""
    secret = object_storage(parent)
    return [SERVICE_MONITORS_SERVED, *([secret] if secret is not None else [])]


@b.resource_builder
def workload(parent: Mapping[str, Any], kind: ComponentKind, typed: ThanosSpec,
             inputs: b.Inputs | None = None) -> dict[str, Any]:
    """The component's Deployment, or StatefulSet (with a data volume claim) if it is stateful.

    Given ``inputs``, the store gateway requires its object-storage Secret (missing: the parent
    says ``InputMissing`` and only this child waits) and carries its digest on the pod template,
    so a rotated Secret rolls it once."""
    if inputs is not None and kind is STORE_GATEWAY:
        secret_ref = object_storage(parent, typed)
        if secret_ref is not None:
            inputs.require(secret_ref)
            return with_inputs_digest(_workload(parent, kind, typed),
                                      inputs_digest(inputs, [secret_ref]))
    return _workload(parent, kind, typed)


def _workload(parent: Mapping[str, Any], kind: ComponentKind, typed: ThanosSpec) -> dict[str, Any]:
    config = block(typed, kind) or (StorageComponent() if kind.stateful else Component())
    secret = typed.object_storage_secret if kind.stateful else None
    mounts = (
        [objects.volume_mount(name="data", mount_path="/var/thanos/data")] if kind.stateful else []
    )
    if secret:
        mounts.append(
            objects.volume_mount(name="objstore", mount_path=OBJSTORE_PATH, read_only=True)
        )
    container = objects.container(
        name="thanos",
        image=typed.image,
        args=_args(parent, kind, typed, config),
        ports=_ports(kind),
        liveness_probe=objects.probe(port="http", path="/-/healthy"),
        readiness_probe=objects.probe(port="http", path="/-/ready"),
        volume_mounts=mounts or None,
    )
    common: dict[str, Any] = {
        "metadata": _meta(parent, kind),
        "selector_labels": b.selector_labels(parent, component=kind.component),
        "containers": [container],
        "replicas": config.replicas,
        "volumes": [objects.volume(name="objstore", secret=str(secret))] if secret else None,
    }
    if not kind.stateful:
        return objects.deployment(**common)
    assert isinstance(config, StorageComponent)  # the stateful blocks are StorageComponents
    claim = {
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": config.storage}},
        },
    }
    return objects.statefulset(
        **common, service_name=_name(parent, kind), volume_claim_templates=[claim]
    )


@b.resource_builder
def service(parent: Mapping[str, Any], kind: ComponentKind) -> dict[str, Any]:
    """The component's Service (headless for a StatefulSet, which needs one for pod DNS)."""
    make = objects.headless_service if kind.stateful else objects.service
    return make(
        metadata=_meta(parent, kind),
        selector=b.selector_labels(parent, component=kind.component),
        ports=_ports(kind),
    )


@b.resource_builder
def ingress(parent: Mapping[str, Any], kind: ComponentKind, typed: ThanosSpec) -> dict[str, Any]:
    """The component's Ingress for ``<block>.ingress.host`` (only built when that is set)."""
    config = block(typed, kind)
    settings = config.ingress if isinstance(config, ServingComponent) else None
    if settings is None:
        raise ValueError(f"{kind.key} asks for no Ingress")
    return objects.ingress(
        metadata=_meta(parent, kind),
        host=settings.host,
        service_name=_name(parent, kind),
        service_port="http",
        ingress_class_name=settings.ingress_class_name,
    )


@b.resource_builder
def service_monitor(parent: Mapping[str, Any], kind: ComponentKind) -> dict[str, Any]:
    """The component's ServiceMonitor: Prometheus scrapes its Service's ``http`` port."""
    return {
        "apiVersion": SERVICE_MONITOR_API_VERSION,
        "kind": SERVICE_MONITOR_KIND,
        "metadata": _meta(parent, kind),
        "spec": {
            "selector": {"matchLabels": b.selector_labels(parent, component=kind.component)},
            "endpoints": [{"port": "http", "path": "/metrics", "interval": "30s"}],
        },
    }


def component(
    parent: Mapping[str, Any],
    kind: ComponentKind,
    *,
    service_monitors: bool,
    typed: ThanosSpec | None = None,
    inputs: b.Inputs | None = None,
) -> b.Component:
    """One component's children: PRESENT (with defaults) when its block is there, else ABSENT.

    ``typed`` is the parent's spec when the caller already converted it (else converted here);
    ``inputs`` the declared inputs, when the operator passes them (see ``workload``).
    """
    typed = spec(parent) if typed is None else typed
    config = block(typed, kind)
    on = config is not None
    items: list[b.ResourceBuilder] = [
        b.present_if(on, workload(parent, kind, typed, inputs)),
        b.present_if(on, service(parent, kind)),
    ]
    if kind.exposable:
        wants_ingress = isinstance(config, ServingComponent) and config.ingress is not None
        items.append(
            ingress(parent, kind, typed) if wants_ingress else b.absent(
                "networking.k8s.io/v1", "Ingress", name=_name(parent, kind),
                namespace=parent["metadata"].get("namespace"),
            )
        )
    if service_monitors:
        monitored = on and typed.service_monitors
        items.append(b.present_if(monitored, service_monitor(parent, kind)))
    return b.Component(name=kind.component, builders=items, depends_on=kind.depends_on)


def build(parent: Mapping[str, Any], *, service_monitors: bool = False,
          inputs: b.Inputs | None = None) -> list[b.ResourceBuilder]:
    """Every child of a ``Thanos`` parent, in order.

    ``service_monitors`` says whether the ServiceMonitor kind is served; when it is not, no
    ServiceMonitor is built at all (not even an ABSENT stub: there is nothing to delete).
    ``inputs`` (the operator's declared inputs) makes the store gateway read its Secret.
    """
    typed = spec(parent)  # converted and validated once per build
    return b.compose(*(
        component(parent, kind, service_monitors=service_monitors, typed=typed, inputs=inputs)
        for kind in COMPONENTS
    ))


def build_with_inputs(parent: Mapping[str, Any], inputs: b.Inputs) -> list[b.ResourceBuilder]:
    """The operator's build: ``build`` with ServiceMonitors as the activation input says and
    the store gateway reading its Secret (``declared_inputs``)."""
    return build(parent, service_monitors=inputs.established(SERVICE_MONITORS_SERVED),
                 inputs=inputs)
