"""``reconciler.envtest`` without a control plane: finding and unpacking assets, the errors, and
request counting from audit lines (pure)."""

from __future__ import annotations

import json
import lzma
import os
from pathlib import Path

import pytest

from reconciler.envtest import ASSETS_ENV, AssetsNotFoundError, ControlPlaneError, find_assets
from reconciler.envtest._audit import AuditLog, count_events

SCRIPT = b"#!/bin/sh\necho fake\n"


def test_no_directory_names_the_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ASSETS_ENV, raising=False)
    with pytest.raises(AssetsNotFoundError) as caught:
        find_assets()
    assert caught.value.directory is None
    assert "OPTK_KUBE_ASSETS" in str(caught.value)
    assert caught.value.missing == ("kube-apiserver", "kube-controller-manager")
    assert isinstance(caught.value, ControlPlaneError)
    assert isinstance(caught.value, FileNotFoundError)


def test_a_directory_without_binaries_names_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "kube-apiserver").write_bytes(SCRIPT)
    (tmp_path / "kube-apiserver").chmod(0o755)
    with pytest.raises(AssetsNotFoundError) as caught:
        find_assets(tmp_path)
    assert caught.value.directory == tmp_path
    assert caught.value.missing == ("kube-controller-manager",)
    assert "OPTK_KUBE_ASSETS" in str(caught.value)


def test_the_environment_variable_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("kube-apiserver", "kube-controller-manager"):
        (tmp_path / name).write_bytes(SCRIPT)
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv(ASSETS_ENV, str(tmp_path))
    assets = find_assets()
    assert assets.kube_apiserver == tmp_path / "kube-apiserver"
    assert assets.kube_controller_manager == tmp_path / "kube-controller-manager"
    assert os.access(assets.etcd, os.X_OK)
    assert assets.etcd.name == "etcd"


def test_xz_binaries_are_unpacked_once_into_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assets_dir, cache = tmp_path / "assets", tmp_path / "cache"
    assets_dir.mkdir()
    for name in ("kube-apiserver", "kube-controller-manager"):
        (assets_dir / f"{name}.xz").write_bytes(lzma.compress(SCRIPT + name.encode()))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    first = find_assets(assets_dir)
    assert first.kube_apiserver.read_bytes() == SCRIPT + b"kube-apiserver"
    assert first.kube_apiserver.is_relative_to(cache / "operator-toolkit" / "kube-assets")
    assert os.access(first.kube_apiserver, os.X_OK)
    assert len(first.kube_apiserver.parent.name) == 64  # the sha256 of the .xz
    mtime = first.kube_apiserver.stat().st_mtime_ns
    second = find_assets(assets_dir)
    assert second == first
    assert second.kube_apiserver.stat().st_mtime_ns == mtime  # not unpacked again
    leftovers = [p.name for p in first.kube_apiserver.parent.iterdir()]
    assert leftovers == ["kube-apiserver"]  # no temporary file left behind


def _event(audit_id: str, user: str, verb: str, stage: str = "ResponseComplete") -> str:
    return json.dumps({"auditID": audit_id, "user": {"username": user}, "verb": verb,
                       "stage": stage, "requestURI": f"/x/{audit_id}"})


def test_each_request_counts_once_by_user_and_verb() -> None:
    seen: set[str] = set()
    counts, uris = count_events([
        _event("1", "alice", "get"),
        _event("2", "alice", "watch", stage="ResponseStarted"),
        _event("2", "alice", "watch", stage="ResponseComplete"),
        _event("3", "bob", "create"),
        "not json",
    ], seen=seen)
    assert counts == {("alice", "get"): 1, ("alice", "watch"): 1, ("bob", "create"): 1}
    assert uris == ["/x/1", "/x/2", "/x/2", "/x/3"]
    again, _ = count_events([_event("3", "bob", "create")], seen=seen)
    assert not again


def test_the_audit_log_is_read_incrementally_and_filtered(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    log = AuditLog(path)
    assert log.read_new() == []  # not written yet
    with path.open("w") as handle:
        handle.write(_event("1", "alice", "get") + "\n" + _event("2", "bob", "list") + "\n")
        handle.write(_event("3", "system:apiserver", "list")[:10])  # a partial line
    log.read_new()
    with path.open("a") as handle:
        handle.write(_event("3", "system:apiserver", "list")[10:] + "\n")
    assert log.read_new() == ["/x/3"]
    everyone = log.by_verb(users=None, excluded=frozenset({"system:apiserver"}))
    assert everyone["get"] == 1
    assert everyone["list"] == 1
    assert log.by_verb(users=frozenset({"bob"}), excluded=frozenset())["get"] == 0
    log.reset()
    assert sum(log.by_verb(users=None, excluded=frozenset()).values()) == 0
