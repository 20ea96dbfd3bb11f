"""Properties of a versioned API, checked over generated objects: conversions lose nothing.

``check_conversions(versions)`` draws spec instances of every version (``spec_instances``) and
checks, with a shrunk counterexample on failure: spoke -> hub -> spoke is the identity; hub ->
spoke -> hub is the identity through whole objects (what the spoke cannot hold rides in the
conversion annotation), and without the annotation the hub keeps every field the spoke can hold;
defaulting is idempotent; an unchanged object always passes validation (else it could never be
updated again), and validation refuses only with a SpecFieldError naming a field. Pure.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from builders._errors import SpecFieldError
from builders._specs import to_spec_dict
from builders._versions import CONVERSION_ANNOTATION, Versions
from builders.testing._specs import spec_instances

__all__ = ["CONVERSION_PROPERTIES", "check_conversions"]

CONVERSION_PROPERTIES = (
    "spoke-hub-spoke", "hub-spoke-hub", "hub-keeps-spoke-fields", "defaulting-idempotent",
    "unchanged-accepted",
)
"""The names of the properties :func:`check_conversions` checks (its ``skip`` takes them)."""


def _object(versions: Versions, version: str, spec: Any) -> dict[str, Any]:
    return {"apiVersion": versions.api_version(version), "kind": versions.kind,
            "metadata": {"name": "example", "namespace": "default"},
            "spec": to_spec_dict(spec, keep_operator_defaults=False)}


def _fail(prop: str, version: str, detail: str) -> AssertionError:
    return AssertionError(f"conversion property {prop!r} violated at version {version}: {detail}")


def check_version(versions: Versions, version: str, spec: Any, *, skip: frozenset[str]) -> None:
    """The properties for one drawn ``spec`` of ``version``; raises AssertionError."""
    hub_name = versions.hub
    if version != hub_name and "spoke-hub-spoke" not in skip:
        back = versions.spec_from_hub(versions.spec_to_hub(spec, version=version), version=version)
        if back != spec:
            raise _fail("spoke-hub-spoke", version, f"{spec!r} came back as {back!r}")
    if version == hub_name:
        hub_obj = _object(versions, hub_name, spec)
        for spoke in versions.versions:
            if spoke.name == hub_name:
                continue
            at_spoke = versions.convert(hub_obj, versions.api_version(spoke.name))
            if "hub-spoke-hub" not in skip:
                again = versions.convert(at_spoke, versions.api_version(hub_name))
                if again != hub_obj:
                    raise _fail("hub-spoke-hub", spoke.name,
                                f"{hub_obj['spec']} came back as {again['spec']}")
            if "hub-keeps-spoke-fields" not in skip:
                annotations = at_spoke.get("metadata", {}).get("annotations") or {}
                bare = {**at_spoke, "metadata": {
                    **at_spoke["metadata"],
                    "annotations": {k: v for k, v in annotations.items()
                                    if k != CONVERSION_ANNOTATION}}}
                lossy = versions.convert(
                    versions.convert(bare, versions.api_version(hub_name)),
                    versions.api_version(spoke.name))
                if lossy["spec"] != at_spoke["spec"]:
                    raise _fail("hub-keeps-spoke-fields", spoke.name,
                                f"{at_spoke['spec']} came back as {lossy['spec']}")
        _check_admission(versions, spec, skip=skip)


def _check_admission(versions: Versions, spec: Any, *, skip: frozenset[str]) -> None:
    defaulted = versions.default_spec(spec)
    if "defaulting-idempotent" not in skip and versions.default_spec(defaulted) != defaulted:
        raise _fail("defaulting-idempotent", versions.hub,
                    f"{defaulted!r} defaulted again is {versions.default_spec(defaulted)!r}")
    if "unchanged-accepted" not in skip:
        try:
            versions.validate_spec(defaulted, defaulted)
        except SpecFieldError as err:
            raise _fail("unchanged-accepted", versions.hub,
                        f"an unchanged {defaulted!r} was refused: {err}") from None


def check_conversions(
    versions: Versions, *, skip: tuple[str, ...] = (), max_examples: int | None = None,
) -> None:
    """Check :data:`CONVERSION_PROPERTIES` over spec instances of every version of ``versions``.

    On a violation Hypothesis shrinks the drawn spec and an AssertionError names the property,
    the version and the shrunk values. Call it from a plain test function.
    """
    overrides: dict[str, Any] = {"max_examples": max_examples} if max_examples else {}
    options = settings(
        deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        report_multiple_bugs=False, database=None,
        phases=[p for p in Phase if p is not Phase.explain], **overrides,
    )
    skipped = frozenset(skip)
    drawn = st.one_of(*[
        st.tuples(st.just(v.name), spec_instances(v.spec)) for v in versions.versions])

    @options
    @given(case=drawn)
    def run(case: tuple[str, Any]) -> None:
        check_version(versions, case[0], case[1], skip=skipped)

    run()
