"""Virtual time: waits end exactly when the clock passes their deadline, never before."""

from __future__ import annotations

import threading

import pytest

from reconciler._base.clocks import Clock, RealClock
from reconciler.testing import VirtualClock


def test_both_clocks_satisfy_the_protocol() -> None:
    assert isinstance(RealClock(), Clock)
    assert isinstance(VirtualClock(), Clock)


def test_virtual_sleep_ends_only_when_time_is_advanced_past_it() -> None:
    clock = VirtualClock()
    woke = threading.Event()

    def sleeper() -> None:
        clock.sleep(3600)
        woke.set()

    thread = threading.Thread(target=sleeper)
    thread.start()
    assert clock.wait_for_waiters(1)
    clock.advance(3599)
    assert not woke.wait(0.1)
    clock.advance(1)
    assert woke.wait(5)
    thread.join()


def test_virtual_wall_time_moves_with_monotonic_time() -> None:
    clock = VirtualClock(start=1000.0)
    clock.advance(36000)
    assert clock.monotonic() == 36000
    assert clock.time() == 37000


def test_virtual_time_never_goes_backwards() -> None:
    with pytest.raises(ValueError, match="backwards"):
        VirtualClock().advance(-1)
