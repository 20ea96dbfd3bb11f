"""The ours-against-kopf harness: its pure parts always, one tiny end-to-end run when kopf is there.

The end-to-end run (N=2, a handful of drifts) checks the harness's plumbing and the JSON
contract of ``python -m benchmarks.compare --json``, not any figure's size: performance is
judged from the benchmark itself, never from a timed test.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import _fleet as fleet
from benchmarks._kubelet import available_status
from benchmarks.peers.kopf_thanos import children as peer

REPO = Path(__file__).resolve().parents[2]


def _created(index: int) -> dict:
    obj = fleet.parent(index)
    obj["metadata"]["uid"] = f"uid-{index}"
    return obj


def test_every_parent_has_ten_children_owned_by_it() -> None:
    desired = fleet.desired_children([_created(0), _created(1)])
    assert len(desired) == 20
    assert {key[0] for key in desired} == set(fleet.CHILD_KINDS)
    for key, obj in desired.items():
        assert obj is not None
        owners = obj["metadata"]["ownerReferences"]
        assert owners[0]["uid"] in ("uid-0", "uid-1"), key


def test_is_subset_ignores_additions_and_catches_drift() -> None:
    want = next(v for k, v in fleet.desired_children([_created(0)]).items()
                if k[0] == "Deployment")
    live = copy.deepcopy(want)
    live["status"] = {"replicas": 2}
    live["metadata"]["annotations"] = {"anything": "else"}
    live["spec"]["template"]["spec"]["dnsPolicy"] = "ClusterFirst"
    assert fleet.is_subset(want, live)
    live["spec"]["replicas"] = 7
    assert not fleet.is_subset(want, live)
    unlabelled = copy.deepcopy(want)
    del unlabelled["metadata"]["labels"][fleet.DRIFT_LABEL]
    assert not fleet.is_subset(want, unlabelled)


def test_percentiles_and_ratios() -> None:
    assert fleet.percentile([], 99) is None
    assert fleet.percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert fleet.percentile([float(i) for i in range(1, 101)], 99) == 99.0
    assert fleet.median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert fleet.ratio(1.0, 4.0) == 0.25
    assert fleet.ratio(1.0, 0) is None
    assert fleet.verb_delta({"get": 1}, {"get": 5, "list": 2}, {"get": 1}) == {"get": 3, "list": 2}


def test_drift_percentiles_pool_the_samples_of_every_repeat() -> None:
    from benchmarks.compare import summarize

    def run(peer: str, repeat: int, samples: list[float]) -> dict:
        return {"peer": peer, "size": 10, "repeat": repeat,
                "figures": {"converge_cpu_s": 1.0, "drift_samples_ms": samples,
                            "drift_p99_ms": max(samples)}}

    ours = [[float(i) for i in range(1, 51)], [float(i) for i in range(51, 101)]]
    figures = summarize([run("ours", 0, ours[0]), run("ours", 1, ours[1]),
                         run("kopf", 0, [10.0] * 50), run("kopf", 1, [300.0] * 50)])["10"]
    assert figures["ours"]["drift_samples"] == 100
    assert figures["ours"]["drift_p99_ms"] == 99.0  # pooled, not the median of 50 and 100
    assert figures["ours"]["drift_p50_ms"] == 50.0
    assert figures["kopf"]["drift_p99_ms"] == 300.0
    assert figures["ratio"]["drift_p99_ms"] == 0.33
    assert figures["ratio"]["converge_cpu_s"] == 1.0


def test_the_kopf_peer_plans_creates_patches_and_deletes() -> None:
    parent = _created(3)
    built = peer.desired(parent)
    assert [w.verb for w in peer.plan(parent, [])] == ["create"] * 10
    live = [copy.deepcopy(obj) for obj, _ in built.values()]
    assert peer.plan(parent, live) == []
    live[0]["spec"]["replicas"] = 9
    assert [(w.verb, peer.child_key(w.obj)) for w in peer.plan(parent, live)] == [
        ("patch", peer.child_key(live[0]))
    ]
    without_ingress = copy.deepcopy(parent)
    del without_ingress["spec"]["query"]["ingress"]
    deletes = [w for w in peer.plan(without_ingress, live) if w.verb == "delete"]
    assert [peer.child_key(w.obj) for w in deletes] == [("Ingress", "t0003-query")]


@pytest.mark.timeout(120)
def test_compare_runs_both_operators_at_a_tiny_size() -> None:
    if importlib.util.find_spec("kopf") is None:
        pytest.skip("kopf is not installed (pip install -e '.[bench]')")
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.compare", "--sizes", "2", "--drifts", "3",
         "--steady-seconds", "0.5", "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=110, check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["benchmark"] == "compare"
    assert result["cpu_count"] >= 1
    assert result["python"].startswith("3.")
    assert set(result["peers"]) == {"ours", "kopf"}
    figures = result["figures"]["2"]
    for side in ("ours", "kopf"):
        mine = figures[side]
        assert mine["converge_requests"]["create"] >= 20, (side, mine["converge_requests"])
        assert mine["drift_missed"] == 0, side
        assert mine["drift_p99_ms"] >= mine["drift_p95_ms"] >= mine["drift_p50_ms"] > 0
        assert mine["drift_samples"] == 3, side
        assert mine["spec_change_writes"] >= 8, side  # four workloads per parent, two parents
        assert mine["converge_cpu_s"] > 0
        assert mine["peak_rss_mib"] > 10
    assert figures["ratio"]["converge_cpu_s"] == pytest.approx(
        figures["ours"]["converge_cpu_s"] / figures["kopf"]["converge_cpu_s"], abs=1e-3
    )


def test_the_harness_kubelet_makes_a_workload_available_once_per_generation() -> None:
    deployment = {"kind": "Deployment", "metadata": {"name": "q", "generation": 3},
                  "spec": {"replicas": 2}}
    patch = available_status(deployment)
    assert patch is not None
    assert patch["status"]["observedGeneration"] == 3
    assert any(c["type"] == "Available" and c["status"] == "True"
               for c in patch["status"]["conditions"])
    assert available_status({**deployment, **patch}) is None
    assert available_status({**deployment, **patch, "metadata": {"generation": 4}}) is not None
    assert available_status({"kind": "Service", "metadata": {"name": "q"}}) is None
