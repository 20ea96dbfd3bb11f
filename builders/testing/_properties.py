"""The property tests of a builder set: ``check_builders``, over parents alone or with inputs.

``check_builders(build, parents)`` (DESIGN.md section 2) draws parents from a Hypothesis strategy
and runs every invariant of ``_check`` (``check_parent``) on each; with ``inputs=InputStates(...)``
it also draws the declared inputs' states (``_inputs``), binds the build to them
(``with_inputs``) and adds the invariant "input changes". Hypothesis shrinks a failing parent and
the AssertionError names the invariant and that parent.

Boundary: the runs and their Hypothesis settings only. The invariants are ``_check``'s and the
input strategies ``_inputs``'; this module sits above both, which know nothing of each other.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from builders._compose import ResourceBuilder
from builders._identity import ObjectRef
from builders._inputs import Inputs
from builders._state import KubeObject
from builders.testing._check import (
    Build,
    _show,
    assert_builds,
    assert_selectors_match,
    check_parent,
)
from builders.testing._inputs import InputStates, kept_builders, with_inputs

__all__ = ["check_builders", "check_with_inputs"]


def check_builders(
    build: Build | Callable[[KubeObject, Inputs], Iterable[ResourceBuilder]],
    parents: st.SearchStrategy[KubeObject],
    *,
    inputs: InputStates | None = None,
    managed_by: str | None = None,
    kubernetes_version: str | None = None,
    crd_schemas: Mapping[str, Mapping[str, Any]] | None = None,
    require_schemas: bool = False,
    skip: Collection[str] = (),
    max_examples: int | None = None,
) -> None:
    """Run ``build`` over parents drawn from ``parents`` and check every invariant.

    ``build(parent)`` returns the parent's list of ResourceBuilders. On a violation Hypothesis
    shrinks the parent and an AssertionError names the invariant and the shrunk parent. Options:
    ``managed_by`` (the expected ``app.kubernetes.io/managed-by``), ``kubernetes_version`` of the
    schemas, ``crd_schemas`` for custom-resource children, ``require_schemas``, ``skip`` (names
    from :data:`INVARIANTS`) and ``max_examples`` (default: the active Hypothesis profile's).
    Call it from a plain test function, not from inside another ``@given`` test.

    ``inputs=InputStates(declare=fn)`` is for an operator that declares inputs: ``build`` is
    then ``build(parent, inputs)``, each declared input is drawn missing, forbidden or present
    (builders that raise ``InputUnavailableError`` for one that is not there are left out, as
    the reconcile reports them), and the invariant "input changes" checks that other contents
    of the same inputs build the same identities.
    """
    if inputs is not None:
        check_with_inputs(build, parents, inputs, skip=skip, max_examples=max_examples,
                           options=dict(managed_by=managed_by,
                                        kubernetes_version=kubernetes_version,
                                        crd_schemas=crd_schemas,
                                        require_schemas=require_schemas))
        return
    options = _settings(max_examples)

    @options
    @given(parent=parents)
    def run(parent: KubeObject) -> None:
        check_parent(
            build,  # type: ignore[arg-type]
            parent=parent,
            managed_by=managed_by,
            kubernetes_version=kubernetes_version,
            crd_schemas=crd_schemas,
            require_schemas=require_schemas,
            skip=skip,
        )

    run()


def check_with_inputs(build: Any, parents: st.SearchStrategy[KubeObject], states: InputStates,
                      *, skip: Collection[str], max_examples: int | None,
                      options: Mapping[str, Any]) -> None:
    """``check_builders(inputs=...)``: the invariants over drawn parents and inputs."""

    @_settings(max_examples)
    @given(parent=parents, data=st.data())
    def run(parent: KubeObject, data: st.DataObject) -> None:
        drawn = data.draw(states.drawn(parent), label="inputs")
        # A workload left out for a missing input is what a Service of the set may select
        # (the reconcile reports it waiting): with one left out, only the workloads' own
        # selectors are checked.
        partial = kept_builders(build, drawn, parent)[1] > 0 and "selectors" not in skip
        children = check_parent(with_inputs(build, drawn), parent=parent,
                                skip={*skip, "selectors"} if partial else skip, **options)
        if partial:
            assert_selectors_match([(obj, state) for obj, state in children
                                    if obj.get("kind") != "Service"], parent=parent)
        if "input changes" in skip:
            return
        changed = data.draw(states.changed(drawn), label="changed inputs")
        again = assert_builds(with_inputs(build, changed), parent)
        before = sorted(str(ObjectRef.of(obj)) for obj, _ in children)
        after = sorted(str(ObjectRef.of(obj)) for obj, _ in again)
        assert before == after, (
            f"input changes: other contents of the same inputs built other children for "
            f"{_show(parent)}: {sorted(set(before) ^ set(after))}")

    run()


def _settings(max_examples: int | None) -> settings:
    """The Hypothesis settings of ``check_builders`` (``max_examples`` default: the profile's)."""
    overrides: dict[str, Any] = {"max_examples": max_examples} if max_examples else {}
    return settings(
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        report_multiple_bugs=False,
        database=None,
        # The explain phase costs several times the shrinking itself; the message names the
        # invariant and the whole shrunk parent anyway.
        phases=[p for p in Phase if p is not Phase.explain],
        **overrides,
    )
