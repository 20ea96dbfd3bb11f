"""A small operator for the ``optk plan`` tests: a ConfigMap and a Secret per ``Stack`` parent."""

from __future__ import annotations

from typing import Any

from builders import DesiredState, ResourceBuilder
from reconciler._driver.operators import Operator


def build(parent: Any) -> list[ResourceBuilder]:
    """Children named after the parent; the Secret's value comes from ``spec.password``."""
    name = parent["metadata"]["name"]
    spec = parent.get("spec") or {}
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-config"},
              "data": {"size": str(spec.get("size", 1))}}
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{name}-secret"},
              "stringData": {"password": str(spec.get("password", "initial"))}}
    return [lambda: (config, DesiredState.PRESENT), lambda: (secret, DesiredState.PRESENT)]


operator = Operator(api_version="plans.optk.dev/v1", kind="Stack", build=build,
                    name="plan-operator")
