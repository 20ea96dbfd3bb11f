"""Shared test data for the builders tests: a parent object and a small correct operator."""

from __future__ import annotations

from typing import Any

import builders as b
from builders import objects

MANAGED_BY = "demo-operator"


def make_parent(
    name: str = "web", namespace: str = "team-a", uid: str = "0b9c-11", **spec: Any
) -> dict[str, Any]:
    """A custom-resource parent as a cluster would hand it to the operator."""
    return {
        "apiVersion": "demo.optk.dev/v1alpha1",
        "kind": "Site",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {"replicas": 2, "image": "nginx:1.25", **spec},
    }


def meta(parent: b.KubeObject, component: str) -> dict[str, Any]:
    """The identity of one child of ``parent`` (DESIGN.md section 5)."""
    return b.child_meta(parent, component=component, managed_by=MANAGED_BY)


@b.resource_builder
def site_deployment(parent: b.KubeObject) -> dict[str, Any]:
    """The Deployment of a Site."""
    return objects.deployment(
        metadata=meta(parent, "server"),
        selector_labels=b.selector_labels(parent, component="server"),
        replicas=parent["spec"]["replicas"],
        containers=[
            objects.container(name="nginx", image=parent["spec"]["image"], ports={"http": 80})
        ],
    )


@b.resource_builder
def site_service(parent: b.KubeObject) -> dict[str, Any]:
    """The Service of a Site, selecting the Deployment's pods."""
    return objects.service(
        metadata=meta(parent, "server"),
        selector=b.selector_labels(parent, component="server"),
        ports={"http": 80},
    )


@b.resource_builder
def site_config(parent: b.KubeObject) -> tuple[dict[str, Any], b.DesiredState]:
    """The Site's ConfigMap: present only when ``spec.config`` is set."""
    obj = objects.config_map(
        metadata=meta(parent, "config"), data=parent["spec"].get("config") or {}
    )
    return obj, b.DesiredState.PRESENT


def build_site(parent: b.KubeObject) -> list[b.ResourceBuilder]:
    """A correct two-and-a-half-child operator: Deployment, Service, optional ConfigMap."""
    return b.compose(
        b.Component(name="server", builders=[site_deployment(parent), site_service(parent)]),
        b.present_if("config" in parent["spec"], site_config(parent)),
    )


SITE_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "sites.demo.optk.dev"},
    "spec": {
        "group": "demo.optk.dev",
        "names": {"kind": "Site", "plural": "sites"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["replicas", "image"],
                                "properties": {
                                    "replicas": {"type": "integer", "minimum": 0, "maximum": 5},
                                    "image": {"type": "string", "minLength": 1},
                                    "config": {
                                        "type": "object",
                                        "additionalProperties": {"type": "string"},
                                    },
                                },
                            }
                        },
                        "required": ["spec"],
                    }
                },
            }
        ],
    },
}
"""The CRD of the Site parents: generated parents follow its structural schema."""
