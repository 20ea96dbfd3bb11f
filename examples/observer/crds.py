"""The ``Observer`` CustomResourceDefinition (``observe.optk.dev/v1alpha1``)."""

from __future__ import annotations

from typing import Any

GROUP = "observe.optk.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "Observer"

DEFAULT_OPERATOR_IMAGE = "ghcr.io/operator-toolkit/optk:latest"
"""The image of the Thanos operator's Deployment when the Observer names none."""

OBSERVER_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"observers.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "observers", "singular": "observer", "kind": KIND,
                  "listKind": f"{KIND}List"},
        "versions": [{
            "name": VERSION, "served": True, "storage": True, "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {
                    "prometheusOperatorChart": {
                        "type": "object",
                        "description": "Install the Prometheus-operator-like chart kept "
                                       "beside the example: these are its values ({}: its "
                                       "defaults); absent: not installed, removed.",
                        "x-kubernetes-preserve-unknown-fields": True,
                    },
                    "thanos": {
                        "type": "object",
                        "description": "Install the Thanos operator and one Thanos resource.",
                        "properties": {
                            "enabled": {"type": "boolean", "description": "false removes "
                                        "the operator, its Thanos and its cluster objects."},
                            "operatorImage": {"type": "string", "maxLength": 200},
                            "spec": {"type": "object", "description": "The Thanos spec.",
                                     "x-kubernetes-preserve-unknown-fields": True},
                        },
                    },
                }},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            }}},
        }],
    },
}
"""The Observer CRD, installed by ``operator`` at start when missing."""
