"""Every example operator keeps the toolkit's own property kit (``builders.testing``).

Each package under ``examples/`` is found on disk, and each ``Operator`` its ``operator`` module
defines is checked with ``check_builders`` over parents drawn from the parent CRD it installs
(its declared inputs drawn with ``InputStates``), with the operator's name as the expected
``managed-by`` and every CRD the examples define as the schemas of custom-resource children
(issue 36: the Observer's CRD lacked its identity labels, relying on the reconciler's stamping).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import examples
from builders.testing import InputStates, check_builders, dns_labels, from_schema, object_metas
from reconciler import Operator

EXAMPLES = Path(examples.__file__).parent


def _example_packages() -> list[str]:
    return sorted(info.name for info in pkgutil.iter_modules([str(EXAMPLES)]) if info.ispkg)


def _crds() -> dict[str, Mapping[str, Any]]:
    """Every CRD an example module defines (``apiVersion/kind`` of each served version)."""
    found: dict[str, Mapping[str, Any]] = {}
    for package in _example_packages():
        for info in pkgutil.walk_packages([str(EXAMPLES / package)], f"examples.{package}."):
            if info.name.endswith(("__main__", ".demo")):
                continue
            module = importlib.import_module(info.name)
            for value in vars(module).values():
                if isinstance(value, Mapping) and value.get("kind") == "CustomResourceDefinition":
                    spec = value["spec"]
                    for version in spec["versions"]:
                        key = f"{spec['group']}/{version['name']}/{spec['names']['kind']}"
                        found[key] = value
    return found


def _operators() -> Iterator[tuple[str, Operator]]:
    for package in _example_packages():
        module = importlib.import_module(f"examples.{package}.operator")
        for attr, value in sorted(vars(module).items()):
            if isinstance(value, Operator):
                yield f"{package}:{attr}", value


OPERATORS = dict(_operators())


def test_every_example_is_checked() -> None:
    assert {target.partition(":")[0] for target in OPERATORS} == set(_example_packages())
    assert {"observer", "thanos"} <= set(_example_packages())


def _parent_crd(operator: Operator) -> Mapping[str, Any]:
    group, _, version = operator.api_version.rpartition("/")
    for crd in operator.install:
        spec = crd["spec"]
        if spec["group"] == group and spec["names"]["kind"] == operator.kind:
            assert any(v["name"] == version for v in spec["versions"])
            return crd
    raise AssertionError(f"{operator.name} installs no CRD of its parent {operator.kind}")


@pytest.mark.parametrize("target", sorted(OPERATORS))
def test_example_keeps_every_invariant(target: str) -> None:
    operator = OPERATORS[target]
    parent_crd = _parent_crd(operator)
    version = operator.api_version.rpartition("/")[2]
    parents = from_schema(parent_crd, version,
                          metadata=object_metas(names=dns_labels(max_size=40, rfc1035=True)))
    inputs = InputStates(declare=operator.inputs) if operator.inputs is not None else None
    check_builders(operator.build, parents, inputs=inputs, managed_by=operator.name,
                   crd_schemas=_crds(), require_schemas=True, max_examples=25)
