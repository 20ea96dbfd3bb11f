"""A small operator for the driver's tests and ``optk run``: each Thing gets one ConfigMap.

``Thing`` (``drivertest.optk.dev/v1``) has a free-form ``spec``; its ConfigMap ``<name>-cfg``
holds ``spec.value``. ``operator`` installs the CRD at start, so ``optk run
tests.driver.sample_operator --embedded`` works on an empty server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from builders import ResourceBuilder, child_name, resource_builder
from builders.objects import config_map
from reconciler._driver.operators import Operator

GROUP = "drivertest.optk.dev"
API_VERSION = f"{GROUP}/v1"

THING_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"things.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "things", "singular": "thing", "kind": "Thing",
                  "listKind": "ThingList"},
        "versions": [{
            "name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": True,
            }},
        }],
    },
}


@resource_builder
def settings(parent: Any) -> dict[str, Any]:
    """The parent's ConfigMap."""
    value = str((parent.get("spec") or {}).get("value", ""))
    return config_map(metadata={"name": child_name(parent["metadata"]["name"], "cfg")},
                      data={"value": value})


def build(parent: Any) -> Sequence[ResourceBuilder]:
    """One ConfigMap per Thing."""
    return [settings(parent)]


operator = Operator(api_version=API_VERSION, kind="Thing", build=build, name="sample",
                    install=[THING_CRD])
