"""The property-based testing kit for builders: Hypothesis strategies and ``check_builders``.

Operator authors test their desired-state functions before touching a cluster::

    from builders.testing import check_builders, from_schema

    def test_my_operator():
        check_builders(build, parents=from_schema(my_crd), managed_by="my-operator")

Strategies generate valid Kubernetes identifiers, metadata and whole objects (of built-in kinds or
a CRD's structural schema), and typed spec instances from a spec class
(:func:`spec_instances`), the conversion properties of a versioned API
(:func:`check_conversions`), the states of declared inputs (:class:`InputStates`,
:func:`with_inputs`); ``check_builders`` runs a builder set over generated parents and checks
the invariants of DESIGN.md sections 4 and 5, each also available as an ``assert_*``
function. See ``docs/testing-builders.md`` for a tutorial.
"""

from __future__ import annotations

from builders.testing._check import (
    INVARIANTS,
    Built,
    assert_absent_stubs,
    assert_builds,
    assert_owned,
    assert_pure,
    assert_schema_valid,
    assert_selectors_match,
    assert_server_rules,
    assert_stable_names,
    assert_unique,
    assert_valid_names,
    check_parent,
)
from builders.testing._inputs import InputStates, with_inputs
from builders.testing._properties import check_builders
from builders.testing._specs import spec_instances
from builders.testing._strategies import (
    dns_labels,
    dns_subdomains,
    from_schema,
    label_keys,
    label_maps,
    label_values,
    object_metas,
    owner_references,
    quantities,
)
from builders.testing._versions import CONVERSION_PROPERTIES, check_conversions

__all__ = [
    "CONVERSION_PROPERTIES",
    "INVARIANTS",
    "Built",
    "InputStates",
    "assert_absent_stubs",
    "assert_builds",
    "assert_owned",
    "assert_pure",
    "assert_schema_valid",
    "assert_selectors_match",
    "assert_server_rules",
    "assert_stable_names",
    "assert_unique",
    "assert_valid_names",
    "check_builders",
    "check_conversions",
    "check_parent",
    "dns_labels",
    "dns_subdomains",
    "from_schema",
    "label_keys",
    "label_maps",
    "label_values",
    "object_metas",
    "owner_references",
    "quantities",
    "spec_instances",
    "with_inputs",
]
