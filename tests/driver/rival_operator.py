"""An operator for the two-process contention test: each Thing gets a Deployment whose
``spec.replicas`` comes from ``OPTK_TEST_REPLICAS`` (two copies run with different values, as an
old and a new version of an operator would during a rollout without ``--leader-elect``).
Contention figures are the issue's scaled by 5 (``tests/driver/test_contention.py``)."""

from __future__ import annotations

import os
from typing import Any

from builders import ResourceBuilder, child_name, resource_builder
from reconciler import Contention, Policies, Reporting, ResyncPolicy
from reconciler._driver.operators import Operator
from tests.driver.sample_operator import API_VERSION, THING_CRD


@resource_builder
def web(parent: Any) -> dict[str, Any]:
    """A Deployment of ``OPTK_TEST_REPLICAS`` replicas."""
    labels = {"app": parent["metadata"]["name"]}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": child_name(parent["metadata"]["name"], "web")},
            "spec": {"replicas": int(os.environ.get("OPTK_TEST_REPLICAS", "2")),
                     "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}


def build(parent: Any) -> list[ResourceBuilder]:
    """One Deployment per Thing."""
    return [web(parent)]


operator = Operator(
    api_version=API_VERSION, kind="Thing", build=build, name="rival", install=[THING_CRD],
    resync=ResyncPolicy(heartbeat=None), reporting=Reporting(events=False),
    policies=Policies(
        contention=Contention(window=6.0, backoff=0.2, max_backoff=60.0, min_quiet=0.04)),
)
