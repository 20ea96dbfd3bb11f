"""A parent's labels and annotations trigger its reconcile (issue 12, defect 7).

A pure builder may read the whole parent; a builder that picks a ConfigMap value from a parent
label must see a relabelled parent through the watch path, not at the next periodic resync
(10 h away here). The operator's own status writes still cause no reconcile.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from builders import ResourceBuilder, child_name, resource_builder
from builders.objects import config_map
from reconciler import KubernetesClient
from reconciler.testing import wait_idle
from tests.driver.conftest import child_data, make_operator, running, thing, wait_until
from tests.driver.sample_operator import API_VERSION

MERGE = "application/merge-patch+json"


@resource_builder
def labelled(parent: Any) -> dict[str, Any]:
    """A ConfigMap holding the parent's ``tier`` label and ``note`` annotation."""
    meta = parent["metadata"]
    return config_map(
        metadata={"name": child_name(meta["name"], "cfg")},
        data={"tier": (meta.get("labels") or {}).get("tier", ""),
              "note": (meta.get("annotations") or {}).get("note", "")},
    )


def build(parent: Any) -> Sequence[ResourceBuilder]:
    """One ConfigMap read from the parent's metadata."""
    return [labelled(parent)]


def test_a_label_or_annotation_change_reaches_a_builder_that_reads_it(
    client: KubernetesClient, ns: str
) -> None:
    with running(make_operator(ns, build=build), client) as runtime:
        client.create(thing(ns, "a", labels={"tier": "gold"}))
        assert wait_until(lambda: child_data(client, ns, "a") == {"tier": "gold", "note": ""})
        assert wait_idle(runtime, 5, settle=0.2)
        client.patch(API_VERSION, "Thing", "a", {"metadata": {"labels": {"tier": "silver"}}},
                     patch_type=MERGE, namespace=ns)
        assert wait_until(
            lambda: child_data(client, ns, "a") == {"tier": "silver", "note": ""}, 5
        )
        client.patch(API_VERSION, "Thing", "a", {"metadata": {"annotations": {"note": "hi"}}},
                     patch_type=MERGE, namespace=ns)
        assert wait_until(
            lambda: child_data(client, ns, "a") == {"tier": "silver", "note": "hi"}, 5
        )
        assert runtime.triggers().get("resync", 0) == 0
        assert runtime.triggers().get("parent-changed", 0) == 2
        assert wait_idle(runtime, 5, settle=0.3)
        # the operator's own status writes were echoes, not changes: three reconciles in all
        assert runtime.stats.reconciles[(ns, "a")] == 3
