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


def test_setup_envtest_precedence_and_tiers_are_documented() -> None:
    assert "setup-envtest use 1.25.x --bin-dir" in DOC
    assert "export KUBEBUILDER_ASSETS=" in DOC
    assert "**Precedence.**" in DOC
    assert "needs_controller_manager" in DOC
    assert "*Without it*" in DOC
