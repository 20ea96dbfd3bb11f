"""Informers and the own-write recorder against the embedded server."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from reconciler import KubernetesClient
from reconciler._cache.children import InformerManager
from reconciler._cache.informers import GONE_PAUSE_CAP, Informer, WatchOptions
from reconciler._cache.recording import RecordingClient
from reconciler._cache.stores import compact
from reconciler._client.protocol import ForwardingClient
from reconciler.embedded import EmbeddedApiServer, Faults
from reconciler.testing import VirtualClock
from tests.driver.conftest import wait_until

MERGE = "application/merge-patch+json"


def _cm(ns: str, name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": {"team": "a"}},
            "data": dict(data)}


@pytest.mark.both_servers
def test_an_informer_lists_then_follows_every_change(client: KubernetesClient, ns: str) -> None:
    client.create(_cm(ns, "before", v="1"))
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()

    def record(event: str, old: Any, new: Any) -> None:
        with lock:
            seen.append((event, new["metadata"]["name"]))

    informer = Informer(client, "v1", "ConfigMap", namespace=ns, label_selector="team=a")
    informer.add_handler(record)
    informer.start()
    try:
        assert informer.wait_synced(10)
        assert seen == [("ADDED", "before")]
        client.create(_cm(ns, "after", v="1"))
        client.patch("v1", "ConfigMap", "before", {"data": {"v": "2"}}, patch_type=MERGE,
                     namespace=ns)
        client.delete("v1", "ConfigMap", "after", namespace=ns)
        client.create({**_cm(ns, "other"), "metadata": {"name": "other", "namespace": ns}})
        assert wait_until(lambda: len(seen) == 4)
        assert seen[1:] == [("ADDED", "after"), ("MODIFIED", "before"), ("DELETED", "after")]
        assert informer.cache.get(ns, "before")["data"] == {"v": "2"}  # type: ignore[index]
        assert informer.cache.get(ns, "after") is None
        assert informer.cache.get(ns, "other") is None  # outside the label selector
        assert [o["metadata"]["name"] for o in informer.cache.by_label("team", "a")] == ["before"]
    finally:
        informer.stop()


@pytest.mark.both_servers
def test_the_echo_of_an_own_write_is_recognised_and_a_foreign_edit_is_not(
    client: KubernetesClient, ns: str
) -> None:
    informer = Informer(client, "v1", "ConfigMap", namespace=ns).start()
    recording = RecordingClient(
        client, informers=lambda api, kind: informer if kind == "ConfigMap" else None
    )
    echoes: list[tuple[str, bool]] = []
    informer.add_handler(
        lambda event, old, new: echoes.append((event, recording.is_own_echo(event, new)))
    )
    try:
        assert informer.wait_synced(10)
        created = recording.create(_cm(ns, "mine", v="1"))
        # written through at once (as the cache stores objects: without managedFields)
        assert informer.cache.get(ns, "mine") == compact(created)
        recording.patch("v1", "ConfigMap", "mine", {"data": {"v": "2"}}, patch_type=MERGE,
                        namespace=ns)
        client.patch("v1", "ConfigMap", "mine", {"data": {"v": "3"}}, patch_type=MERGE,
                     namespace=ns)
        recording.delete("v1", "ConfigMap", "mine", namespace=ns)
        assert wait_until(lambda: len(echoes) >= 4), echoes
        assert echoes == [("ADDED", True), ("MODIFIED", True), ("MODIFIED", False),
                          ("DELETED", True)]
        event = recording.create({"apiVersion": "v1", "kind": "Event",
                                  "metadata": {"name": "e1", "namespace": ns},
                                  "involvedObject": {"kind": "ConfigMap", "name": "mine",
                                                     "namespace": ns},
                                  "reason": "Test", "message": "m"})
        assert event["kind"] == "Event"
        assert recording.writes == 4
        assert recording._versions == {}  # nothing left behind, the Event not recorded
    finally:
        informer.stop()


@pytest.mark.both_servers
def test_a_silent_stream_is_replaced_after_the_inactivity_timeout(
    client: KubernetesClient, ns: str
) -> None:
    informer = Informer(client, "v1", "ConfigMap", namespace=ns,
                        options=WatchOptions(inactivity_timeout=0.3)).start()
    try:
        assert informer.wait_synced(10)
        assert wait_until(lambda: informer.stats.reconnects >= 2, 10)  # nothing was said
        assert informer.stats.silences >= 2
        assert informer.stats.lists == 1  # resumed from the last version, no relist
        client.create(_cm(ns, "late", v="1"))
        assert wait_until(lambda: informer.cache.get(ns, "late") is not None)
    finally:
        informer.stop()


@pytest.mark.both_servers
def test_concurrent_first_uses_of_a_type_share_one_informer(
    client: KubernetesClient, ns: str
) -> None:
    manager = InformerManager(client, handler=lambda *_: None, namespace=ns)
    barrier = threading.Barrier(8)

    def use(user: int) -> None:
        barrier.wait()
        manager.use(user, [("v1", "ConfigMap"), ("v1", "Secret")])

    threads = [threading.Thread(target=use, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert manager.started_total == 2
        assert manager.types() == {("v1", "ConfigMap"), ("v1", "Secret")}
        for user in range(7):
            manager.release(user)
        assert manager.types() == {("v1", "ConfigMap"), ("v1", "Secret")}  # user 7 remains
        manager.use(7, [("v1", "Secret")])
        assert manager.types() == {("v1", "Secret")}
        manager.release(7)
        assert manager.types() == set()
    finally:
        manager.stop()


@pytest.mark.both_servers
def test_an_own_delete_leaves_the_cache_at_once_and_late_events_do_not_revive_it(
    client: KubernetesClient, ns: str
) -> None:
    """A reconcile right after its own delete must not read the deleted child from the cache:
    the DELETED event that follows is an echo (no trigger), so a stale read would never be
    corrected until the periodic resync."""
    informer = Informer(client, "v1", "ConfigMap", namespace=ns).start()
    recording = RecordingClient(
        client, informers=lambda api, kind: informer if kind == "ConfigMap" else None
    )
    try:
        assert informer.wait_synced(10)
        live = recording.create(_cm(ns, "gone", v="1"))
        recording.delete("v1", "ConfigMap", "gone", namespace=ns,
                         propagation_policy="Background")
        assert informer.cache.get(ns, "gone") is None  # written through, not awaited
        # An event of the object from before the delete, arriving late, does not revive it.
        informer.cache.upsert(live)
        assert informer.cache.get(ns, "gone") is None
        # Its DELETED event clears the tombstone: a new object of that name is cached again.
        informer.cache.remove(live)
        again = client.create(_cm(ns, "gone", v="2"))
        assert wait_until(lambda: informer.cache.get(ns, "gone") is not None)
        assert informer.cache.get(ns, "gone")["metadata"]["uid"] == (  # type: ignore[index]
            again["metadata"]["uid"])
    finally:
        informer.stop()


def test_after_a_life_of_failures_a_410_storm_ends_in_a_prompt_relist() -> None:
    """Server-only hooks (restarts with state, the fault injector), on a server of its own.

    The informer's backoff counts consecutive failures: reconnects during earlier server bounces
    (each recovered from, with events delivered since) must not lengthen the pause between the
    relists a later 410 storm causes. Before the fix they did (the count only started over when a
    watch ended normally, after minutes), so the relist that sees a change made after the storm
    came after the 30 s cap: the reliability suite's parent that stayed unreconciled."""
    with EmbeddedApiServer() as server, server.api_client() as api_client:
        client = KubernetesClient(api_client)
        seen: list[str] = []
        informer = Informer(client, "v1", "ConfigMap", namespace="default")
        informer.add_handler(lambda event, old, new: seen.append(new["metadata"]["name"]))
        informer.start()
        try:
            assert informer.wait_synced(10)
            for bounce in range(3):  # the server goes away for a moment and comes back
                server.stop()
                time.sleep(0.5)
                server.start()
                client.create(_cm("default", f"back-{bounce}"))
                assert wait_until(lambda: f"back-{bounce}" in seen, 60), bounce  # noqa: B023
            reconnects = informer.stats.reconnects
            assert reconnects >= 3
            with server.faults(Faults(watch_gone=True)):
                server.stop()  # faults apply to new watches: end the open one
                server.start()
                # Every watch gets 410: relist, 410, pause, relist, ...
                assert wait_until(lambda: informer.stats.relists_after_gone >= 4, 60)
            client.create(_cm("default", "after"))
            changed = time.monotonic()
            assert wait_until(lambda: "after" in seen, 60)
            waited = time.monotonic() - changed
            # The pause in progress when the storm ends is at most the capped one, jittered.
            assert waited < GONE_PAUSE_CAP * 1.5 + 2.0, (waited, reconnects)
        finally:
            informer.stop()


