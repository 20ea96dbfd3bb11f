"""One reference-counted informer pool (``reconciler._cache.pool``) under the child informers and
the declared inputs: a scope two subscribers need is one list and one watch, each subscriber
hears its events while it holds the scope, and the informer stops when the last holder lets go."""

from __future__ import annotations

from typing import Any

import pytest

from builders import ObjectRef
from reconciler import KubernetesClient
from reconciler._cache.children import InformerManager
from reconciler._cache.inputs import InputWatch
from reconciler._cache.pool import InformerPool, Scope
from tests.driver.conftest import wait_until


def _cm(ns: str, name: str, value: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "data": {"v": value},
            "metadata": {"name": name, "namespace": ns}}


@pytest.mark.both_servers
def test_two_subscribers_of_one_scope_share_one_informer_until_the_last_lets_go(
    client: KubernetesClient, ns: str
) -> None:
    pool = InformerPool(client)
    heard: dict[str, list[str]] = {"a": [], "b": []}
    for owner in heard:
        pool.subscribe(owner, lambda scope, event, old, new, owner=owner: heard[owner].append(
            f"{event}:{new['metadata']['name']}"))
    scope = Scope(api_version="v1", kind="ConfigMap", namespace=ns)
    try:
        first = pool.acquire(scope, "parent-1", owner="a")
        assert pool.acquire(scope, "parent-2", owner="b") is first  # one list, one watch
        assert pool.started_total == 1
        assert first.wait_synced(10)
        client.create(_cm(ns, "x", "1"))
        assert wait_until(lambda: heard == {"a": ["ADDED:x"], "b": ["ADDED:x"]}), heard
        pool.release(scope, "parent-1", owner="a")
        assert not first.stopped  # b still holds it
        client.create(_cm(ns, "y", "1"))
        assert wait_until(lambda: heard["b"] == ["ADDED:x", "ADDED:y"]), heard
        assert heard["a"] == ["ADDED:x"]  # a let go: it hears nothing more
        pool.release(scope, "parent-2", owner="b")
        assert first.stopped
        assert pool.informer(scope) is None
        with pytest.raises(KeyError, match="without subscribing"):
            pool.acquire(scope, "x", owner="nobody")
    finally:
        pool.stop()


@pytest.mark.both_servers
def test_the_child_informers_and_the_inputs_share_the_runtime_pool(
    client: KubernetesClient, ns: str
) -> None:
    pool = InformerPool(client)
    changed: list[tuple[str, str]] = []
    children = InformerManager(client, handler=lambda *_: None, namespace=ns, pool=pool)
    inputs = InputWatch(client, lambda parent: [
        ObjectRef(api_version="v1", kind="ConfigMap", namespace=ns, name="settings")],
        on_change=changed.append, pool=pool)
    client.create(_cm(ns, "settings", "1"))
    parent = {"apiVersion": "example.com/v1", "kind": "Thing",
              "metadata": {"name": "p", "namespace": ns}}
    try:
        children.use((ns, "p"), [("v1", "Secret")])
        assert inputs.resolve(parent).get(ObjectRef(
            api_version="v1", kind="ConfigMap", namespace=ns, name="settings")) is not None
        assert pool.started_total == 2  # the Secret children, the ConfigMap input
        assert children.types() == {("v1", "Secret")}
        assert inputs.scopes == [("v1", "ConfigMap", ns, "")]
        client.patch("v1", "ConfigMap", "settings", {"data": {"v": "2"}},
                     patch_type="application/merge-patch+json", namespace=ns)
        assert wait_until(lambda: changed == [(ns, "p")]), changed
        inputs.stop()  # lets go of its scopes only
        assert children.types() == {("v1", "Secret")}
        assert len(pool.scopes(children)) == 1
        children.release((ns, "p"))
        assert children.types() == set()
    finally:
        pool.stop()
