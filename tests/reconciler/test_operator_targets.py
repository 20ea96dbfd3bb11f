"""Every ``optk`` command that names an operator takes ``MODULE[:ATTR]`` and ``FILE.py[:ATTR]``
through one loader (issue 23).

A file inside a package is imported as pytest's ``prepend`` mode imports it (the package root
first on ``sys.path``, the dotted name), so the example's own files work from any directory; a
lone file keeps loading as a module named after it. ``optk manifests`` resolves a relative
``samples`` path against the module's file, not the current directory. Each failure is one line
and exit code 2.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler import KubernetesClient
from reconciler._commands.loading import load_target

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "thanos" / "operator.py"
DEPLOY = ROOT / "examples" / "thanos" / "deploy" / "operator.yaml"

_LONE = '''
from reconciler import Operator

def build(parent):
    return []

operator = Operator(api_version="example.com/v1", kind="Lone", build=build, name="lone")
samples = "sample.yaml"
'''
_SAMPLE = {"apiVersion": "example.com/v1", "kind": "Lone",
           "metadata": {"name": "a", "namespace": "default"}, "spec": {}}


def _optk(args: Sequence[str], *, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m reconciler ARGS`` in ``cwd``, with no ``PYTHONPATH``: the repository root is
    not importable unless the loader finds it."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-m", "reconciler", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def _one_line(result: subprocess.CompletedProcess[str], prefix: str) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(prefix), result.stderr
    return lines[0]


@pytest.fixture
def lone(tmp_path: Path) -> Path:
    """A lone operator file with ``samples = "sample.yaml"`` beside it, in its own folder."""
    folder = tmp_path / "lone"
    folder.mkdir()
    (folder / "sample.yaml").write_text(yaml.safe_dump(_SAMPLE))
    path = folder / "op.py"
    path.write_text(_LONE)
    return path


def test_manifests_of_the_example_file_from_elsewhere_is_the_checked_in_stream(
    tmp_path: Path,
) -> None:
    """The file is imported as ``examples.thanos.operator`` (its absolute package imports work),
    its ``samples`` are found beside it, and the Deployment runs the dotted target."""
    result = _optk(["manifests", str(EXAMPLE), "--image", "optk-thanos:latest"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == DEPLOY.read_text()


def test_plan_of_the_example_file_against_the_embedded_server(
    kube_api: Any, kube_namespace: str, tmp_path: Path,
) -> None:
    parents = [dict(doc, metadata={**doc["metadata"], "namespace": kube_namespace})
               for doc in yaml.safe_load_all((EXAMPLE.parent / "samples.yaml").read_text())
               if doc]
    parent_file = tmp_path / "parents.yaml"
    parent_file.write_text(yaml.safe_dump_all(parents))
    KubernetesClient(kube_api.api_client()).create({  # the store gateway's declared input
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "thanos-objstore", "namespace": kube_namespace},
        "stringData": {"objstore.yml": "type: FILESYSTEM"}})
    result = _optk(["plan", f"{EXAMPLE}:operator", "-f", str(parent_file),
                    "--kubeconfig", str(kube_api.kubeconfig_path)], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"create    Deployment.apps/v1 {kube_namespace}/" in result.stdout, result.stdout


def test_a_lone_files_samples_are_found_beside_it_from_any_directory(
    lone: Path, tmp_path: Path,
) -> None:
    for cwd, target in ((lone.parent, "op.py"), (tmp_path, "lone/op.py"), (ROOT, str(lone))):
        result = _optk(["manifests", target], cwd=cwd)
        assert result.returncode == 0, result.stderr
        # the header's comment lines wrap where the path makes them: read them as one text
        header = " ".join(line.removeprefix("#").strip() for line in result.stdout.splitlines()
                          if line.startswith("#"))
        assert "from 1 sample and 0" in header, header
        assert f"- {target}:operator" in result.stdout  # the Deployment runs the file as named


def test_samples_given_on_the_command_line_stay_relative_to_the_current_directory(
    lone: Path, tmp_path: Path,
) -> None:
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump_all([_SAMPLE, {**_SAMPLE, "metadata": {
        "name": "b", "namespace": "default"}}]))
    result = _optk(["manifests", str(lone), "--samples", "mine.yaml"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "from 2 sample" in result.stdout


def test_every_command_refuses_a_bad_file_target_in_one_line(lone: Path, tmp_path: Path) -> None:
    (lone.parent / "sample.yaml").write_text("a: [unclosed\n")
    kubeconfig = str(tmp_path / "none")
    for command, extra in (("manifests", []), ("uninstall", ["--kubeconfig", kubeconfig]),
                           ("plan", ["-f", "x.yaml", "--kubeconfig", kubeconfig]),
                           ("run", ["--kubeconfig", kubeconfig])):
        missing = _one_line(_optk([command, "nowhere/op.py", *extra], cwd=tmp_path),
                            f"optk {command}: ")
        assert "operator file 'nowhere/op.py' does not exist" in missing
        wrong = _one_line(_optk([command, f"{lone}:nope", *extra], cwd=tmp_path),
                          f"optk {command}: ")
        assert "has no attribute 'nope' (the module's Operator objects: operator)" in wrong
    broken = _one_line(_optk(["manifests", str(lone)], cwd=tmp_path), "optk manifests: ")
    assert "sample.yaml' is not YAML" in broken


@pytest.fixture
def package(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A fresh package ``<root>/pkg_<id>/ops/handlers.py`` whose handlers import their package
    both relatively and absolutely; its modules are forgotten afterwards."""
    name = f"pkg_{uuid.uuid4().hex[:8]}"
    ops = tmp_path / "root" / name / "ops"
    ops.mkdir(parents=True)
    (ops.parent / "__init__.py").write_text("")
    (ops.parent / "names.py").write_text("NAME = 'packaged'\n")
    (ops / "__init__.py").write_text("")
    (ops / "kinds.py").write_text("KIND = 'Packaged'\n")
    (ops / "handlers.py").write_text(textwrap.dedent(f'''
        from reconciler import Operator
        from {name}.names import NAME
        from .kinds import KIND

        def build(parent):
            return []

        first = Operator(api_version="example.com/v1", kind=KIND, build=build, name=NAME)
        second = Operator(api_version="example.com/v1", kind=KIND, build=build, name="two")
    '''))
    path = list(sys.path)
    yield ops / "handlers.py", name
    sys.path[:] = path
    for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        del sys.modules[module]


def test_a_file_in_a_package_is_imported_by_its_dotted_name_from_its_root(
    package: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    path, name = package
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"defines 2 Operator objects \(first, second\)"):
        load_target(str(path))
    loaded = load_target(f"{path}:first")
    assert (loaded.operator.name, loaded.operator.kind) == ("packaged", "Packaged")
    assert loaded.module.__name__ == f"{name}.ops.handlers"
    assert loaded.target == f"{name}.ops.handlers:first"
    assert str(tmp_path / "root") in sys.path
    assert load_target(f"{name}.ops.handlers:second").module is loaded.module  # the same module
    assert loaded.beside("x.yaml") == str(path.parent / "x.yaml")


def test_a_package_file_whose_name_is_taken_by_another_file_is_refused(tmp_path: Path) -> None:
    import examples.thanos.operator  # noqa: F401  (the repository's, already imported)

    copy = tmp_path / "examples" / "thanos"
    copy.mkdir(parents=True)
    for folder in (copy, copy.parent):
        (folder / "__init__.py").write_text("")
    (copy / "operator.py").write_text(EXAMPLE.read_text())
    with pytest.raises(ValueError, match=r"'examples.thanos.operator' is already imported from"):
        load_target(str(copy / "operator.py"))
