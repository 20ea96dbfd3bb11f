"""``optk run FILE.py[:ATTR]`` loads an operator from a file, as ``kopf run`` does: a lone file
by its own name, a file inside a package by its dotted name (the other commands:
``tests/reconciler/test_operator_targets.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from reconciler._commands.loading import load_operator, load_operator_file
from reconciler._driver.operators import Operator

ROOT = Path(__file__).resolve().parents[2]

_HANDLERS = '''
from reconciler import Operator
from tests.driver.sample_operator import API_VERSION, THING_CRD, build
from helper_{n} import NAME

{assignments}
'''


def _write(folder: Path, n: int, assignments: str) -> Path:
    (folder / f"helper_{n}.py").write_text("NAME = 'from-file'\n")
    path = folder / f"handlers_{n}.py"
    path.write_text(textwrap.dedent(_HANDLERS.format(n=n, assignments=assignments)))
    return path


def _op(name: str) -> str:
    return (f"{name} = Operator(api_version=API_VERSION, kind='Thing', build=build, name=NAME,"
            " install=[THING_CRD])\n")


def test_a_file_is_loaded_by_path_with_its_one_operator_or_the_named_one(
    tmp_path: Path
) -> None:
    one = _write(tmp_path, 1, _op("my_operator"))
    loaded = load_operator(str(one))
    assert isinstance(loaded, Operator)
    assert loaded.name == "from-file"  # its neighbour module was importable
    two = _write(tmp_path, 2, _op("first") + _op("second"))
    with pytest.raises(ValueError, match=r"defines 2 Operator objects \(first, second\)"):
        load_operator_file(str(two))
    assert load_operator_file(f"{two}:second") is not None
    with pytest.raises(ValueError, match="is not an Operator"):
        load_operator_file(f"{two}:NAME")
    with pytest.raises(ValueError, match="does not exist"):
        load_operator_file(str(tmp_path / "missing.py"))
    assert load_operator_file("tests.driver.sample_operator:operator") is None


def started(target: str, *, cwd: Path, env: dict[str, str]) -> list[str]:
    """The stderr lines of ``python -m reconciler run TARGET --embedded`` in ``cwd`` until the
    operator started; then SIGTERM, which must end it with exit code 0."""
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "run", target, "--embedded"],
        cwd=cwd, env=env, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    seen: list[str] = []
    try:
        for raw in process.stderr:
            seen.append(raw)
            if "started (identity" in raw or len(seen) > 500:
                break
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0, "".join(seen)[-2000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return seen


def test_optk_run_handlers_py_from_its_directory(tmp_path: Path) -> None:
    _write(tmp_path, 3, _op("operator"))
    seen = started("handlers_3.py", cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert any("operator from-file started" in line for line in seen), "".join(seen)[-2000:]


def test_optk_run_the_example_file_by_a_relative_path_from_elsewhere() -> None:
    """``optk run ./<repo>/examples/thanos/operator.py`` from the repository's parent directory,
    with no ``PYTHONPATH``: the file is ``examples.thanos.operator``, its package imports work."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    seen = started(f"./{os.path.relpath(ROOT / 'examples/thanos/operator.py', ROOT.parent)}",
                   cwd=ROOT.parent, env=env)
    assert any("operator thanos-operator started" in line for line in seen), "".join(seen)
