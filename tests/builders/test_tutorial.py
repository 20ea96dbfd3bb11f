"""docs/testing-builders.md is executable: its code blocks run in order and its tests pass."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "testing-builders.md"


@pytest.fixture(scope="module")
def tutorial() -> dict[str, Any]:
    blocks = re.findall(r"```python\n(.*?)```", TUTORIAL.read_text(), flags=re.S)
    assert len(blocks) >= 5
    namespace: dict[str, Any] = {"__name__": "tutorial"}
    exec(compile("\n".join(blocks), str(TUTORIAL), "exec"), namespace)
    return namespace


@pytest.mark.parametrize(
    "test",
    [
        "test_digit_names_break_the_service",
        "test_greeter_builders_keep_every_invariant",
        "test_replicas_follow_the_spec",
        "test_a_service_selecting_nothing_is_caught",
    ],
)
def test_tutorial_tests_pass(tutorial: dict[str, Any], test: str) -> None:
    tutorial[test]()
