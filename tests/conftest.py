"""Suite-wide settings: Hypothesis profiles, the path of the real-apiserver recordings, the
order in which test files are handed to the two processes (the longest first), and the session's
second real control plane (``second_real_kube_api``, for the tests of children placed in another
cluster).

The recordings live in the repository (``tests/fixtures/real-apiserver/``, listed by its
``index.json``): they are data captured from a real kube-apiserver, so a fresh clone runs every
test with nothing beside it. See ``tests/README.md`` for the layout.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from reconciler.envtest import ControlPlane

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

LONGEST_FIRST = (
    "tests/driver/test_contention.py",
    "tests/testing/test_machine_defects.py",
    "tests/testing/test_machine.py",
    "tests/driver/test_contention_held.py",
    "tests/reconciler/test_new_project.py",
    "tests/examples/test_acceptance_ssa.py",
    "tests/reliability/test_deleted_parents.py",
    "tests/reliability/",
    "tests/benchmarks/test_vs_go.py",
    "tests/driver/test_parent_gone.py",
    "tests/manifests/test_pod_real.py",
    "tests/examples/test_demo.py",
    "tests/driver/test_inputs.py",
    "tests/examples/test_tenant_real.py",
)
"""Files (or folders) of 20 s or more in ``make test`` (``--durations``), longest first.

pytest-xdist's ``--dist loadfile`` hands whole files to the two processes; by default in order
of their number of tests, so a long file of one test (``test_deleted_parents.py``: 55 s) ran
alone at the end while the other process idled. ``make test`` passes ``--no-loadscope-reorder``
so that they go in collection order, which this hook makes longest first: started first, they
overlap the many short files instead (a safeguard: pytest took 13 min 3 s on a clean clone
either way). Only the order of files changes; tests in a file keep theirs."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files of :data:`LONGEST_FIRST` first, in its order; every other file after them in
    collection order (a stable sort: tests within a file keep their order)."""
    root = Path(__file__).resolve().parent.parent

    def rank(item: pytest.Item) -> int:
        path = Path(str(item.path)).resolve()
        relative = path.relative_to(root).as_posix() if path.is_relative_to(root) else ""
        return next((i for i, prefix in enumerate(LONGEST_FIRST) if relative.startswith(prefix)),
                    len(LONGEST_FIRST))

    items.sort(key=rank)


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


@pytest.fixture(scope="session")
def second_real_kube_api(kube_assets: Path) -> Iterator[ControlPlane]:
    """A second real control plane (``reconciler.envtest.ControlPlane`` over ``kube_assets``)
    beside the session's ``real_kube_api``: the other cluster of the multi-cluster tests
    (issue 41). One per session (each costs about 10 s to start and its memory), started on
    first use, stopped at session end; skips as ``real_kube_api`` does without assets. A test
    that stops its API server (``stop_apiserver``) starts it again before it ends."""
    from reconciler.envtest import AssetsNotFoundError, ControlPlane

    plane = ControlPlane(kube_assets)
    try:
        plane.start()
    except AssetsNotFoundError as exc:
        pytest.skip(f"the second real control plane: {exc}")
    try:
        yield plane
    finally:
        plane.stop()
