"""An operator for the ``optk plan`` tests of waiting children (issue 36): per ``Stack`` parent,
a Deployment ``web``, a ConfigMap ``after`` that depends on it (so it waits until ``web`` is
Available) and a ConfigMap ``settings`` built from the Secret named by ``spec.secret``, a
declared input (so it waits while that Secret is missing; with ``spec.fail`` its builder
raises a KeyError)."""

from __future__ import annotations

from typing import Any

import builders as b
from builders import Component, ObjectRef, objects
from reconciler._driver.operators import Operator


def secret_of(parent: Any) -> ObjectRef:
    """The Secret the parent's ``spec.secret`` names."""
    return ObjectRef(api_version="v1", kind="Secret", namespace=parent["metadata"]["namespace"],
                     name=str((parent.get("spec") or {}).get("secret", "creds")))


def build(parent: Any, inputs: b.Inputs) -> list[b.ResourceBuilder]:
    """The three children; ``settings`` requires the input."""
    name = parent["metadata"]["name"]

    @b.resource_builder
    def web(parent: Any) -> dict[str, Any]:
        return objects.deployment(
            metadata={"name": f"{name}-web"}, selector_labels={"app": name},
            containers=[objects.container(name="web", image="registry.k8s.io/pause:3.9")])

    @b.resource_builder
    def after(parent: Any) -> dict[str, Any]:
        return objects.config_map(metadata={"name": f"{name}-after"}, data={"a": "1"})

    @b.resource_builder
    def settings(parent: Any) -> dict[str, Any]:
        secret = inputs.require(secret_of(parent))
        if (parent.get("spec") or {}).get("fail"):
            return {"kind": "ConfigMap"}["metadata"]  # a KeyError: the user's bug
        return objects.config_map(metadata={"name": f"{name}-settings"},
                                  data={"keys": ",".join(sorted(secret.get("data") or {}))})

    return [*Component(name="web", builders=[web(parent)]),
            *Component(name="after", depends_on="web", builders=[after(parent)]),
            settings(parent)]


operator = Operator(api_version="plans.optk.dev/v1", kind="Stack", build=build,
                    inputs=lambda parent: [secret_of(parent)], name="plan-waits-operator")
