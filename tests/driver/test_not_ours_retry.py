"""A child skipped as "not ours" is retried as soon as the object holding its name lets go
(issue 36): deleted, or handed over (annotated with ``optk.dev/last-applied``, as the parent's
``Reconciled`` condition advises). The object is in the operator's informer scope (its
``managed-by`` label: left by ``kubectl apply`` of a copied manifest, say), so the child
informer's event is what wakes the parent; before, only a change of the parent or the 10 h
resync did, and both tests waited in vain."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from builders.names import MANAGED_BY_LABEL
from objectmatcher import LAST_APPLIED_ANNOTATION
from reconciler import KubernetesClient, NotFoundError
from tests.driver.conftest import child_data, make_operator, running, thing, wait_until
from tests.driver.sample_operator import API_VERSION

pytestmark = pytest.mark.both_servers


def _foreign(client: KubernetesClient, ns: str, operator_name: str) -> None:
    client.create({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "a-cfg", "namespace": ns,
                                "labels": {MANAGED_BY_LABEL: operator_name}},
                   "data": {"value": "foreign"}})


def _reconciled(client: KubernetesClient, ns: str) -> dict[str, Any]:
    live = client.get(API_VERSION, "Thing", "a", namespace=ns)
    return next((c for c in (live.get("status") or {}).get("conditions", ())
                 if c["type"] == "Reconciled"), {})


def _skipped(client: KubernetesClient, ns: str) -> bool:
    return _reconciled(client, ns).get("reason") == "ChildrenSkipped"


def _let_go_by_deleting(client: KubernetesClient, ns: str) -> None:
    client.delete("v1", "ConfigMap", "a-cfg", namespace=ns)


def _let_go_by_handing_over(client: KubernetesClient, ns: str) -> None:
    client.patch("v1", "ConfigMap", "a-cfg",
                 {"metadata": {"annotations": {LAST_APPLIED_ANNOTATION: "{}"}}},
                 patch_type="application/merge-patch+json", namespace=ns)


@pytest.mark.parametrize("let_go", [_let_go_by_deleting, _let_go_by_handing_over],
                         ids=["deleted", "handed-over"])
def test_a_child_skipped_as_not_ours_is_taken_once_the_foreign_object_lets_go(
    client: KubernetesClient, ns: str, let_go: Callable[[KubernetesClient, str], None]
) -> None:
    operator = make_operator(ns)
    _foreign(client, ns, operator.name)
    with running(operator, client):
        client.create(thing(ns, "a", "1"))
        assert wait_until(lambda: _skipped(client, ns), 20), _reconciled(client, ns)
        assert child_data(client, ns, "a") == {"value": "foreign"}
        let_go(client, ns)
        assert wait_until(lambda: child_data(client, ns, "a") == {"value": "1"}, 20)
        assert wait_until(lambda: _reconciled(client, ns).get("status") == "True", 20), \
            _reconciled(client, ns)


def test_a_parent_declaring_a_child_absent_leaves_another_parents_object_alone_and_is_reconciled(
    client: KubernetesClient, ns: str
) -> None:
    """Two parents, one cluster-scoped child of one name: ``a`` declares it ABSENT, ``b``
    PRESENT (an exclusive CRD in the Observer example). ``b`` holds it; ``a`` has no such
    child, which is what ABSENT asks: ``a`` says Reconciled=True, reconciled again after
    ``b``'s create, and neither deletes nor writes ``b``'s object. Before (issue 38) ``a``
    said ChildrenSkipped where its cache held the object and Reconciled=True where it did
    not (sharded: an object of another shard, or one without the managed-by label): two
    answers for one cluster, found by the sharded operator machine."""
    from builders import DesiredState
    from builders.names import OWNER_UID_LABEL

    role = f"optk-exclusive-{ns}"

    def build(parent: Any) -> list[Any]:
        obj = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": role}, "rules": []}
        state = DesiredState.ABSENT if parent["metadata"]["name"] == "a" else (
            DesiredState.PRESENT)
        return [lambda: (obj, state)]

    def condition(name: str) -> dict[str, Any]:
        live = client.get(API_VERSION, "Thing", name, namespace=ns)
        return next((c for c in (live.get("status") or {}).get("conditions", ())
                     if c["type"] == "Reconciled"), {})

    operator = make_operator(ns, build=build)
    try:
        with running(operator, client):
            client.create(thing(ns, "a", "1"))
            assert wait_until(lambda: condition("a").get("status") == "True", 20)
            client.create(thing(ns, "b", "1"))
            assert wait_until(lambda: condition("b").get("status") == "True", 20), condition("b")
            held = client.get("rbac.authorization.k8s.io/v1", "ClusterRole", role)
            client.patch(API_VERSION, "Thing", "a", {"spec": {"value": "2"}},
                         patch_type="application/merge-patch+json", namespace=ns)
            generation = client.get(API_VERSION, "Thing", "a", namespace=ns)[
                "metadata"]["generation"]
            assert wait_until(lambda: condition("a").get("observedGeneration") == generation,
                              20), condition("a")
            assert (condition("a")["status"], condition("a")["reason"]) == (
                "True", "ReconcileSucceeded"), condition("a")
            now = client.get("rbac.authorization.k8s.io/v1", "ClusterRole", role)
            assert now["metadata"]["uid"] == held["metadata"]["uid"]
            assert now["metadata"]["resourceVersion"] == held["metadata"]["resourceVersion"], \
                "the parent declaring it ABSENT wrote the other parent's object"
            assert now["metadata"]["labels"][OWNER_UID_LABEL] == \
                held["metadata"]["labels"][OWNER_UID_LABEL]
    finally:
        with contextlib.suppress(NotFoundError):  # gone with its parent already
            client.delete("rbac.authorization.k8s.io/v1", "ClusterRole", role)


def test_a_shared_child_deleted_by_someone_else_is_created_again_at_once(
    client: KubernetesClient, ns: str
) -> None:
    """A cluster-scoped child two parents share (``builders.shared``) names no owner: its
    record (``optk.dev/shared-by``) names them. Deleted by someone else, it is created again
    by its parents at once, as any child is; before, its deletion woke no parent and it stayed
    missing until the periodic resync (the Observer machine's soak, issue 38)."""
    from builders import DesiredState, shared

    role = f"optk-shared-{ns}"

    def build(parent: Any) -> list[Any]:
        obj = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": role}, "rules": []}
        return [shared(lambda: (obj, DesiredState.PRESENT))]

    operator = make_operator(ns, build=build)
    try:
        with running(operator, client):
            for name in ("a", "b"):
                client.create(thing(ns, name, "1"))
            for name in ("a", "b"):
                assert wait_until(lambda name=name: _condition(client, ns, name).get(
                    "status") == "True", 20), _condition(client, ns, name)
            first = client.get("rbac.authorization.k8s.io/v1", "ClusterRole", role)
            client.delete("rbac.authorization.k8s.io/v1", "ClusterRole", role)

            def again() -> bool:
                try:
                    live = client.get("rbac.authorization.k8s.io/v1", "ClusterRole", role)
                except NotFoundError:
                    return False
                return bool(live["metadata"]["uid"] != first["metadata"]["uid"])

            assert wait_until(again, 20), "the shared child was not created again"
    finally:
        with contextlib.suppress(NotFoundError):
            client.delete("rbac.authorization.k8s.io/v1", "ClusterRole", role)


def _condition(client: KubernetesClient, ns: str, name: str) -> dict[str, Any]:
    live = client.get(API_VERSION, "Thing", name, namespace=ns)
    return next((c for c in (live.get("status") or {}).get("conditions", ())
                 if c["type"] == "Reconciled"), {})
