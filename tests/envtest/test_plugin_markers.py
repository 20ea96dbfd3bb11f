"""The plugin's assets line and ``needs_controller_manager`` marker, in a pytest run of its own.

The inner run's tests stand in for the real ones: a local ``kube_api`` fixture replaces the
servers (the marker's rule looks only at fixture names and parameters), and the assets are fake
executables, since deciding whether kube-controller-manager is there starts nothing. Three
cases: setup-envtest's folder (the real runs of marked tests skip in one line, the rest run),
a folder with kube-controller-manager (nothing skips), and no assets at all (the skip line names
both variables and docs/envtest.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

INNER = textwrap.dedent('''
    import pytest

    @pytest.fixture(scope="session")
    def kube_api(request):
        return getattr(request, "param", "embedded")

    @pytest.mark.both_servers
    @pytest.mark.needs_controller_manager
    def test_both(kube_api):
        assert kube_api == "embedded", "the real run must not run without kube-controller-manager"

    @pytest.mark.needs_controller_manager
    def test_own_plane(kube_assets):
        raise AssertionError("must not run without kube-controller-manager")

    @pytest.mark.needs_controller_manager
    def test_embedded_only(kube_api):
        assert kube_api == "embedded"

    @pytest.mark.needs_controller_manager
    def test_reaches_real_its_own_way():
        raise AssertionError("must not run without kube-controller-manager")

    def test_unmarked(kube_assets):
        assert kube_assets.is_dir()
''')


def _run(tmp_path: Path, **variables: str) -> str:
    (tmp_path / "test_inner.py").write_text(INNER)
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPTK_KUBE_ASSETS", "KUBEBUILDER_ASSETS")}
    env.update(variables)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-ra", "-p", "no:cacheprovider", "test_inner.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    return result.stdout + result.stderr


def _folder(path: Path, *names: str) -> Path:
    path.mkdir(parents=True)
    for name in names:
        (path / name).write_text("#!/bin/sh\nexit 0\n")
        (path / name).chmod(0o755)
    return path


@pytest.fixture
def inner(tmp_path: Path) -> Path:
    """The inner run's directory, away from any ``../shared/kube-assets``."""
    path = tmp_path / "project"
    path.mkdir()
    return path


def test_without_controller_manager_marked_real_runs_skip_in_one_line(
    inner: Path, tmp_path: Path
) -> None:
    folder = _folder(tmp_path / "k8s" / "1.25.0-linux-amd64", "etcd", "kube-apiserver", "kubectl")
    output = _run(inner, KUBEBUILDER_ASSETS=str(folder))
    assert (f"kube assets: {folder} (KUBEBUILDER_ASSETS); no kube-controller-manager: "
            "needs_controller_manager tests skip on real") in output
    assert "3 passed, 3 skipped" in output, output
    skipped = [line for line in output.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 1, output
    assert skipped[0].startswith("SKIPPED [3] ")
    assert (f"no kube-controller-manager in {folder} (KUBEBUILDER_ASSETS)") in skipped[0]
    assert "docs/envtest.md" in skipped[0]


def test_with_controller_manager_nothing_skips(inner: Path, tmp_path: Path) -> None:
    folder = _folder(tmp_path / "assets", "kube-apiserver", "kube-controller-manager")
    output = _run(inner, OPTK_KUBE_ASSETS=str(folder))
    assert f"kube assets: {folder} (OPTK_KUBE_ASSETS)\n" in output
    # the three real stand-ins run now (and fail, which shows they ran): nothing was skipped
    assert "3 failed, 3 passed" in output, output
    assert "SKIPPED" not in output


def test_without_assets_the_skip_line_names_both_variables(inner: Path) -> None:
    output = _run(inner)
    assert "kube assets: none found; set OPTK_KUBE_ASSETS or KUBEBUILDER_ASSETS" in output
    skipped = [line for line in output.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 1, output
    for name in ("OPTK_KUBE_ASSETS", "KUBEBUILDER_ASSETS", "docs/envtest.md"):
        assert name in skipped[0]
