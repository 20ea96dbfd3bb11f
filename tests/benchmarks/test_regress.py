"""``benchmarks.regress``: the figures of two trees compared, pure and as processes.

The end-to-end test builds a small git repository whose ``benchmarks/tiny.py`` prints a JSON
line, commits one version, changes the working tree, and compares the two: the ratio, the
spread and the verdict come from real runs of both trees, alternating."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import regress


def test_flatten_keeps_numeric_leaves_by_dotted_path() -> None:
    figures = regress.flatten({
        "drift_repair_ms": {"watch": {"p50": 6.4, "p99": 140}},
        "ok": True, "name": "x", "python": "3.11", "cpus": 2, "runs": [1, {"a": 2}],
    })
    assert figures == {"drift_repair_ms.watch.p50": 6.4, "drift_repair_ms.watch.p99": 140.0,
                       "runs.0": 1.0, "runs.1.a": 2.0}


def test_compare_flags_a_consistent_change_and_not_noise() -> None:
    base = [{"p99": 14.0, "noisy": 10.0, "zero": 0.0}, {"p99": 12.0, "noisy": 10.0, "zero": 0.0},
            {"p99": 16.0, "noisy": 10.0, "zero": 0.0}]
    work = [{"p99": 140.0, "noisy": 20.0, "zero": 1.0}, {"p99": 151.0, "noisy": 5.0, "zero": 0.0},
            {"p99": 145.0, "noisy": 15.0, "zero": 0.0}]
    result = regress.compare(base, work)
    assert result["p99"]["verdict"] == "changed"
    assert result["p99"]["ratio"] == pytest.approx(145.0 / 14.0)
    assert result["p99"]["ratio_min"] == pytest.approx(145.0 / 16.0)
    assert result["p99"]["ratio_max"] == pytest.approx(151.0 / 12.0)
    # the median moved by 1.5x, but the pairs disagree on the side of 1: noise, not a change
    assert result["noisy"]["verdict"] == "same"
    assert result["zero"]["ratio"] is None
    assert result["zero"]["verdict"] == "same"


TINY = '''
import json, sys
print("some text first")
print(json.dumps({"latency_ms": {"p99": VALUE}, "requests": 7, "python": "x", "cpus": 1}))
'''


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_two_trees_run_alternating_and_compared(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "benchmarks").mkdir(parents=True)
    (root / "benchmarks" / "__init__.py").write_text("")
    (root / "benchmarks" / "tiny.py").write_text(TINY.replace("VALUE", "10"))
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "v1")
    (root / "benchmarks" / "tiny.py").write_text(TINY.replace("VALUE", "30"))

    report = regress.run("HEAD", ["tiny", "absent"], rounds=3, arguments={}, timeout=60,
                         root=root, progress=False)
    tiny = report["benchmarks"]["tiny"]
    assert "error" not in tiny
    assert tiny["figures"]["latency_ms.p99"]["ratio"] == pytest.approx(3.0)
    assert tiny["figures"]["latency_ms.p99"]["verdict"] == "changed"
    assert tiny["figures"]["latency_ms.p99"]["rounds"] == 3
    assert tiny["figures"]["requests"]["verdict"] == "same"
    assert "python" not in tiny["figures"]
    assert "does not exist at HEAD" in report["benchmarks"]["absent"]["error"]
    # the temporary worktree is gone again
    listed = subprocess.run(["git", "-C", str(root), "worktree", "list"], check=True,
                            capture_output=True, text=True).stdout
    assert len(listed.strip().splitlines()) == 1
    text = regress.table(report)
    for shown in ("latency_ms.p99", "3.00x", "changed"):
        assert shown in text


def test_the_command_refuses_fewer_than_three_rounds() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.regress", "--against", "HEAD",
                           "--rounds", "2"], capture_output=True, text=True, check=False,
                          cwd=Path(regress.__file__).resolve().parent.parent)
    assert done.returncode == 2
    assert "at least 3" in done.stderr
    json.dumps(regress.BENCHMARKS)  # the defaults are plain data
