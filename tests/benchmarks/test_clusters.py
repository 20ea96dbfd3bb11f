"""``benchmarks.clusters`` runs: subprocess API servers (home and two workload clusters), the
operator placing children in each. Figures are checked for shape and sense, never for speed;
the one behaviour asserted is the issue's: an idle, converged operator sends no request to any
cluster."""

from __future__ import annotations

from benchmarks import clusters


def test_two_sizes_converge_and_sit_still() -> None:
    figures = clusters.run(3, [1, 2], steady=1.0, drifts=1, drift_timeout=2.0)
    runs = {run["clusters"]: run for run in figures["runs"]}
    assert set(runs) == {1, 2}
    for k, run in runs.items():
        assert run["remote_children"] == 3 * k * 2
        assert run["converge_cpu_s"] > 0
        assert run["steady_requests"] == {"home": 0, "remote": 0}
        assert run["remote_drifts_repaired"] == "1/1"  # from the remote watch
    assert "cpu_s_per_cluster" in figures
    assert "rss_mib_per_cluster" in figures