def test_a_relist_reports_a_foreign_change_hidden_in_an_own_write_through() -> None:
    """Server-only hooks (restarts with state, the fault injector), on a server of its own.

    A foreign edit, then our own write (written through to the cache at once), while every watch
    gets 410: the relist lists our write's version, which the cache already holds. Before the fix
    the relist compared with the cache and said nothing, and the handler's own-echo filter would
    have dropped it anyway, so the foreign edit was never seen (the parent left unreconciled in
    the reliability suite's forced-410 phase). It is now compared with what the stream last
    delivered (its version only), dispatched without an ``old`` (so any handler sees a change),
    and flagged as a relist's event so that the echo filter lets it through."""
    with EmbeddedApiServer() as server, server.api_client() as api_client:
        client = KubernetesClient(api_client)
        informer = Informer(client, "v1", "ConfigMap", namespace="default")
        recording = RecordingClient(
            client, informers=lambda api, kind: informer if kind == "ConfigMap" else None
        )
        changes: list[tuple[str | None, str | None, bool]] = []

        def route(event: str, old: Any, new: Any) -> None:  # as reconciler._driver.routing does
            if recording.is_own_echo(event, new) and not informer.relisting:
                return
            if new["metadata"]["name"] == "x":
                changes.append(((old or {}).get("data", {}).get("v"), new["data"].get("v"),
                                informer.relisting))

        informer.add_handler(route)
        informer.start()
        try:
            assert informer.wait_synced(10)
            recording.create(_cm("default", "x", v="1"))
            assert wait_until(lambda: informer.stats.events >= 1)  # the echo, dropped
            with server.faults(Faults(watch_gone=True)):
                server.stop()  # faults apply to new watches: end the open one
                server.start()
                assert wait_until(lambda: informer.stats.relists_after_gone >= 2, 30)
                client.patch("v1", "ConfigMap", "x", {"data": {"v": "2"}}, patch_type=MERGE,
                             namespace="default")  # foreign
                recording.patch("v1", "ConfigMap", "x", {"metadata": {"labels": {"o": "1"}}},
                                patch_type=MERGE, namespace="default")  # ours, written through
            assert wait_until(lambda: any(new == "2" for _, new, _ in changes), 30), changes
            # No ``old``: the cache's version is our write, which may already carry the change.
            assert changes[0] == (None, "2", True), changes
        finally:
            informer.stop()


