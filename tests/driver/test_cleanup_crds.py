"""CRDs as children: a change goes through the matcher (update only on diff), and deleting one
that still holds custom resources is refused unless the CRD is marked
``optk.dev/allow-data-loss: "true"``; on both servers."""

from __future__ import annotations

import contextlib
import copy
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from builders import resource_builder
from reconciler import KubernetesClient, NotFoundError, ParentSettings, ServerError
from reconciler._reconcile.finalizing import ALLOW_DATA_LOSS_ANNOTATION
from reconciler._reconcile.parents import ParentReconciler
from reconciler._reconcile.reconciling import Action
from tests.driver.conftest import wait_until
from tests.driver.sample_operator import THING_CRD
from tests.driver.test_cleanup import API_VERSION, KIND, _exists, kube

__all__ = ["kube"]

CRD_API = "apiextensions.k8s.io/v1"


def _widget_crd(group: str, *, description: str = "v1", allow: bool = False) -> dict[str, Any]:
    crd = copy.deepcopy(THING_CRD)
    crd["metadata"] = {"name": f"widgets.{group}"}
    if allow:
        crd["metadata"]["annotations"] = {ALLOW_DATA_LOSS_ANNOTATION: "true"}
    spec = crd["spec"]
    spec["group"] = group
    spec["names"] = {"plural": "widgets", "singular": "widget", "kind": "Widget",
                     "listKind": "WidgetList"}
    spec["versions"][0]["schema"]["openAPIV3Schema"]["description"] = description
    return crd


@pytest.fixture
def group(kube: KubernetesClient) -> Iterator[str]:
    """A fresh API group whose Widget CRD is removed after the test."""
    name = f"w{uuid.uuid4().hex[:8]}.optk.dev"
    yield name
    with contextlib.suppress(NotFoundError):
        kube.delete(CRD_API, "CustomResourceDefinition", f"widgets.{name}")


@pytest.mark.both_servers
def test_a_crd_child_is_updated_only_on_a_diff_and_kept_while_it_holds_data(
    kube: KubernetesClient, kube_namespace: str, group: str
) -> None:
    ns = kube_namespace
    kube.create({"apiVersion": API_VERSION, "kind": KIND,
                          "metadata": {"name": "owner", "namespace": ns}, "spec": {}})
    wanted: dict[str, Any] = {"crd": _widget_crd(group)}

    @resource_builder
    def crd(_: Any) -> dict[str, Any]:
        return wanted["crd"]  # type: ignore[no-any-return]

    def fresh() -> dict[str, Any]:  # the parent as an informer would hand it over
        return kube.get(API_VERSION, KIND, "owner", namespace=ns)

    reconciler = ParentReconciler(
        kube, lambda p: [crd(p)], operator_name="crd-op",
        settings=ParentSettings(events=False, write_status=False),
    )
    try:
        first = reconciler.reconcile(fresh())
        assert first.ok
        assert first.children[0].action is Action.CREATED
        assert wait_until(lambda: kube.is_served(f"{group}/v1", "Widget"), 20)
        again = reconciler.reconcile(fresh())
        assert again.ok
        assert again.children[0].action is Action.UNCHANGED
        assert again.writes == 0
        wanted["crd"] = _widget_crd(group, description="v2")
        changed = reconciler.reconcile(fresh())
        assert changed.children[0].action is Action.UPDATED
        assert kube.get(CRD_API, "CustomResourceDefinition", f"widgets.{group}")["spec"][
            "versions"][0]["schema"]["openAPIV3Schema"]["description"] == "v2"

        # a user's Widget: the CRD may not be deleted (prune) while it exists. A real server
        # answers 503 "apiserver is shutting down" for a moment after a CRD update (the kind's
        # storage is being replaced): a client retries, as the operator's backoff does.
        widget = {"apiVersion": f"{group}/v1", "kind": "Widget",
                  "metadata": {"name": "data", "namespace": ns}}

        def created() -> bool:
            try:
                kube.create(widget)
            except ServerError:
                return False
            return True

        assert wait_until(created, 20)
        pruning = ParentReconciler(
            kube, lambda p: [], operator_name="crd-op",
            settings=ParentSettings(events=False, write_status=False,
                                    prune_kinds=[(CRD_API, "CustomResourceDefinition")]),
        )
        refused = pruning.reconcile(fresh())
        assert not refused.ok
        assert "still has custom resources" in refused.errors[0].message
        assert _exists(kube, CRD_API, "CustomResourceDefinition", f"widgets.{group}")

        # marked by its builder: the deletion goes ahead
        wanted["crd"] = _widget_crd(group, description="v2", allow=True)
        assert reconciler.reconcile(fresh()).ok
        allowed = pruning.reconcile(fresh())
        assert allowed.ok, allowed.errors
        assert [r.action for r in allowed.pruned] == [Action.DELETED]
        assert wait_until(
            lambda: not _exists(kube, CRD_API, "CustomResourceDefinition", f"widgets.{group}"),
            30)
    finally:
        kube.patch(API_VERSION, KIND, "owner", {"metadata": {"finalizers": None}},
                   patch_type="application/merge-patch+json", namespace=ns)
