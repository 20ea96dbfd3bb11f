"""reconciler._base.times: Kubernetes Time and MicroTime, formatted and parsed in one place.

Expected strings are those of the real-apiserver recordings (``creationTimestamp`` is a ``Time``)
and of the Kubernetes API conventions (Lease ``renewTime`` is a ``MicroTime``).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler._base.times import (
    format_micro_time,
    format_time,
    now_micro_time,
    now_time,
    parse_time,
)
from reconciler.embedded import _times as embedded_times
from reconciler.testing import VirtualClock
from tests.conftest import load_fixture

EPOCHS = st.floats(min_value=0, max_value=4_102_444_800, allow_nan=False)  # 1970 .. 2100


def test_formats_of_both_types() -> None:
    assert format_time(1_700_000_000.9) == "2023-11-14T22:13:20Z"
    assert format_micro_time(1_700_000_000.25) == "2023-11-14T22:13:20.250000Z"


def test_a_recorded_creation_timestamp_round_trips() -> None:
    stamp = load_fixture("configmap.json")["returned"]["metadata"]["creationTimestamp"]
    epoch = parse_time(stamp)
    assert epoch is not None
    assert format_time(epoch) == stamp


@given(EPOCHS)
def test_time_round_trips_to_the_second(epoch: float) -> None:
    assert parse_time(format_time(epoch)) == int(epoch)


@given(EPOCHS)
def test_micro_time_round_trips_to_the_microsecond(epoch: float) -> None:
    parsed = parse_time(format_micro_time(epoch))
    assert parsed is not None
    assert abs(parsed - epoch) < 1e-6 * 2
    assert format_micro_time(parsed) == format_micro_time(epoch)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2023-11-14T22:13:20Z", 1_700_000_000.0),
        ("2023-11-14T22:13:20.5Z", 1_700_000_000.5),
        ("2023-11-14T22:13:20.123456789Z", 1_700_000_000.123456),  # RFC3339Nano: truncated
        ("2023-11-14T23:13:20+01:00", 1_700_000_000.0),
        ("2023-11-14T21:13:20-01:00", 1_700_000_000.0),
    ],
)
def test_parses_what_kubernetes_writes(text: str, expected: float) -> None:
    assert parse_time(text) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    "value",
    [None, 1_700_000_000, "", "2023-11-14", "2023-11-14T22:13:20", "2023-13-14T22:13:20Z",
     "yesterday", "2023-11-14 22:13:20Z"],
)
def test_anything_else_is_none(value: object) -> None:
    assert parse_time(value) is None


def test_now_reads_the_injected_clock() -> None:
    clock = VirtualClock()
    stamp, micro = now_time(clock), now_micro_time(clock)
    assert parse_time(stamp) == int(clock.time())
    assert parse_time(micro) == pytest.approx(clock.time(), abs=1e-6)
    clock.advance(90.5)
    assert parse_time(now_time(clock)) == int(clock.time())


@given(EPOCHS)
def test_the_embedded_server_writes_and_reads_time_as_the_reconciler_does(epoch: float) -> None:
    """The embedded server keeps its own copy (it may not import the reconciler): both agree."""
    text = embedded_times.format_time(epoch)
    assert text == format_time(epoch)
    parsed = embedded_times.parse_time(text)
    assert parsed is not None
    assert parsed.timestamp() == parse_time(text)
    assert embedded_times.parse_time("yesterday") is None
    assert parse_time(embedded_times.now_timestamp()) is not None
