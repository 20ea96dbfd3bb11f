"""``optk apiserver --kubeconfig PATH`` never destroys what PATH held: it adds one context to an
existing kubeconfig and removes exactly that at shutdown, creates (0600) and deletes a file that
was not there, and refuses a file that is not a kubeconfig."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import kubernetes.client
import kubernetes.config
import yaml

from reconciler.embedded._kubeconfig import KubeconfigEntry, add_entry, remove_entry

THEIRS = """\
apiVersion: v1
kind: Config
clusters:
- name: production
  cluster:
    server: https://prod.example:6443
    certificate-authority-data: Zm9v
users:
- name: admin
  user:
    token: secret-production-token   # a comment kept byte for byte
contexts:
- name: production
  context:
    cluster: production
    user: admin
current-context: production
preferences: {}
"""


def _start(path: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "apiserver", "--kubeconfig", str(path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    assert "listening on https://127.0.0.1:" in first, process.stderr and process.stderr.read()
    return process, first.rsplit(":", 1)[1].strip()


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=15)
    assert process.returncode == 0


def test_existing_kubeconfig_gets_a_context_and_gets_it_back(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(THEIRS)
    os.chmod(path, 0o640)
    process, port = _start(path)
    try:
        config = yaml.safe_load(path.read_text())
        name = f"optk-embedded-{port}"
        assert config["current-context"] == name  # switched to it, as kind does
        assert [c["name"] for c in config["contexts"]] == ["production", name]
        assert config["users"][0] == {"name": "admin",
                                      "user": {"token": "secret-production-token"}}
        assert config["clusters"][0]["cluster"]["server"] == "https://prod.example:6443"
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
        with kubernetes.config.new_client_from_config(str(path)) as client:
            names = [n.metadata.name for n in
                     kubernetes.client.CoreV1Api(client).list_namespace().items]
        assert "default" in names
    finally:
        _stop(process)
    assert path.read_text() == THEIRS  # byte for byte, comment included
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


def test_changes_made_meanwhile_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(THEIRS)
    process, port = _start(path)
    try:
        config = yaml.safe_load(path.read_text())
        config["contexts"].append({"name": "staging", "context": {
            "cluster": "production", "user": "admin", "namespace": "staging"}})
        path.write_text(yaml.safe_dump(config, sort_keys=False))  # as kubectl config would
    finally:
        _stop(process)
    config = yaml.safe_load(path.read_text())
    assert [c["name"] for c in config["contexts"]] == ["production", "staging"]
    assert [c["name"] for c in config["clusters"]] == ["production"]
    assert [u["name"] for u in config["users"]] == ["admin"]
    assert config["current-context"] == "production"  # restored
    assert f"optk-embedded-{port}" not in path.read_text()


def test_a_new_kubeconfig_is_private_and_removed(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "config"
    process, port = _start(path)
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert yaml.safe_load(path.read_text())["current-context"] == f"optk-embedded-{port}"
    finally:
        _stop(process)
    assert not path.exists()


def test_a_file_that_is_not_a_kubeconfig_is_refused(tmp_path: Path) -> None:
    for text in ("just: [unbalanced\n", "- a list\n", "kind: Pod\napiVersion: v1\n",
                 "clusters: 3\n"):
        path = tmp_path / "config"
        path.write_text(text)
        result = subprocess.run(
            [sys.executable, "-m", "reconciler", "apiserver", "--kubeconfig", str(path)],
            capture_output=True, text=True, timeout=30,
        )
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert str(path) in lines[0]
        assert "not a valid kubeconfig" in lines[0]
        assert path.read_text() == text


def test_add_and_remove_entry_without_switching_context(tmp_path: Path) -> None:
    entry = KubeconfigEntry(name="optk-embedded-1234", server="https://127.0.0.1:1234",
                            ca_data="Y2E=", token="t")
    path = tmp_path / "config"
    added, previous = add_entry(THEIRS, entry, path=path, set_current=False)
    assert previous == "production"
    config = yaml.safe_load(added)
    assert config["current-context"] == "production"
    assert config["contexts"][-1]["context"] == {
        "cluster": entry.name, "user": entry.name, "namespace": "default"}
    # a file without a current context gets ours, and loses it again on removal
    bare = THEIRS.replace("current-context: production\n", "")
    added, previous = add_entry(bare, entry, path=path, set_current=False)
    assert previous is None
    assert yaml.safe_load(added)["current-context"] == entry.name
    assert "current-context" not in yaml.safe_load(
        remove_entry(added, entry, path=path, previous_current=None))
    # adding twice (a leftover of a killed run) keeps one entry
    twice, _ = add_entry(add_entry(THEIRS, entry, path=path)[0], entry, path=path)
    assert [c["name"] for c in yaml.safe_load(twice)["contexts"]] == ["production", entry.name]
