"""The resync memo (``reconciler._reconcile.memo``) in ``ParentReconciler``: an unchanged child is
answered from the memo, and any change to the built child or to the live child takes the full path
again.
"""

from __future__ import annotations

from typing import Any

from builders import DesiredState
from reconciler import Action, KubernetesClient, ParentReconciler, ParentSettings
from tests.reconciler.test_parents import builders_of, cm, parent, parent_kind

__all__ = ["parent", "parent_kind"]  # fixtures shared with test_parents


def test_an_unchanged_child_is_answered_from_the_memo(
    client: KubernetesClient, parent: dict[str, Any], ns: str
) -> None:
    data = {"a": "1"}
    pr = ParentReconciler(
        client,
        lambda p: builders_of((cm("memo-config", **data),
                                                        DesiredState.PRESENT)),
        operator_name="memo-operator", settings=ParentSettings(events=False, write_status=False),
    )
    assert [r.action for r in pr.reconcile(parent).children] == [Action.CREATED]
    assert [r.action for r in pr.reconcile(parent).children] == [Action.UNCHANGED]
    assert pr.memo.hits == 0  # the first UNCHANGED is matched in full, then remembered

    again = pr.reconcile(parent)
    assert [r.action for r in again.children] == [Action.UNCHANGED]
    assert again.writes == 0
    assert pr.memo.hits == 1
    assert again.children[0].live is not None

    # Drift in the live child (a new resourceVersion) misses the memo and is repaired.
    client.patch("v1", "ConfigMap", "memo-config", {"data": {"a": "drifted"}},
                 patch_type="application/merge-patch+json", namespace=ns)
    assert [r.action for r in pr.reconcile(parent).children] == [Action.UPDATED]
    assert client.get("v1", "ConfigMap", "memo-config", namespace=ns)["data"]["a"] == "1"

    # A builder whose output changes (outside state, say) misses the memo too.
    pr.reconcile(parent)
    hits = pr.memo.hits
    data["a"] = "2"
    assert [r.action for r in pr.reconcile(parent).children] == [Action.UPDATED]
    assert pr.memo.hits == hits
    assert client.get("v1", "ConfigMap", "memo-config", namespace=ns)["data"]["a"] == "2"


def test_states_with_hooks_are_never_remembered(
    client: KubernetesClient, parent: dict[str, Any]
) -> None:
    calls: list[str] = []

    def before_update(desired: Any, live: Any) -> Any:
        calls.append("update")
        return desired

    state = DesiredState.PRESENT.with_hooks(before_update=before_update)
    pr = ParentReconciler(
        client, lambda p: builders_of((cm("memo-hooked", a="1"), state)),
        operator_name="memo-operator", settings=ParentSettings(events=False, write_status=False),
    )
    for _ in range(3):
        assert pr.reconcile(parent).ok
    assert pr.memo.hits == 0
