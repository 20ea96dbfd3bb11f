"""What the docs and docstrings say of the architecture, checked against the tree and the contracts.

The module table of docs/architecture.md is checked by ``test_architecture``; this file checks
the rest of what drifted before (issue 37: the prose said "nine" packages and named two contracts
that did not exist, and the package docstrings omitted half their modules):

- every import-linter contract named in docs/*.md, the README or a docstring exists in
  ``setup.cfg``, and every contract there is named in docs/architecture.md;
- the package counts in docs/architecture.md's prose are the tree's, and its package table
  follows the ``reconciler-layers`` contract's order;
- each private package of ``reconciler`` names every module it holds, and only those, in its
  ``__init__`` docstring (a paragraph ``Modules: ``name`` (what it is), ...``);
- the layers contracts of ``reconciler._driver``, ``builders`` and ``builders.testing`` give every
  module of their package a place, and ``driver-layers`` ignores exactly the imports of the
  ``Operator.start``/``Operator.run`` facade that the cycle test allows (``FACADE_EDGES``).
"""

from __future__ import annotations

import ast
import configparser
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_architecture import FACADE_EDGES, PACKAGES, ROOT

CONTRACT = "importlinter:contract:"
KEBAB = re.compile(r"``?([a-z][a-z0-9]*(?:-[a-z0-9]+)+)``?")
"""A backticked kebab-case word: how the docs write a contract's name (and a few other things)."""
NOT_CONTRACTS = frozenset({"lint-imports", "import-linter", "operator-toolkit"})
"""Kebab-case words that sit beside the word "contract" without being one: the command, the
tool and the distribution."""
DOCUMENTED_PACKAGES = (*PACKAGES, "examples", "benchmarks", "tests")
"""Where docstrings are read for contract names."""
NUMBERS = {word: n for n, word in enumerate((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen"))}
EXHAUSTIVE = ("reconciler._driver", "builders", "builders.testing")
"""Containers whose layers contract places every module (and subpackage) of the package."""


def _config() -> configparser.ConfigParser:
    config = configparser.ConfigParser(interpolation=None)
    config.read(ROOT / "setup.cfg")
    return config


def _contracts() -> dict[str, configparser.SectionProxy]:
    config = _config()
    return {name.removeprefix(CONTRACT): config[name] for name in config.sections()
            if name.startswith(CONTRACT)}


def _layers(section: configparser.SectionProxy) -> list[list[str]]:
    """The layers of a ``layers`` contract, top first, each a list of its modules."""
    return [[name.strip() for name in re.split(r"[|:]", line)]
            for line in section["layers"].strip().splitlines() if line.strip()]


def _paragraphs(text: str) -> Iterator[str]:
    """Blank-line separated paragraphs, a list's items each on its own; a Markdown table is read
    by ``_table_mentions``."""
    for block in re.split(r"\n\s*\n", text):
        if not block.lstrip().startswith("|"):
            yield from re.split(r"\n(?=\s*(?:[-*]|\d+\.) )", block)


def _table_mentions(text: str) -> Iterator[str]:
    """The kebab-case words in the column of a Markdown table headed "enforced by"."""
    for block in re.split(r"\n\s*\n", text):
        rows = [row.strip().strip("|").split("|") for row in block.strip().splitlines()
                if row.lstrip().startswith("|")]
        if not rows:
            continue
        columns = [i for i, cell in enumerate(rows[0]) if "enforced by" in cell.lower()]
        for row in rows[2:]:
            for i in columns:
                if i < len(row):
                    yield from KEBAB.findall(row[i])


def _mentions(text: str) -> set[str]:
    """Contract names ``text`` mentions: kebab-case words in backticks in a paragraph that says
    "contract", and in a table's "enforced by" column."""
    found = set(_table_mentions(text))
    for paragraph in _paragraphs(text):
        if re.search(r"contract", paragraph, re.IGNORECASE):
            found |= set(KEBAB.findall(paragraph))
    return found - NOT_CONTRACTS


def _docstrings(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node)
            if docstring:
                yield docstring


def _named_contracts() -> dict[str, set[str]]:
    """Each contract name mentioned, with the files that mention it."""
    named: dict[str, set[str]] = {}
    texts = [(path, path.read_text()) for path in [*sorted((ROOT / "docs").glob("*.md")),
                                                    ROOT / "README.md"]]
    texts += [(path, docstring) for package in DOCUMENTED_PACKAGES
              for path in sorted((ROOT / package).rglob("*.py"))
              for docstring in _docstrings(path)]
    for path, text in texts:
        for name in _mentions(text):
            named.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return named


def test_every_contract_named_in_docs_or_docstrings_exists() -> None:
    named = _named_contracts()
    # the reading finds what the docs name, so it cannot pass by finding nothing
    assert {"reconciler-layers", "driver-layers", "builders-layers"} <= set(named), named
    missing = {name: sorted(where) for name, where in named.items()
               if name not in _contracts()}
    assert not missing, (
        f"contracts named in docs or docstrings but not in setup.cfg: {missing} (name one that "
        f"exists; a kebab-case word that is no contract goes to NOT_CONTRACTS)")


def test_every_contract_is_named_in_the_architecture_doc() -> None:
    named = _mentions((ROOT / "docs" / "architecture.md").read_text())
    unnamed = set(_contracts()) - named
    assert not unnamed, f"contracts docs/architecture.md does not name: {sorted(unnamed)}"


def _private_packages() -> list[Path]:
    return sorted(path.parent for path in (ROOT / "reconciler").glob("_*/__init__.py"))


def _count(pattern: str, text: str) -> int:
    match = re.search(pattern, text)
    assert match, f"docs/architecture.md no longer says {pattern!r}: update this test"
    return NUMBERS[match.group(1).lower()]


def test_the_architecture_doc_counts_the_packages_of_the_tree() -> None:
    text = " ".join((ROOT / "docs" / "architecture.md").read_text().split())
    assert _count(r"operator-toolkit is (\w+) packages", text) == len(PACKAGES)
    stated = _count(r"The driver is (\w+) private packages", text)
    assert stated == len(_private_packages()), (
        f"docs/architecture.md says the driver is {stated} private packages; the tree has "
        f"{len(_private_packages())}: {[path.name for path in _private_packages()]}")


def test_the_picture_draws_the_tree() -> None:
    """The picture at the top of docs/architecture.md names every package, every example,
    the two test servers and every private package of ``reconciler`` in the order of
    ``reconciler-layers``; the prose counts the examples."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    picture = text.split("```\n", 2)[1]
    examples = sorted(p.name for p in (ROOT / "examples").iterdir()
                      if p.is_dir() and (p / "__init__.py").exists())
    for name in [*PACKAGES, *(f"examples/{e}" for e in examples),
                 "reconciler.embedded", "reconciler.envtest"]:
        assert name in picture, f"the picture of docs/architecture.md does not draw {name}"
    drawn = re.findall(r"^\s*│?\s+(_[a-z]+(?: \| _[a-z]+)?) ", picture, re.MULTILINE)
    layers = [" | ".join(n for n in layer if n != "__main__")
              for layer in _layers(_contracts()["reconciler-layers"])]
    assert drawn == [layer for layer in layers if layer], (
        f"the picture's private packages {drawn}; reconciler-layers: {layers}")
    flat = " ".join(text.split())
    assert _count(r"three packages and (\w+) examples", flat) == len(examples)


def test_the_package_table_follows_the_reconciler_layers() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("### Inside `reconciler`", 1)[1].split("\n## ", 1)[0]
    table = re.findall(r"^\| `(_[a-z]+)` \|", section, re.MULTILINE)
    layers = [name for layer in _layers(_contracts()["reconciler-layers"]) for name in layer
              if name.startswith("_") and name != "__main__"]
    assert table == layers, f"the table's packages, top first: {table}; the contract's: {layers}"
    assert sorted(table) == sorted(path.name for path in _private_packages())


def _listed_modules(docstring: str) -> list[str]:
    """The modules a ``Modules: ...`` paragraph names: each in double backticks at its start or
    after the ``), `` that closes the one before."""
    paragraphs = [p for p in docstring.split("\n\n") if p.startswith("Modules: ")]
    assert len(paragraphs) == 1, "no paragraph starting 'Modules: '"
    return re.findall(r"(?:^Modules: |\), )``([a-z_]+)``", " ".join(paragraphs[0].split()))


@pytest.mark.parametrize("package", _private_packages(), ids=lambda path: path.name)
def test_the_package_docstring_names_every_module(package: Path) -> None:
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    listed = _listed_modules(docstring)
    tree = sorted(path.stem for path in package.glob("*.py") if path.stem != "__init__")
    assert len(listed) == len(set(listed)), f"named twice: {listed}"
    assert sorted(listed) == tree, (
        f"{package.name}/__init__.py: missing {sorted(set(tree) - set(listed))}, "
        f"not in the package {sorted(set(listed) - set(tree))}")


@pytest.mark.parametrize("container", EXHAUSTIVE)
def test_the_layers_contract_places_every_module(container: str) -> None:
    sections = [section for section in _contracts().values()
                if section.get("type") == "layers"
                and section.get("containers", "").split() == [container]]
    assert len(sections) == 1, f"one layers contract with the container {container}"
    placed = [name for layer in _layers(sections[0]) for name in layer]
    folder = ROOT.joinpath(*container.split("."))
    children = sorted({path.stem for path in folder.glob("*.py") if path.stem != "__init__"}
                      | {path.parent.name for path in folder.glob("*/__init__.py")})
    assert len(placed) == len(set(placed)), f"placed twice: {placed}"
    assert sorted(placed) == children, (
        f"{container}: modules with no layer {sorted(set(children) - set(placed))}, layers "
        f"naming no module {sorted(set(placed) - set(children))}")


def test_the_driver_layers_ignore_only_the_facade() -> None:
    ignored = {line.strip() for line in
               _contracts()["driver-layers"].get("ignore_imports", "").splitlines()
               if line.strip() and not line.strip().startswith("#")}
    allowed = {f"{importer} -> {imported}" for importer, _, imported in FACADE_EDGES}
    assert ignored == allowed, f"driver-layers ignores {ignored}; the cycle test allows {allowed}"
