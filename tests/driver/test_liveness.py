"""``/healthz`` (issue 23, 3): what counts as an informer's progress, a dead loop thread, the
503 answer. The stalled informer on the real control plane is in
``tests/manifests/test_pod_real.py``."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request

import attrs
import pytest

from reconciler._base.metrics import HealthServer, OperatorMetrics
from reconciler._cache.informers import InformerStats
from reconciler._driver.liveness import ProgressWatch, liveness_bound
from reconciler.testing import VirtualClock


@attrs.define
class Stub:
    """What the check reads of an informer."""

    kind: str = "Widget"
    stats: InformerStats = attrs.Factory(InformerStats)
    resource_version: str = "1"
    list_refused: Exception | None = None


def _watch(*informers: Stub, loops: tuple[threading.Thread, ...] = (),
           stopping: bool = False) -> tuple[ProgressWatch, VirtualClock]:
    clock = VirtualClock()
    return ProgressWatch(informers=lambda: informers, loops=lambda: loops,
                         stopping=lambda: stopping, bound=30.0, clock=clock), clock


def test_the_bound_is_well_above_the_watch_timeout() -> None:
    assert liveness_bound(300) == 900.0
    assert liveness_bound(2, 6) == 6.0
    with pytest.raises(ValueError, match="above twice the watch timeout"):
        liveness_bound(300, 600)


@pytest.mark.parametrize("progress", [
    pytest.param(lambda s: setattr(s.stats, "events", s.stats.events + 1), id="event"),
    pytest.param(lambda s: setattr(s, "resource_version", s.resource_version + "0"),
                 id="bookmark"),
    pytest.param(lambda s: setattr(s.stats, "lists", s.stats.lists + 1), id="list"),
    pytest.param(lambda s: setattr(s.stats, "watches", s.stats.watches + 1),
                 id="a watch ended normally and the next started"),
])
def test_any_progress_within_the_bound_keeps_it_live(progress: object) -> None:
    informer = Stub()
    informer.stats.watches = 1
    watch, clock = _watch(informer)
    for _ in range(5):
        assert watch.failing() == ""
        clock.advance(20)
        progress(informer)  # type: ignore[operator]
    assert watch.failing() == ""
    clock.advance(31)
    assert watch.failing() == ("no progress of the informers of Widget (31s) for longer than "
                               "30s")


def test_failing_watches_and_lists_are_no_progress() -> None:
    informer = Stub()
    informer.stats.watches = 1
    watch, clock = _watch(informer)
    assert watch.failing() == ""
    for _ in range(3):  # a watch fails (a reconnect), the next one starts, hangs, fails...
        clock.advance(10)
        informer.stats.reconnects += 1
        assert watch.failing() == ""
        informer.stats.watches += 1
        assert watch.failing() == ""
        informer.stats.reconnects += 1  # ... and a list fails
    clock.advance(10)
    assert watch.failing().startswith("no progress of the informers of Widget (40s)")


def test_a_refused_kind_and_a_stopping_runtime_are_live() -> None:
    refused = Stub(list_refused=PermissionError("403"))
    watch, clock = _watch(refused)
    assert watch.failing() == ""
    clock.advance(100)
    assert watch.failing() == ""  # a restart grants no rule: readiness says degraded
    stopping, clock = _watch(Stub(), stopping=True)
    clock.advance(100)
    assert stopping.failing() == ""


def test_a_loop_thread_that_ended_fails_it() -> None:
    ended = threading.Thread(target=lambda: None, name="optk-worker-0")
    ended.start()
    ended.join()
    watch, _ = _watch(Stub(), loops=(threading.current_thread(), ended))
    assert watch.failing() == "thread optk-worker-0 ended"


def test_healthz_answers_503_with_the_reason() -> None:
    class Failing:
        why = ""

        def failing(self) -> str:
            return self.why

    check = Failing()
    with HealthServer(OperatorMetrics("x"), ready=lambda: True, liveness=check) as server:
        with urllib.request.urlopen(f"{server.url}/healthz", timeout=5) as reply:
            assert (reply.status, reply.read()) == (200, b"ok")
        check.why = "thread optk-resync ended"
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(f"{server.url}/healthz", timeout=5)
        assert (error.value.code, error.value.read()) == (503, b"thread optk-resync ended")
