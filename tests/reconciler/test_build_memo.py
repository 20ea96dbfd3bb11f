"""The build memo (``reconciler._reconcile.memo.BuildMemo``,
``ParentReconciler(reuse_builds=True)``): a reconcile of a parent unchanged since its last one
reuses its build instead of calling the builders; any change to the parent, a failed builder, a
state with hooks or ``forget_builds`` calls them again; a drifted child is repaired from the kept
build, which nothing changes.
"""

from __future__ import annotations

from typing import Any

from builders import DesiredState, ResourceBuilder
from reconciler import Action, KubernetesClient, ParentReconciler, ParentSettings
from reconciler._reconcile.memo import digest_of
from tests.reconciler.test_parents import cm, fresh, parent, parent_kind

__all__ = ["parent", "parent_kind"]  # fixtures shared with test_parents

MERGE = "application/merge-patch+json"


class Counted:
    """``build(parent)``: two ConfigMaps from the parent's spec; counts its calls."""

    def __init__(self, state: DesiredState = DesiredState.PRESENT) -> None:
        self.calls = 0
        self.state = state
        self.fail = False
        self.invalid = False

    def __call__(self, parent: dict[str, Any]) -> list[ResourceBuilder]:
        self.calls += 1
        if self.fail:
            raise RuntimeError("the builder failed")
        size = str(parent["spec"]["size"])
        tier = str(parent["metadata"].get("labels", {}).get("tier", "none"))
        built = [cm("bm-a", size=size, tier=tier), cm("bm-b", size=size)]
        if self.invalid:
            built.append(cm("bm-Not_A_Name", size=size))  # the server refuses it
        return [(lambda o=o: (o, self.state)) for o in built]


def _reconciler(client: KubernetesClient, build: Counted, **options: Any) -> ParentReconciler:
    settings = ParentSettings(events=False, write_status=False,
                              reuse_builds=options.pop("reuse_builds", True))
    return ParentReconciler(client, build, operator_name="bm-operator", settings=settings,
                            **options)


def test_an_unchanged_parent_is_not_rebuilt(
    client: KubernetesClient, parent: dict[str, Any]
) -> None:
    build = Counted()
    pr = _reconciler(client, build)
    assert [r.action for r in pr.reconcile(parent).children] == [Action.CREATED] * 2
    for _ in range(3):
        again = pr.reconcile(parent)
        assert [r.action for r in again.children] == [Action.UNCHANGED] * 2
        assert again.writes == 0
        assert again.ok
    assert build.calls == 1
    assert pr.builds is not None
    assert pr.builds.hits == 3
    assert pr.memo.hits == 4  # the kept digests answered the child memo too


def test_a_changed_parent_is_rebuilt(
    client: KubernetesClient, parent: dict[str, Any], ns: str
) -> None:
    build = Counted()
    pr = _reconciler(client, build)
    assert pr.reconcile(parent).ok
    name = parent["metadata"]["name"]
    changed = client.patch(parent["apiVersion"], parent["kind"],
                           name, {"spec": {"size": 3}}, patch_type=MERGE, namespace=ns)
    assert [r.action for r in pr.reconcile(changed).children] == [Action.UPDATED] * 2
    assert build.calls == 2
    assert client.get("v1", "ConfigMap", "bm-b", namespace=ns)["data"] == {"size": "3"}

    labelled = client.patch(parent["apiVersion"], parent["kind"], name,
                            {"metadata": {"labels": {"tier": "gold"}}}, patch_type=MERGE,
                            namespace=ns)
    assert [r.action for r in pr.reconcile(labelled).children] == [
        Action.UPDATED, Action.UNCHANGED]
    assert build.calls == 3
    assert client.get("v1", "ConfigMap", "bm-a", namespace=ns)["data"]["tier"] == "gold"
    assert pr.reconcile(labelled).writes == 0
    assert build.calls == 3


def test_a_drifted_child_is_repaired_from_the_kept_build(
    client: KubernetesClient, parent: dict[str, Any], ns: str
) -> None:
    build = Counted()
    pr = _reconciler(client, build)
    assert pr.reconcile(parent).ok
    assert pr.builds is not None
    kept = pr.builds.lookup(parent)
    assert kept is not None
    digests = [digest_of(obj) for _, obj, _, _ in kept.children]
    assert digests == [digest for _, _, _, digest in kept.children]

    client.patch("v1", "ConfigMap", "bm-a", {"data": {"size": "drifted"}}, patch_type=MERGE,
                 namespace=ns)
    client.delete("v1", "ConfigMap", "bm-b", namespace=ns)
    repaired = pr.reconcile(parent)
    assert [r.action for r in repaired.children] == [Action.UPDATED, Action.CREATED]
    assert build.calls == 1
    assert client.get("v1", "ConfigMap", "bm-a", namespace=ns)["data"]["size"] == "2"
    assert client.get("v1", "ConfigMap", "bm-b", namespace=ns)["data"] == {"size": "2"}
    # The writes planned with copies: the kept children are as built.
    assert [digest_of(obj) for _, obj, _, _ in kept.children] == digests
    assert pr.reconcile(parent).writes == 0
    assert build.calls == 1


