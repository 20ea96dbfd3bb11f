"""The ours-against-Go harness (``benchmarks.vs_go``): its pure parts always, and one tiny run of
both operators on the real control plane when the Go peer and the control plane's binaries are
there (else skipped in one line). The run checks the plumbing and the JSON contract, not any
figure's size: performance is judged from the benchmark itself, never from a timed test.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import _fleet as fleet
from benchmarks import vs_go
from benchmarks.peers.client_go import operator as foo_operator

REPO = Path(__file__).resolve().parents[2]


def _deployment_of(foo: dict) -> dict:
    """The Foo's Deployment as the toolkit's peer builds it."""
    foo = copy.deepcopy(foo)
    foo["metadata"]["uid"] = "uid-1"
    (builder,) = foo_operator.build(foo)
    obj, state = builder()
    assert not state.is_absent
    return dict(obj)


def test_the_toolkit_peer_builds_what_the_go_controller_builds() -> None:
    foo = vs_go.foo_object(7, replicas=3)
    built = _deployment_of(foo)
    want = vs_go.desired([foo])[("Deployment", vs_go.NAMESPACE, "foo-0007-nginx")]
    assert fleet.is_subset(want, built)
    assert built["spec"]["selector"]["matchLabels"] == {"app": "nginx", "controller": "foo-0007"}
    drifted = copy.deepcopy(built)
    drifted["spec"]["template"]["spec"]["containers"][0]["image"] = vs_go.DRIFTED_IMAGE
    assert not fleet.is_subset(want, drifted)
    assert foo_operator.status(foo, [{"kind": "Deployment",
                                      "status": {"availableReplicas": 2}}]) == {
        "availableReplicas": 2}


def test_summary_medians_ranges_pooled_drifts_and_ratios() -> None:
    def run(peer: str, round_: int, wall: float, samples: list[float]) -> dict:
        return {"peer": peer, "size": 10, "round": round_,
                "figures": {"converge_wall_s": wall, "drift_samples_ms": samples}}

    figures = vs_go.summarize([
        run("ours", 0, 1.0, [1.0, 2.0]), run("ours", 1, 3.0, [3.0, 4.0]),
        run("go", 0, 2.0, [10.0]), run("go", 1, 2.0, [20.0]),
        {"peer": "go", "size": 10, "round": 2, "error": "failed"},
    ])["10"]
    assert figures["ours"]["converge_wall_s"] == 2.0
    assert figures["ours"]["converge_wall_s_range"] == [1.0, 3.0]
    assert figures["ours"]["drift_samples"] == 4
    assert figures["ours"]["drift_p99_ms"] == 4.0
    assert figures["go"]["drift_p50_ms"] == 10.0
    assert figures["ratio"]["converge_wall_s"] == 1.0
    assert "| converge: wall (s) | 1-3 | 2 | 1.0x |" in vs_go.table({"10": figures})


@pytest.mark.timeout(240)
def test_vs_go_runs_both_operators_on_the_real_control_plane() -> None:
    reason = vs_go.missing_assets("real")
    if reason:
        pytest.skip(reason)
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.vs_go", "--sizes", "3", "--rounds", "1",
         "--drifts", "2", "--steady-seconds", "0.5", "--image-timeout", "2", "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=230, check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["benchmark"] == "vs_go"
    figures = result["figures"]["3"]
    for side in ("ours", "go"):
        mine = figures[side]
        assert mine["converge_requests"]["create"] >= 3, (side, mine["converge_requests"])
        assert mine["drift_missed"] == 0, side
        assert mine["drift_samples"] == 2, side
        assert mine["spec_change_requests"] >= 3, side  # one Deployment write per Foo
        assert mine["peak_rss_mib"] > 5
        assert mine["image_drifted"] == 3
    assert figures["ours"]["image_repaired"] == 3  # the toolkit repairs what Go ignores
    assert figures["go"]["image_repaired"] == 0
    assert figures["ratio"]["converge_requests_total"] == pytest.approx(
        figures["ours"]["converge_requests_total"] / figures["go"]["converge_requests_total"],
        abs=1e-3)
