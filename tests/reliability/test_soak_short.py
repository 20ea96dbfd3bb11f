"""The soak's code stays runnable: a few seconds of it in ``make test`` (``make soak`` runs ten
minutes). Drift lands at a steady rate, repairs are timed, and the run ends converged."""

from __future__ import annotations

from tests.reliability.soak import run_soak


def test_a_short_soak_converges_and_measures() -> None:
    figures = run_soak(seconds=6.0, interval=0.3, sample=2.0, parents=10)
    assert figures["duplicated"] == 0
    assert figures["lost"] == 0
    samples = figures["samples"]
    assert isinstance(samples, list)
    assert len(samples) >= 2
    assert all(row["repair_seconds"] < 30 for row in samples)