class _LateAnswers(ForwardingClient):
    """A client whose patches are applied by the server but answered only when ``gate`` opens
    (as over a congested link; the reliability suite does the same with a proxy)."""

    def __init__(self, inner: KubernetesClient) -> None:
        super().__init__(inner)
        self.gate = threading.Event()
        self.applied = threading.Event()

    def patch(self, api_version: str, kind: str, name: str, patch: Any,
              **kwargs: Any) -> dict[str, Any]:
        result = self.inner.patch(api_version, kind, name, patch, **kwargs)
        self.applied.set()
        assert self.gate.wait(10)
        return result


@pytest.mark.both_servers
def test_an_echo_whose_write_is_unanswered_is_set_aside_without_blocking_the_informer(
    client: KubernetesClient, ns: str
) -> None:
    """Issue 31, finding 1: ``decide_echo`` sets an event of an object with an own write in
    flight aside (decided own when the write returns, foreign after ``echo_wait``), and decides
    other objects' events at once, on the informer's thread."""
    clock = VirtualClock()
    informer = Informer(client, "v1", "ConfigMap", namespace=ns)
    late = _LateAnswers(client)
    recording = RecordingClient(late, informers=lambda api, kind: informer, clock=clock,
                                echo_wait=5.0)
    decided: list[tuple[str, str, bool]] = []

    def route(event: str, old: Any, new: Any) -> None:
        name = new["metadata"]["name"]
        recording.decide_echo(event, new, lambda own: decided.append((name, event, own)))

    informer.add_handler(route)
    informer.start()

    def patch_late(value: str) -> threading.Thread:
        late.gate.clear()
        late.applied.clear()
        thread = threading.Thread(target=recording.patch, args=(
            "v1", "ConfigMap", "x", {"data": {"v": value}}), kwargs={
                "patch_type": MERGE, "namespace": ns})
        thread.start()
        assert late.applied.wait(10)
        return thread

    try:
        assert informer.wait_synced(10)
        recording.create(_cm(ns, "x", v="1"))
        assert wait_until(lambda: decided == [("x", "ADDED", True)]), decided
        writer = patch_late("2")
        assert wait_until(lambda: informer.stats.events >= 2)  # the echo arrived: set aside
        client.create(_cm(ns, "y", v="1"))  # a foreign object's event is decided at once
        assert wait_until(lambda: len(decided) == 2), decided
        assert decided[1] == ("y", "ADDED", False)
        late.gate.set()  # the answer arrives: the echo is our own
        writer.join(10)
        assert wait_until(lambda: len(decided) == 3), decided
        assert decided[2] == ("x", "MODIFIED", True)
        writer = patch_late("3")
        assert wait_until(lambda: informer.stats.events >= 4)
        assert len(decided) == 3
        clock.advance(5.0)  # echo_wait passed without the answer: foreign
        assert wait_until(lambda: len(decided) == 4), decided
        assert decided[3] == ("x", "MODIFIED", False)
        late.gate.set()
        writer.join(10)
    finally:
        late.gate.set()
        informer.stop()
