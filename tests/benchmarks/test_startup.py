"""``benchmarks.startup`` runs: real interpreters, the embedded server, ``optk run`` to its first
watch. Figures are checked for shape and sense, never for speed (benchmarks, not timed tests)."""

from __future__ import annotations

import pytest

from benchmarks import startup


def test_the_figures_of_one_tree_in_both_bytecode_modes() -> None:
    figures = startup.run(runs=1, only=("imports", "to_watching"), progress=False)
    assert "base" not in figures
    assert "ratio" not in figures
    for mode in startup.MODES:
        for name in ("imports", "to_watching"):
            summary = figures["work"][mode][name]
            assert summary["runs"] == 1
            assert 0 < summary["cpu_s_min"] <= summary["cpu_s"] <= summary["cpu_s_max"]
            assert summary["peak_rss_mib"] > 5  # an interpreter's own pages, read from /proc
        # optk run to its first watch does more than importing the three packages
        assert figures["work"][mode]["to_watching"]["cpu_s"] > figures["work"][mode][
            "imports"]["cpu_s"]
        assert set(figures["goals"][mode]) == {"imports", "to_watching"}
    text = startup.report(figures)
    assert "goal to_watching: <= 0.35 s CPU" in text
    assert "bytecode source:" in text


def test_the_command_refuses_fewer_than_seven_runs() -> None:
    with pytest.raises(SystemExit) as exit_:
        startup.main(["--runs", "3"])
    assert exit_.value.code == 2
