"""``optk uninstall``: a stopped operator's children (cluster-scoped included) are deleted and its
finalizers removed, so its parents can be deleted; on both servers, through the command line."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from typing import Any

import pytest

from reconciler import KubernetesClient
from reconciler._commands.cli import main
from reconciler._driver.operators import Operator
from reconciler._reconcile.finalizing import CLEANUP_FINALIZER
from tests.driver.conftest import running, wait_until
from tests.driver.test_cleanup import (
    API_VERSION,
    KIND,
    RBAC,
    _cluster_children,
    _exists,
    _operator,
    _role_name,
    kube,
    thing,
)

__all__ = ["TARGET", "kube"]

TARGET: Operator | None = None
"""The operator ``optk uninstall tests.driver.test_cleanup_uninstall:TARGET`` loads."""


@pytest.mark.both_servers
def test_uninstall_deletes_the_children_then_the_finalizers(
    kube: KubernetesClient, kube_namespace: str, kube_api: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    ns = kube_namespace
    operator = _operator(ns)
    parents = [thing(ns, name) for name in ("a", "b")]
    with running(operator, kube):
        for parent in parents:
            kube.create(parent)
        assert wait_until(lambda: all(_cluster_children(kube, _role_name(p)) == [True, True]
                                      for p in parents))
    kube.delete(API_VERSION, KIND, "a", namespace=ns)  # held by the finalizer
    assert kube.get(API_VERSION, KIND, "a", namespace=ns)["metadata"]["finalizers"] == [
        CLEANUP_FINALIZER]
    monkeypatch.setattr(__import__(__name__, fromlist=["TARGET"]), "TARGET", operator)
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["uninstall", f"{__name__}:TARGET",
                     "--kubeconfig", str(kube_api.kubeconfig_path)])
    assert code == 0, out.getvalue()
    assert "6 deleted, 2 released, 0 kept" in out.getvalue()
    for parent in parents:
        assert _cluster_children(kube, _role_name(parent)) == [False, False]
        assert not _exists(kube, "v1", "ConfigMap", f"{parent['metadata']['name']}-cfg", ns)
    assert wait_until(lambda: not _exists(kube, API_VERSION, KIND, "a", ns))
    live = kube.get(API_VERSION, KIND, "b", namespace=ns)
    assert not live["metadata"].get("finalizers")
    assert not any(_exists(kube, RBAC, "ClusterRole", _role_name(p)) for p in parents)
