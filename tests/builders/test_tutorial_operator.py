"""docs/tutorial.md is executable: its code blocks run in order, its operator is under 60 lines,
and its tests pass (the run on the embedded API server through the ``kube_api`` fixture)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from reconciler.embedded import EmbeddedApiServer

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"
BLOCKS = re.findall(r"```python\n(.*?)```", TUTORIAL.read_text(), flags=re.S)


@pytest.fixture(scope="module")
def tutorial() -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "tutorial"}
    exec(compile("\n".join(BLOCKS), str(TUTORIAL), "exec", dont_inherit=True), namespace)
    return namespace


def test_the_operator_is_under_60_lines() -> None:
    operator = [block for block in BLOCKS if block.startswith("# website.py")]
    lines = [line for block in operator for line in block.splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    assert len(operator) >= 3
    assert len(lines) < 60, f"the tutorial's operator has {len(lines)} lines"


def test_the_property_test_passes(tutorial: dict[str, Any]) -> None:
    tutorial["test_website_builders_keep_every_invariant"]()


@pytest.mark.both_servers
def test_the_run_on_the_embedded_server_passes(
    tutorial: dict[str, Any], kube_api: EmbeddedApiServer, kube_namespace: str
) -> None:
    tutorial["test_website_runs"](kube_api, kube_namespace)
    tutorial["test_the_server_rejects_what_the_class_rejects"](kube_api, kube_namespace)


@pytest.mark.both_servers
def test_the_custom_condition_is_written(
    tutorial: dict[str, Any], kube_api: EmbeddedApiServer, kube_namespace: str
) -> None:
    tutorial["test_website_reports_available"](kube_api, kube_namespace)


def test_a_spec_the_class_rejects_names_the_parent_and_field(tutorial: dict[str, Any]) -> None:
    from builders.specs import SpecFieldError

    parent = {"kind": "Website", "metadata": {"name": "home", "namespace": "web"},
              "spec": {"content": "x", "tier": "gold"}}
    with pytest.raises(SpecFieldError, match=r"Website web/home: invalid spec\.tier"):
        tutorial["build"](parent)
