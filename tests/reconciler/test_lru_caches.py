"""The bounded caches of the parent reconcile drop the least recently *used* entry, not the
oldest: a hit keeps an entry in (``reconciler._reconcile.memo``: ``RecentKeys``, ``BuildMemo``,
``ChildMemo``). Each test fails on first-in-first-out eviction, which a squeeze of
``reconciler/_reconcile/parents.py`` under its 500 lines once put in place of the LRU for the set
of parents in terminating namespaces (commit 592ed43: ``move_to_end`` and the reader's lock
dropped)."""

from __future__ import annotations

import threading
from typing import Any

from builders import DesiredState, ObjectRef
from reconciler import Action, KubernetesClient, ParentReconciler, ParentSettings
from reconciler._reconcile.memo import BuildMemo, ChildMemo, KeptBuild, RecentKeys
from reconciler._reconcile.parents import _TERMINATING_KEPT
from reconciler._reconcile.reconciling import ReconcileResult


def test_recent_keys_drop_the_least_recently_used() -> None:
    keys: RecentKeys[str] = RecentKeys(size=3)
    for key in "abc":
        keys.add(key)
    assert keys.touch("a")  # a hit: "a" is now the most recently used
    keys.add("d")  # one past the bound
    assert "a" in keys  # FIFO would have dropped "a", the oldest
    assert "b" not in keys
    assert len(keys) == 3
    keys.add("c")  # adding a kept key refreshes it too
    keys.add("e")
    assert "c" in keys
    assert "a" not in keys
    assert not keys.touch("b")  # a miss adds nothing
    assert len(keys) == 3


def test_recent_keys_look_without_refreshing() -> None:
    keys: RecentKeys[int] = RecentKeys(size=2)
    keys.add(1)
    keys.add(2)
    assert 1 in keys  # only a look
    keys.add(3)
    assert 1 not in keys


def test_recent_keys_hold_their_bound_under_concurrent_workers() -> None:
    keys: RecentKeys[int] = RecentKeys(size=64)
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(5_000):
                keys.add((offset + i) % 200)
                keys.touch((offset + 3 * i) % 200)
        except BaseException as error:  # a corrupted OrderedDict raises here
            errors.append(error)

    threads = [threading.Thread(target=work, args=(n * 37,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(keys) == 64


def _parent(name: str, version: str = "1") -> dict[str, Any]:
    return {"apiVersion": "x.dev/v1", "kind": "P",
            "metadata": {"name": name, "namespace": "n", "uid": f"uid-{name}",
                         "resourceVersion": version}}


def test_the_build_memo_drops_the_least_recently_used_build() -> None:
    memo = BuildMemo(size=2)
    for name in ("a", "b"):
        memo.remember(_parent(name), [], epoch=memo.epoch)
    assert memo.lookup(_parent("a")) == KeptBuild(children=())  # a hit
    memo.remember(_parent("c"), [], epoch=memo.epoch)
    assert memo.lookup(_parent("a")) == KeptBuild(children=())  # FIFO would have dropped "a"
    assert memo.lookup(_parent("b")) is None


def test_the_child_memo_drops_the_least_recently_used_child() -> None:
    memo = ChildMemo(size=2)
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    live = {**obj, "metadata": {"name": "c", "uid": "u", "resourceVersion": "7"}}
    ref = ObjectRef(api_version="v1", kind="ConfigMap", name="c", namespace="n")
    result = ReconcileResult(action=Action.UNCHANGED, ref=ref)
    state = DesiredState.PRESENT
    for parent_uid in ("a", "b"):
        _, digest = memo.lookup(parent_uid, ref, obj, state, live)
        memo.remember(parent_uid, ref, digest, state, live, result)
    assert memo.lookup("a", ref, obj, state, live)[0] is not None  # a hit
    _, digest = memo.lookup("c", ref, obj, state, live)
    memo.remember("c", ref, digest, state, live, result)
    assert memo.lookup("a", ref, obj, state, live)[0] is not None  # FIFO would drop "a"
    assert memo.lookup("b", ref, obj, state, live)[0] is None


def test_a_parent_left_alone_stays_so_while_it_is_reconciled(client: KubernetesClient) -> None:
    reconciler = ParentReconciler(
        client, lambda parent: [], operator_name="lru-operator",
        settings=ParentSettings(events=False, write_status=False),
    )
    doomed = _parent("doomed")
    reconciler.namespace_terminating("uid-doomed")
    for i in range(_TERMINATING_KEPT - 1):
        reconciler.namespace_terminating(f"uid-other-{i}")
    assert reconciler.reconcile(doomed).namespace_terminating  # a hit
    reconciler.namespace_terminating("uid-one-more")  # one past the bound
    assert "uid-doomed" in reconciler._terminating  # FIFO dropped it: the oldest mark


def test_a_kept_build_is_keyed_on_its_inputs_versions_read_before_the_build() -> None:
    memo, versions = BuildMemo(), {"s": "1"}
    memo.inputs_key = lambda parent: f"|s={versions['s']}"
    before = memo.inputs_of(_parent("a"))  # read before the builders read the input
    memo.remember(_parent("a"), [], epoch=memo.epoch, inputs=before)
    assert memo.lookup(_parent("a")) == KeptBuild(children=())
    versions["s"] = "2"  # the input changed: the parent's version did not
    assert memo.lookup(_parent("a")) is None
    # A build that read version 2 but began before version 3 arrived is kept under 2: missed.
    before = memo.inputs_of(_parent("a"))
    versions["s"] = "3"
    memo.remember(_parent("a"), [], epoch=memo.epoch, inputs=before)
    assert memo.lookup(_parent("a")) is None
