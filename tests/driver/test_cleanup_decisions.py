"""The cleanup finalizer's decisions (``reconciler._reconcile.finalizing``), as pure functions."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from builders import ObjectRef
from reconciler._reconcile.finalizing import (
    ALLOW_DATA_LOSS_ANNOTATION,
    CLEANUP_FINALIZER,
    CLEANUP_KINDS_ANNOTATION,
    CleanupStep,
    decide_cleanup,
    finalizer_patch,
    is_uncollectable,
    needs_cleanup,
    parse_kinds,
    refuses_data_loss,
)

ROLE = ObjectRef(api_version="rbac.authorization.k8s.io/v1", kind="ClusterRole", name="r")
CM = ObjectRef(api_version="v1", kind="ConfigMap", name="c", namespace="ns")
ELSEWHERE = ObjectRef(api_version="v1", kind="ConfigMap", name="c", namespace="other")


def _parent(*, finalizers: tuple[str, ...] = (), deleting: bool = False,
            kinds: str | None = None, namespace: str | None = "ns") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "uid": "u1", "resourceVersion": "7",
                            "finalizers": list(finalizers)}
    if namespace:
        meta["namespace"] = namespace
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if kinds is not None:
        meta["annotations"] = {CLEANUP_KINDS_ANNOTATION: kinds}
    return {"apiVersion": "x/v1", "kind": "P", "metadata": meta}


def test_only_children_out_of_the_collectors_reach_need_the_finalizer() -> None:
    parent = _parent()
    assert not is_uncollectable(parent, CM)
    assert is_uncollectable(parent, ROLE)
    assert is_uncollectable(parent, ELSEWHERE)
    assert not is_uncollectable(_parent(namespace=None), ROLE)  # owner references work
    assert needs_cleanup(parent, [CM], on_delete=False) is None
    assert needs_cleanup(parent, [CM], on_delete=True) == ()
    assert needs_cleanup(parent, [CM, ROLE], on_delete=False) == (ROLE.type_key,)


def test_the_finalizer_is_added_once_with_every_kind() -> None:
    add = decide_cleanup(_parent(), wanted_kinds=(ROLE.type_key,))
    assert add.step is CleanupStep.ADD
    assert add.kinds == (ROLE.type_key,)
    patch = finalizer_patch(_parent(finalizers=("other",)), add=True, kinds=add.kinds)
    assert patch == {"metadata": {
        "finalizers": ["other", CLEANUP_FINALIZER], "resourceVersion": "7",
        "annotations": {CLEANUP_KINDS_ANNOTATION: "rbac.authorization.k8s.io/v1/ClusterRole"}}}
    kept = _parent(finalizers=(CLEANUP_FINALIZER,),
                   kinds="rbac.authorization.k8s.io/v1/ClusterRole")
    assert decide_cleanup(kept, wanted_kinds=(ROLE.type_key,)).step is CleanupStep.NONE
    assert decide_cleanup(kept, wanted_kinds=()).step is CleanupStep.NONE  # never removed alive
    grown = decide_cleanup(kept, wanted_kinds=(("v1", "ConfigMap"),))
    assert grown.step is CleanupStep.ADD
    assert len(grown.kinds) == 2
    assert decide_cleanup(_parent(), wanted_kinds=None).step is CleanupStep.NONE


def test_a_deletion_deletes_waits_runs_the_hook_then_releases() -> None:
    parent = _parent(finalizers=(CLEANUP_FINALIZER, "other"), deleting=True)
    first = decide_cleanup(parent, remaining={ROLE}, on_delete=True)
    assert (first.step, first.delete) == (CleanupStep.DELETE_CHILDREN, (ROLE,))
    wait = decide_cleanup(parent, remaining={ROLE}, deleting_now={ROLE}, on_delete=True)
    assert wait.step is CleanupStep.WAIT
    assert decide_cleanup(parent, on_delete=True).step is CleanupStep.RUN_ON_DELETE
    assert decide_cleanup(parent, on_delete=True, on_delete_done=True).step is CleanupStep.REMOVE
    assert finalizer_patch(parent, add=False) == {
        "metadata": {"finalizers": ["other"], "resourceVersion": "7"}}
    # not ours to finish: another controller's finalizer only
    assert decide_cleanup(_parent(finalizers=("other",), deleting=True)).step is CleanupStep.NONE


@given(st.sets(st.sampled_from([ROLE, ELSEWHERE])), st.booleans(), st.booleans())
def test_a_parent_whose_children_are_gone_is_never_kept(
    deleting: set[ObjectRef], hook: bool, done: bool
) -> None:
    """With nothing remaining, the step is the hook (once) or the release: never a wait."""
    parent = _parent(finalizers=(CLEANUP_FINALIZER,), deleting=True)
    step = decide_cleanup(parent, remaining=(), deleting_now=deleting, on_delete=hook,
                          on_delete_done=done).step
    assert step is (CleanupStep.RUN_ON_DELETE if hook and not done else CleanupStep.REMOVE)


def test_kinds_annotation_round_trips_and_crd_data_loss_is_refused_unless_marked() -> None:
    assert parse_kinds("v1/ConfigMap, rbac.authorization.k8s.io/v1/ClusterRole,bad,") == (
        ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("v1", "ConfigMap"))
    crd = {"kind": "CustomResourceDefinition", "metadata": {"name": "widgets.x"}}
    assert refuses_data_loss(crd, custom_resources=0) is None
    refusal = refuses_data_loss(crd, custom_resources=2)
    assert refusal is not None
    assert "widgets.x" in refusal
    assert ALLOW_DATA_LOSS_ANNOTATION in refusal
    marked = {**crd, "metadata": {"name": "widgets.x",
                                  "annotations": {ALLOW_DATA_LOSS_ANNOTATION: "true"}}}
    assert refuses_data_loss(marked, custom_resources=2) is None
