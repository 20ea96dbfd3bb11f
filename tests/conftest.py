"""Suite-wide settings: Hypothesis profiles and the path of the real-apiserver recordings.

The recordings live in the repository (``tests/fixtures/real-apiserver/``, listed by its
``index.json``): they are data captured from a real kube-apiserver, so a fresh clone runs every
test with nothing beside it. See ``tests/README.md`` for the layout.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "real-apiserver"

# Two cores run the whole suite; keep property tests meaningful but bounded.
settings.register_profile(
    "default",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def load_fixture(name: str) -> Any:
    """One recording of ``tests/fixtures/real-apiserver`` as parsed JSON."""
    return json.loads((FIXTURES / name).read_text())


def object_fixture_names() -> list[str]:
    """The object recordings (``sent``/``returned`` pairs) that ``index.json`` lists, CRDs first
    (a custom resource recording needs its type served)."""
    names = list(load_fixture("index.json")["objectFixtures"]["files"])
    return sorted(names, key=lambda name: (name != "customresourcedefinition.json", name))


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The folder of the real-apiserver recordings (``tests/fixtures/real-apiserver``)."""
    assert FIXTURES.is_dir(), f"recordings not found at {FIXTURES}"
    return FIXTURES
