"""A builder that edits its parent in place reaches nothing but its own copy.

Informer caches share equal parts between cached objects (``reconciler._cache.stores.compact``): two
parents with the same labels hold one labels dict. Builders are meant to be pure, but
``parent["metadata"]["labels"].setdefault(...)`` is an easy slip in Python; the reconciler hands
builders a private copy of the cached parent (``builders.objects.copy_object``), so such a
builder cannot change another parent's cached labels (and through them its children).
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


@resource_builder
def careless(parent: Any) -> dict[str, Any]:
    """A ConfigMap of the parent's labels, after stamping the parent's own name into them."""
    labels = parent["metadata"].setdefault("labels", {})
    seen = dict(labels)
    labels["stamped-by"] = parent["metadata"]["name"]  # the slip: an in-place edit
    return config_map(metadata={"name": child_name(parent["metadata"]["name"], "cfg")},
                      data={key: str(value) for key, value in sorted(seen.items())})


def build(parent: Any) -> Sequence[ResourceBuilder]:
    """One ConfigMap of the parent's labels."""
    return [careless(parent)]


def test_a_builder_editing_its_parent_changes_neither_the_cache_nor_other_parents(
    client: KubernetesClient, ns: str
) -> None:
    with running(make_operator(ns, build=build), client) as runtime:
        for name in ("a", "b"):
            client.create(thing(ns, name, labels={"tier": "gold"}))
        for name in ("a", "b"):
            assert wait_until(lambda n=name: child_data(client, ns, n) == {"tier": "gold"}), (
                name, child_data(client, ns, name))
        assert wait_idle(runtime, 5, settle=0.2)
        for name in ("a", "b"):
            cached = runtime.parents.cache.get(ns, name)
            assert cached is not None
            assert cached["metadata"]["labels"] == {"tier": "gold"}
        runtime.resync_all()
        assert wait_idle(runtime, 5, settle=0.2)
        for name in ("a", "b"):  # a second reconcile still sees the parent as it is
            assert child_data(client, ns, name) == {"tier": "gold"}
        live = client.get(API_VERSION, "Thing", "a", namespace=ns)
        assert "stamped-by" not in live["metadata"]["labels"]
