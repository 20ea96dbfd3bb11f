"""Kubeconfig problems give one line naming the path or URL and exit 2 in every subcommand that
connects (``optk run``, ``optk plan``), never a traceback (reconciler._client.connect)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_NO_CONTEXT = "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n"
_DEAD = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:9"}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
users:
- name: u
  user: {token: x}
"""
_THING = """apiVersion: drivertest.optk.dev/v1
kind: Thing
metadata: {name: a, namespace: default}
spec: {value: "1"}
"""


@pytest.mark.parametrize("command", ["run", "plan"])
@pytest.mark.parametrize(("case", "named"), [
    ("missing", "missing.yaml does not exist"),
    ("no-context", "no-context.yaml is not usable"),
    ("unreachable", "cannot reach the Kubernetes API server at https://127.0.0.1:9"),
])
def test_a_kubeconfig_problem_is_one_line_and_exit_2(
    tmp_path: Path, command: str, case: str, named: str
) -> None:
    (tmp_path / "no-context.yaml").write_text(_NO_CONTEXT)
    (tmp_path / "unreachable.yaml").write_text(_DEAD)
    (tmp_path / "thing.yaml").write_text(_THING)
    args = [sys.executable, "-m", "reconciler", command, "tests.driver.sample_operator",
            "--kubeconfig", str(tmp_path / f"{case}.yaml")]
    if command == "plan":
        args += ["-f", str(tmp_path / "thing.yaml")]
    result = subprocess.run(args, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith(f"optk {command}:")]
    assert len(errors) == 1, result.stderr
    assert named in errors[0]


def test_uninstall_names_a_missing_kubeconfig_and_exits_2(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "config"
    result = subprocess.run(
        [sys.executable, "-m", "reconciler", "uninstall", "tests.driver.sample_operator",
         "--kubeconfig", str(missing)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=60)
    assert result.returncode == 2
    assert str(missing) in result.stderr
    assert "Traceback" not in result.stderr
