"""``Operator(applying=Applying(reuse_builds=True))`` (the default) in the running driver: a
reconcile of an unchanged parent (a manual or periodic resync, a child's drift) calls no builder
and, converged, makes no request;
a change to the parent, ``runtime.resync_all()`` and a deleted parent drop the kept build.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from builders import Component, ResourceBuilder
from reconciler import Applying, KubernetesClient
from reconciler._driver.runtime import OperatorRuntime
from reconciler.testing import make_available, wait_idle
from tests.driver.conftest import child_data, make_operator, running, thing, wait_until
from tests.driver.sample_operator import build as base
from tests.driver.test_dependencies import _config, _exists, _web

MERGE = "application/merge-patch+json"


class Counted:
    """The sample operator's ``build``, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, parent: Any) -> Sequence[ResourceBuilder]:
        self.calls += 1
        return base(parent)


def _reconciled(runtime: OperatorRuntime, ns: str, times: int) -> None:
    assert wait_until(lambda: runtime.stats.reconciles[(ns, "a")] >= times)
    time.sleep(0.1)
    assert wait_idle(runtime, 5, settle=0.1)


def test_an_unchanged_parent_is_reconciled_without_builders_or_requests(
    client: KubernetesClient, kube_api: Any, ns: str
) -> None:
    build = Counted()
    operator = make_operator(ns, build=build, applying=Applying(reuse_builds=True))
    with running(operator, client) as runtime:
        client.create(thing(ns, "a", value="1"))
        assert wait_until(lambda: child_data(client, ns, "a") == {"value": "1"})
        _reconciled(runtime, ns, 1)
        # The first reconcile wrote the parent's status (a new version): built once more.
        runtime.request(ns, "a")
        _reconciled(runtime, ns, 2)
        calls, count = build.calls, runtime.stats.reconciles[(ns, "a")]
        assert runtime.reconciler.builds is not None
        assert len(runtime.reconciler.builds) == 1

        before = kube_api.request_counts()
        runtime.request(ns, "a")  # a resync: the parent is as it was
        _reconciled(runtime, ns, count + 1)
        spent = {v: n - before.get(v, 0) for v, n in kube_api.request_counts().items()}
        assert not {v: n for v, n in spent.items() if n}, spent
        assert build.calls == calls

        # A drifted child is repaired from the kept build.
        client.patch("v1", "ConfigMap", "a-cfg", {"data": {"value": "drifted"}},
                     patch_type=MERGE, namespace=ns)
        assert wait_until(lambda: child_data(client, ns, "a") == {"value": "1"})
        assert build.calls == calls

        # A changed parent is built again.
        client.patch(thing(ns, "a")["apiVersion"], "Thing", "a", {"spec": {"value": "2"}},
                     patch_type=MERGE, namespace=ns)
        assert wait_until(lambda: child_data(client, ns, "a") == {"value": "2"})
        assert build.calls > calls
        _reconciled(runtime, ns, 1)

        # resync_all (what on_start watches call when outside state changes) rebuilds.
        calls = build.calls
        runtime.resync_all()
        assert wait_until(lambda: build.calls > calls)
        _reconciled(runtime, ns, 1)

        # A deleted parent's build is dropped.
        client.delete(thing(ns, "a")["apiVersion"], "Thing", "a", namespace=ns)
        assert wait_until(lambda: len(runtime.reconciler.builds or ()) == 0)


def test_reuse_is_the_default_and_off_every_reconcile_builds(
    client: KubernetesClient, ns: str
) -> None:
    assert make_operator(ns).applying.reuse_builds  # the default since declared inputs (issue 25)
    build = Counted()
    operator = make_operator(ns, build=build, applying=Applying(reuse_builds=False))
    with running(operator, client) as runtime:
        client.create(thing(ns, "a", value="1"))
        assert wait_until(lambda: child_data(client, ns, "a") == {"value": "1"})
        _reconciled(runtime, ns, 1)
        calls, count = build.calls, runtime.stats.reconciles[(ns, "a")]
        runtime.request(ns, "a")
        _reconciled(runtime, ns, count + 1)
        assert build.calls == calls + 1
        assert runtime.reconciler.builds is None


def test_a_build_with_a_dependency_is_reused_while_the_dependency_becomes_ready(
    client: KubernetesClient, ns: str
) -> None:
    """The gates are not part of the build: a parent waiting on a dependency is reconciled
    again (the dependency became ready) from its kept build, and what waited is written."""
    calls = [0]

    def build(parent: Any) -> list[ResourceBuilder]:
        calls[0] += 1
        return [b for c in [Component(name="web", builders=[_web(parent)]),
                            Component(name="after", depends_on="web",
                                      builders=[_config(parent)])] for b in c]

    operator = make_operator(ns, build=build, applying=Applying(reuse_builds=True))
    with running(operator, client) as runtime:
        client.create(thing(ns, "g"))
        assert wait_until(lambda: _exists(client, "apps/v1", "Deployment", "g-web", ns))
        assert wait_idle(runtime, 10, settle=0.2)
        runtime.request(ns, "g")  # its status was written: built once more, then kept
        assert wait_idle(runtime, 10, settle=0.2)
        assert not _exists(client, "v1", "ConfigMap", "g-after", ns)  # it waits for web
        kept, reconciles = calls[0], runtime.stats.reconciles[(ns, "g")]
        make_available(client, {"apiVersion": "apps/v1", "kind": "Deployment",
                                "metadata": {"name": "g-web", "namespace": ns}})
        assert wait_until(lambda: _exists(client, "v1", "ConfigMap", "g-after", ns), 5)
        assert wait_idle(runtime, 10, settle=0.2)
        assert runtime.stats.reconciles[(ns, "g")] > reconciles
        assert calls[0] == kept  # the dependency's verdict came from live state, not a build
