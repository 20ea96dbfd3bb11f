"""What the embedded API server knows about each kind: identity, discovery data and behaviour.

The server core (``_server``, ``_storage``) is generic: it stores, versions, watches and
garbage-collects any object. Everything that differs per kind lives behind ``KindStrategy``:
defaulting, validation (names, immutable fields), what counts as a spec change for
``metadata.generation``, and what the status subresource may touch. ``KindRegistry`` holds the
served types (the built-in ones, plus those that CRDs register at run time) and their strategies.
This module is the boundary between the two halves; keep its names stable.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any, Protocol

import attrs

from reconciler.embedded._errors import EmbeddedServerError

__all__ = [
    "Invalid",
    "KindRegistry",
    "KindStrategy",
    "ResourceType",
    "ServerContext",
]


@attrs.frozen(kw_only=True)
class ResourceType:
    """One served resource: ``deployments`` in ``apps/v1`` and all discovery needs of it."""

    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()  # e.g. {"status", "scale"}
    verbs: tuple[str, ...] = (
        "create", "delete", "deletecollection", "get", "list", "patch", "update", "watch",
    )
    has_generation: bool = True  # whether the server maintains metadata.generation
    is_custom: bool = False  # served because a CRD registered it

    @property
    def api_version(self) -> str:
        """``apps/v1``, or ``v1`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        """The kind of the list body (``DeploymentList``)."""
        return f"{self.kind}List"

    @property
    def group_resource(self) -> str:
        """``deployments.apps`` as used in Status messages; ``pods`` for the core group."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """``Deployment.apps`` as used in Invalid messages; ``Service`` for the core group."""
        return f"{self.kind}.{self.group}" if self.group else self.kind


class Invalid(EmbeddedServerError):
    """Raised by a strategy when an object fails validation: the server answers 422 Invalid.

    ``causes`` are ``Status.details.causes`` entries: ``{"reason", "message", "field"}``, with the
    same reasons and field paths a real kube-apiserver sends (``FieldValueInvalid``,
    ``FieldValueRequired``, ``FieldValueForbidden``, ...).
    """

    def __init__(self, causes: list[dict[str, str]]) -> None:
        super().__init__("; ".join(f"{c.get('field')}: {c.get('message')}" for c in causes))
        self.causes = causes


@attrs.define(kw_only=True)
class ServerContext:
    """Server state a strategy may need while preparing an object (allocators)."""

    service_cidr: str = "10.0.0.0/16"
    allocated_cluster_ips: set[str] = attrs.field(factory=set)
    _next_host: int = attrs.field(default=0, alias="_next_host")

    @property
    def service_network(self) -> ipaddress.IPv4Network:
        """The Service ClusterIP range (``--service-cluster-ip-range`` of a real server)."""
        return ipaddress.IPv4Network(self.service_cidr)

    def allocate_cluster_ip(self) -> str:
        """A free ClusterIP from the service range (10.0.0.0/16: room for 65,000 Services).

        The lowest free address is taken (skipping the network address and the first host,
        which a real server keeps for the ``kubernetes`` Service). A cursor never above the
        lowest free address makes a run of creates O(1) each however many Services exist; a
        release moves it back to the released address.
        """
        network = self.service_network
        size = network.num_addresses
        first = int(network.network_address)
        for _ in range(size):
            host = self._next_host
            self._next_host = (host + 1) % size
            if host < 2 or host == size - 1:
                continue
            ip = str(ipaddress.IPv4Address(first + host))
            if ip not in self.allocated_cluster_ips:
                self.allocated_cluster_ips.add(ip)
                return ip
        raise Invalid([{
            "reason": "FieldValueInvalid",
            "message": "Internal error: failed to allocate a serviceIP: range is full",
            "field": "spec.clusterIPs",
        }])

    def release_cluster_ip(self, ip: str) -> None:
        """Return a ClusterIP to the pool when its Service is deleted."""
        if ip in self.allocated_cluster_ips:
            self.allocated_cluster_ips.discard(ip)
            host = int(ipaddress.IPv4Address(ip)) - int(self.service_network.network_address)
            self._next_host = min(self._next_host, host)

    def restore_cluster_ips(self, before: set[str]) -> None:
        """Give back every ClusterIP allocated since ``before`` was taken (a refused create)."""
        for ip in self.allocated_cluster_ips - before:
            self.release_cluster_ip(ip)

    # Added with the kinds (issue 3): NodePort allocation, as for ClusterIPs.
    node_port_range: tuple[int, int] = (30000, 32767)
    allocated_node_ports: set[int] = attrs.field(factory=set)

    def allocate_node_port(self) -> int:
        """A free port of the NodePort range (30000-32767)."""
        low, high = self.node_port_range
        for port in range(low, high + 1):
            if port not in self.allocated_node_ports:
                self.allocated_node_ports.add(port)
                return port
        raise Invalid([{
            "reason": "FieldValueInvalid",
            "message": "Internal error: failed to allocate a nodePort: range is full",
            "field": "spec.ports[0].nodePort",
        }])

    def release_node_port(self, port: int) -> None:
        """Return a NodePort to the pool when its Service is deleted or stops using it."""
        self.allocated_node_ports.discard(port)


class KindStrategy:
    """Per-kind behaviour. This base class is the behaviour of a kind with no special rules.

    All methods receive objects the server owns (deep copies) and may change them in place.
    """

    def __init__(self, resource_type: ResourceType) -> None:
        self.resource_type = resource_type

    def prepare_create(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        """Fill defaults and allocations before storing a new object."""

    def validate_create(self, obj: dict[str, Any]) -> None:
        """Raise ``Invalid`` when a new object may not be stored (names included)."""

    def prepare_update(
        self, old: Mapping[str, Any], new: dict[str, Any], ctx: ServerContext
    ) -> None:
        """Fill defaults and keep what an update through the main resource may not change."""

    def validate_update(self, old: Mapping[str, Any], new: dict[str, Any]) -> None:
        """Raise ``Invalid`` for forbidden changes (immutable fields)."""

    def prepare_status_update(self, old: Mapping[str, Any], new: dict[str, Any]) -> None:
        """Through ``/status``: keep everything of ``old`` except ``status``."""

    def spec_changed(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        """Whether ``metadata.generation`` must be bumped by this update."""
        return False

    def on_delete(self, obj: Mapping[str, Any], ctx: ServerContext) -> None:
        """Release what the object held (a Service's ClusterIP)."""

    def list_map_keys(self) -> Mapping[tuple[str, ...], tuple[str, ...]]:
        """Lists merged item by item, by field path (``"*"``: every list item or map value).

        ``{("spec", "ports"): ("name",)}``; empty for kinds whose keys come from elsewhere (the
        built-in schemas) or that have none. Custom resources return their CRD schema's
        ``x-kubernetes-list-map-keys``.
        """
        return {}

    def unknown_fields(self, obj: Mapping[str, Any]) -> list[str]:
        """Paths of fields the kind does not have (``spec.replica``), which ``prepare_*`` drop.

        For ``fieldValidation``: ``Strict`` answers 400 ``strict decoding error: unknown field
        "spec.replica"``, ``Warn`` sends a warning per path. Does not change ``obj``.
        """
        return []


class KindRegistry(Protocol):
    """The served resource types and their strategies; CRDs add and remove types at run time.

    Made by ``reconciler.embedded._registry.make_registry()``.
    """

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        """The type served at ``/apis/<group>/<version>/<plural>``, or None."""
        ...

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        """The type for an object's ``apiVersion``/``kind``, or None."""
        ...

    def all_types(self) -> list[ResourceType]:
        """Every served type, for discovery."""
        ...

    def strategy(self, resource_type: ResourceType) -> KindStrategy:
        """The behaviour of a type."""
        ...

    def crd_applied(self, crd: Mapping[str, Any]) -> None:
        """A CRD was created or updated: serve (or change) its versions."""
        ...

    def crd_removed(self, crd: Mapping[str, Any]) -> None:
        """A CRD is gone: stop serving its types."""
        ...
