"""``optk new NAME [--dir PATH]``: an operator project of one's own, whose tests pass as written.

The project is the canonical Memcached operator, named after ``NAME``: a typed spec and the CRD
generated from it, builders of a Deployment (``spec.size`` pods of ``spec.image``) and a Service,
the ``Operator``, Hypothesis property tests (``builders.testing.check_builders``), a test of the
operator on the embedded API server (the pytest plugin's ``kube_api`` fixture), a sample parent,
a Dockerfile (numeric non-root user), a ``pyproject.toml`` that asks for ``operator-toolkit``
alone in production and with its ``embedded`` and ``testing`` extras for the tests, and a README
with its two commands (set up, test). The files are the templates of ``skeleton/`` (the data of
the package ``reconciler._commands.skeleton``), whose ``{{placeholder}}`` fields
:func:`render_project` fills in; :func:`project_names` derives every name from ``NAME`` and
refuses one that is no DNS-1123 label, would not make a Python package, or would shadow a module
the project imports. Nothing is overwritten: the folder must be new or empty. The command-line
shell is ``reconciler._commands.cli``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import keyword
import re
import sys
from pathlib import Path
from typing import TextIO

import attrs

from reconciler._base.errors import ReconcilerUsageError

__all__ = ["FILES", "ProjectNames", "new_command", "project_names", "render_project",
           "write_project"]

DISTRIBUTION = "operator-toolkit"

FILES: tuple[tuple[str, str], ...] = (
    ("README.md", "README.md.tmpl"),
    ("pyproject.toml", "pyproject.toml.tmpl"),
    (".gitignore", "gitignore.tmpl"),
    ("Dockerfile", "Dockerfile.tmpl"),
    ("sample.yaml", "sample.yaml.tmpl"),
    ("{package}/__init__.py", "package_init.py.tmpl"),
    ("{package}/spec.py", "spec.py.tmpl"),
    ("{package}/builders.py", "builders.py.tmpl"),
    ("{package}/operator.py", "operator.py.tmpl"),
    ("tests/test_builders.py", "test_builders.py.tmpl"),
    ("tests/test_operator.py", "test_operator.py.tmpl"),
    ("tests/test_machine.py", "test_machine.py.tmpl"),
)
"""Each file written (its path, ``{package}`` filled in) and its template in ``skeleton/``."""

_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_MAX_NAME = 63 - len("-operator")
"""The operator's name, ``NAME-operator``, is a label value (63 characters at most)."""

_TAKEN = frozenset({
    "builders", "reconciler", "objectmatcher", "kubernetes", "kubernetes_validate", "hypothesis",
    "attr", "attrs", "yaml", "pytest", "aiohttp", "cryptography", "jsonschema", "jsonpatch",
    "dictdiffer", "prometheus_client", "referencing", "setuptools", "pip", "tests",
})
"""Modules the project imports, or its tests and tools need: a package of that name would
shadow them."""

_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


@attrs.frozen(kw_only=True)
class ProjectNames:
    """Every name of a new project, derived from ``NAME`` (here ``web-cache``)."""

    name: str
    """``NAME`` itself, a DNS-1123 label: ``web-cache``."""
    package: str
    """The Python package: ``web_cache``."""
    kind: str
    """The custom resource's kind: ``WebCache``."""

    @property
    def project(self) -> str:
        """The distribution and the operator's name (``managed-by``): ``web-cache-operator``."""
        return f"{self.name}-operator"


def project_names(name: str) -> ProjectNames:
    """The names of a project called ``name``; ``ReconcilerUsageError`` (a ``ValueError``) saying
    what is wrong with a name that cannot be one."""
    if not _LABEL.fullmatch(name):
        raise ReconcilerUsageError(
            f"{name!r} is not a valid name: use lower-case letters, digits and '-', starting "
            "with a letter and ending with a letter or digit (a DNS-1123 label, such as "
            "'memcached' or 'web-cache')")
    if len(name) > _MAX_NAME:
        raise ReconcilerUsageError(
            f"{name!r} is {len(name)} characters long: at most {_MAX_NAME}, so that the "
            f"operator's name {name}-operator is a valid label value")
    package = name.replace("-", "_")
    if keyword.iskeyword(package):
        raise ReconcilerUsageError(
            f"{name!r} would make the Python package {package!r}, a Python keyword: "
            "choose another name")
    if package in sys.stdlib_module_names or package in _TAKEN:
        whose = ("the standard library's" if package in sys.stdlib_module_names
                 else "the one the operator, its tests or its tools import")
        raise ReconcilerUsageError(
            f"{name!r} would make the Python package {package!r}, which shadows {whose} "
            f"module {package!r}: choose another name")
    kind = "".join(part[:1].upper() + part[1:] for part in name.split("-"))
    return ProjectNames(name=name, package=package, kind=kind)


def _toolkit_version() -> str | None:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from a bare tree
        return None


def _requirement(extras: str, version: str | None) -> str:
    """``operator-toolkit[extras]~=X.Y.Z``: this release's compatible ones (no bound without
    a known version)."""
    return f"{DISTRIBUTION}{extras}" + (f"~={version}" if version else "")


def render_project(names: ProjectNames, *, toolkit_version: str | None = None) -> dict[str, str]:
    """The project's files, by path relative to its folder (pure: nothing is written)."""
    fields = {
        "name": names.name, "package": names.package, "kind": names.kind,
        "project": names.project, "singular": names.kind.lower(),
        "toolkit": _requirement("", toolkit_version),
        "toolkit_test": _requirement("[embedded,testing]", toolkit_version),
    }
    skeleton = importlib.resources.files(f"{__package__}.skeleton")

    def fill(match: re.Match[str]) -> str:
        return fields[match.group(1)]

    return {path.format(package=names.package): _PLACEHOLDER.sub(
                fill, (skeleton / template).read_text(encoding="utf-8"))
            for path, template in FILES}


def write_project(name: str, directory: str | Path | None = None, *,
                  toolkit_version: str | None = None) -> tuple[Path, list[Path]]:
    """Write the project ``name`` into ``directory`` (default ``./NAME``), which must not exist
    or be empty; its folder and the files written. ``toolkit_version`` defaults to the
    installed toolkit's."""
    names = project_names(name)
    folder = Path(name if directory is None else directory).absolute()
    if folder.exists() and not folder.is_dir():
        raise ReconcilerUsageError(f"{folder} exists and is not a folder")
    if folder.is_dir() and any(folder.iterdir()):
        raise ReconcilerUsageError(
            f"{folder} exists and is not empty: refusing to overwrite it (name a new or empty "
            "folder with --dir)")
    files = render_project(names, toolkit_version=toolkit_version or _toolkit_version())
    written: list[Path] = []
    for relative, text in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return folder, written


def new_command(name: str, *, directory: str | None = None, out: TextIO | None = None) -> int:
    """``optk new NAME [--dir PATH]``: write the project and say what comes next."""
    out = sys.stdout if out is None else out
    folder, written = write_project(name, directory)
    names = project_names(name)
    print(f"wrote {names.project} ({names.kind} in {names.package}/) to {folder}:", file=out)
    for path in written:
        print(f"  {path.relative_to(folder)}", file=out)
    print(f"next: operator-toolkit is not on PyPI: put its wheel in {folder / 'wheels'} (in a "
          "checkout of the toolkit: python -m pip wheel --no-deps -w <that folder> .), then run "
          f"the two commands of {folder / 'README.md'} (set up, test) in {folder}", file=out)
    return 0