def test_without_reuse_builds_the_builders_run_every_time(
    client: KubernetesClient, parent: dict[str, Any]
) -> None:
    build = Counted()
    pr = _reconciler(client, build, reuse_builds=False)
    for _ in range(3):
        assert pr.reconcile(parent).ok
    assert build.calls == 3
    assert pr.builds is None


def test_forget_builds_and_a_failed_build_rebuild(
    client: KubernetesClient, parent: dict[str, Any]
) -> None:
    build = Counted()
    pr = _reconciler(client, build)
    assert pr.reconcile(parent).ok
    pr.forget_builds()
    assert pr.reconcile(parent).ok
    assert build.calls == 2
    meta = parent["metadata"]
    pr.forget_builds((meta["namespace"], meta["name"]))
    build.fail = True
    assert not pr.reconcile(parent).ok
    assert not pr.reconcile(parent).ok
    assert build.calls == 4  # a failed build is never kept
    build.fail = False
    assert pr.reconcile(parent).ok
    assert pr.reconcile(parent).ok
    assert build.calls == 5


def test_a_reconcile_with_a_failed_child_keeps_no_build(
    client: KubernetesClient, parent: dict[str, Any]
) -> None:
    build = Counted()
    build.invalid = True
    pr = _reconciler(client, build)
    for _ in range(2):
        result = pr.reconcile(parent)
        assert [e.ref.name for e in result.errors] == ["bm-Not_A_Name"]
    assert build.calls == 2  # retried with the builders called again
    build.invalid = False
    for _ in range(2):
        assert pr.reconcile(parent).ok
    assert build.calls == 3


def test_builds_with_hooks_are_not_kept_and_hooks_run_as_before(
    client: KubernetesClient, parent: dict[str, Any], ns: str
) -> None:
    def run(reuse: bool) -> tuple[list[str], int]:
        hooked: list[str] = []

        def before_create(desired: Any) -> Any:
            hooked.append(f"create {desired['metadata']['name']}")
            return desired

        def before_update(current: Any, desired: Any) -> Any:
            hooked.append(f"update {desired['metadata']['name']}")
            return desired

        build = Counted(DesiredState.PRESENT.with_hooks(before_create=before_create,
                                                        before_update=before_update))
        pr = _reconciler(client, build, reuse_builds=reuse)
        assert pr.reconcile(parent).ok
        client.patch("v1", "ConfigMap", "bm-a", {"data": {"size": "drifted"}},
                     patch_type=MERGE, namespace=ns)
        assert pr.reconcile(parent).ok
        assert pr.reconcile(parent).ok
        assert client.get("v1", "ConfigMap", "bm-a", namespace=ns)["data"]["size"] == "2"
        for name in ("bm-a", "bm-b"):
            client.delete("v1", "ConfigMap", name, namespace=ns)
        return hooked, build.calls

    with_memo, calls = run(True)
    assert calls == 3  # a build with hooks is never kept
    assert "create bm-a" in with_memo
    assert "update bm-a" in with_memo
    assert run(False) == (with_memo, 3)  # the same hook calls as without reuse_builds


def test_the_toolkits_own_status_write_keeps_the_build(
    client: KubernetesClient, parent: dict[str, Any]
) -> None:
    build = Counted()
    pr = ParentReconciler(
        client, build, operator_name="bm-operator",
        settings=ParentSettings(events=False, reuse_builds=True),
    )
    assert pr.reconcile(parent).status_written
    for _ in range(2):
        assert pr.reconcile(fresh(client, parent)).writes == 0
    assert build.calls == 1  # the status write changed the version, not what builders read


def test_another_writers_status_field_or_label_rebuilds(
    client: KubernetesClient, parent: dict[str, Any], ns: str
) -> None:
    build = Counted()
    pr = ParentReconciler(
        client, build, operator_name="bm-operator",
        settings=ParentSettings(events=False, reuse_builds=True),
    )
    assert pr.reconcile(parent).status_written
    name = parent["metadata"]["name"]
    client.patch(parent["apiVersion"], parent["kind"], name, {"status": {"other": "x"}},
                 patch_type=MERGE, namespace=ns, subresource="status")
    assert pr.reconcile(fresh(client, parent)).writes == 0
    assert build.calls == 2  # a status field the toolkit did not write: built again
    client.patch(parent["apiVersion"], parent["kind"], name,
                 {"metadata": {"annotations": {"note": "y"}}}, patch_type=MERGE, namespace=ns)
    pr.reconcile(fresh(client, parent))
    assert build.calls == 3
