"""``optk plan`` and ``optk uninstall`` honour pauses and per-object policies, and say so.

A plan lists a write a child's ``optk.dev/policy`` holds back as ``held`` with why (and the
drifted paths of an observed child), and a paused parent as ``paused``, writing nothing; an
uninstall keeps the children of a paused parent and a child whose policy forbids a delete, each
reported as kept with why, and deletes the rest.
"""

from __future__ import annotations

from typing import Any

import pytest

from reconciler import KubernetesClient, NotFoundError, ParentReconciler, ParentSettings
from reconciler._commands.plans import format_plan, plan_parents
from reconciler._commands.uninstall import uninstall
from reconciler._driver.operators import Operator
from reconciler._reconcile.guard import PlanGuard
from reconciler._reconcile.policies import PauseSettings
from tests.reconciler import plan_operator
from tests.reconciler.test_plans import API, stack, stack_kind  # noqa: F401 (its fixture)

pytestmark = pytest.mark.usefixtures("stack_kind")


def merge(client: KubernetesClient, api_version: str, kind: str, name: str, ns: str,
          body: dict[str, Any]) -> dict[str, Any]:
    return client.patch(api_version, kind, name, body,
                        patch_type="application/merge-patch+json", namespace=ns)


def reconciled_stack(client: KubernetesClient, ns: str) -> dict[str, Any]:
    parent = client.create(stack(ns, size=1))
    assert ParentReconciler(client, plan_operator.build,
                            operator_name=owner(ns)).reconcile(parent).ok
    return parent


def owner(ns: str) -> str:
    """An operator name of this test alone (uninstall looks in every namespace)."""
    return f"op-{ns}"[:63]


@pytest.mark.both_servers
def test_plan_shows_held_writes_and_paused_parents(client: KubernetesClient, ns: str) -> None:
    reconciled_stack(client, ns)
    merge(client, "v1", "ConfigMap", "s-config", ns,
          {"metadata": {"annotations": {"optk.dev/policy": "create-only"}}})
    merge(client, "v1", "Secret", "s-secret", ns,
          {"metadata": {"annotations": {"optk.dev/policy": "observe"}},
           "stringData": {"password": "by-hand"}})
    changed = merge(client, API, "Stack", "s", ns, {"spec": {"size": 3}})
    [result] = plan_parents(client, plan_operator.build, [changed],
                            operator_name=owner(ns), guard=PlanGuard())
    text = format_plan([result])
    assert f"held      ConfigMap.v1 {ns}/s-config  (policy create-only: patch not sent)" in text
    assert f"held      Secret.v1 {ns}/s-secret  (policy observe: patch not sent, drift " \
           "reported)" in text
    assert "drifted /data/password" in text
    assert "by-hand" not in text
    assert client.get("v1", "ConfigMap", "s-config", namespace=ns)["data"] == {"size": "1"}

    paused = merge(client, API, "Stack", "s", ns,
                   {"metadata": {"annotations": {"optk.dev/paused": "true"}}})
    [result] = plan_parents(client, plan_operator.build, [paused],
                            operator_name=owner(ns), guard=PlanGuard(),
                            parent_settings=ParentSettings(pause=PauseSettings()))
    text = format_plan([result])
    assert 'paused    nothing would be written (annotation optk.dev/paused is "true")' in text
    assert "update" not in text
    conditions = (client.get(API, "Stack", "s", namespace=ns).get("status") or {}).get(
        "conditions") or ()
    assert not [c for c in conditions if c.get("reason") == "ReconcilePaused"]  # a plan writes not


@pytest.mark.both_servers
def test_uninstall_keeps_what_people_keep(client: KubernetesClient, ns: str) -> None:
    reconciled_stack(client, ns)
    merge(client, "v1", "Secret", "s-secret", ns,
          {"metadata": {"annotations": {"optk.dev/policy": "no-prune"}}})
    operator = Operator(api_version=API, kind="Stack", build=plan_operator.build,
                        name=owner(ns), namespace=ns)
    report = uninstall(client, operator)
    kept = {ref.name: why for ref, why in report.kept}
    assert kept == {"s-secret": "policy no-prune: never deleted by the toolkit"}
    assert [ref.name for ref in report.deleted] == ["s-config"]
    client.get("v1", "Secret", "s-secret", namespace=ns)

    other = client.create({**stack(ns, size=1), "metadata": {
        "name": "t", "namespace": ns, "annotations": {"optk.dev/paused": "true"}}})
    ParentReconciler(
        client, plan_operator.build, operator_name=owner(ns),
        settings=ParentSettings(pause=PauseSettings(namespaces=frozenset({"elsewhere"}))),
    ).reconcile(
        {**other, "metadata": {**other["metadata"], "annotations": {}}})  # built once, unpaused
    report = uninstall(client, operator)
    kept = {ref.name: why for ref, why in report.kept}
    assert kept["t-config"] == 'its parent is paused (annotation optk.dev/paused is "true")'
    assert "t-secret" in kept
    client.get("v1", "ConfigMap", "t-config", namespace=ns)
    with pytest.raises(NotFoundError):
        client.get("v1", "ConfigMap", "s-config", namespace=ns)
