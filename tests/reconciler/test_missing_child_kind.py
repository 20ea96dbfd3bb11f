"""A child whose kind is not served is named as such, never "404 page not found" (issue 31).

When a child's CRD is missing, or was removed after the operator read discovery, the server has
no handler for the child's path and answers a plain-text "404 page not found". The parent's
condition and the log say instead which kind of which group version is not served, on both
servers; and the stale discovery is read again, so the next reconcile knows it without a
request to the missing path.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest

from builders import DesiredState, ResourceBuilder
from reconciler import KubernetesClient, NotFoundError, ParentReconciler
from tests.reconciler.conftest import install_crd, wait_for

PARENT_GROUP = "holders.optk.dev"
WIDGETS = "probes.optk.dev/v1"
NOT_SERVED = f"kind Widget of {WIDGETS} is not served"


def _build(parent: Any) -> list[ResourceBuilder]:
    widget = {"apiVersion": WIDGETS, "kind": "Widget", "metadata": {"name": "w"}, "spec": {}}
    return [lambda: (widget, DesiredState.PRESENT)]


def _reconciled(client: KubernetesClient, api: str, ns: str) -> dict[str, Any]:
    parent = client.get(api, "Holder", "h", namespace=ns)
    return next(c for c in parent["status"]["conditions"] if c["type"] == "Reconciled")


@pytest.mark.both_servers
def test_a_missing_child_kind_is_named_in_the_condition_and_the_log(
    kube_api: Any, kube_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    admin = KubernetesClient(kube_api.api_client())
    api = f"{PARENT_GROUP}/v1"
    if not admin.is_served(api, "Holder"):
        install_crd(admin, group=PARENT_GROUP, kind="Holder", plural="holders", status=True)
    if not admin.is_served(WIDGETS, "Widget"):
        install_crd(admin, group="probes.optk.dev", kind="Widget", plural="widgets")
    ns = kube_namespace
    parent = admin.create({"apiVersion": api, "kind": "Holder",
                           "metadata": {"name": "h", "namespace": ns}, "spec": {}})
    client = KubernetesClient(kube_api.api_client())  # the operator's: it reads discovery now
    reconciler = ParentReconciler(client, _build, operator_name=f"probe-{uuid.uuid4().hex[:6]}")
    assert reconciler.reconcile(parent).ok

    # the CRD goes; the operator's discovery still lists Widget
    admin.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                 "widgets.probes.optk.dev")
    fresh = KubernetesClient(kube_api.api_client())

    def gone() -> bool:
        fresh.invalidate_discovery()  # read discovery anew on each look
        return not fresh.is_served(WIDGETS, "Widget")

    wait_for(gone, timeout=60)
    for attempt in range(2):  # stale discovery first, then discovery read again
        caplog.clear()
        with caplog.at_level(logging.INFO):
            result = reconciler.reconcile(admin.get(api, "Holder", "h", namespace=ns))
        assert not result.ok
        message = _reconciled(admin, api, ns)["message"]
        assert NOT_SERVED in message, (attempt, message)
        assert "page not found" not in message, (attempt, message)
        logged = "\n".join(r.getMessage() for r in caplog.records)
        assert "page not found" not in logged, (attempt, logged)
        if attempt == 0:
            assert NOT_SERVED in logged, logged
    with pytest.raises(NotFoundError, match=NOT_SERVED):
        client.resource(WIDGETS, "Widget")  # discovery was read again: no request to the path
