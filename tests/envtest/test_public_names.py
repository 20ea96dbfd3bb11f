"""Each public name of ``reconciler.envtest`` has a docstring and a mention in docs/envtest.md."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import reconciler.envtest

DOC = (Path(__file__).resolve().parents[2] / "docs" / "envtest.md").read_text()


@pytest.mark.parametrize("name", reconciler.envtest.__all__)
def test_public_name_is_documented(name: str) -> None:
    value = getattr(reconciler.envtest, name)
    if inspect.isclass(value) or inspect.isfunction(value):
        assert inspect.getdoc(value), f"{name} has no docstring"
    assert f"`{name}" in DOC, f"{name} is not mentioned in docs/envtest.md"


def test_option_and_variable_are_documented() -> None:
    assert "--kube-api=embedded|real|both" in DOC
    assert "OPTK_KUBE_ASSETS" in DOC
    assert "both_servers" in DOC
