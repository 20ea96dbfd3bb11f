"""The machinery under composition: running one builder, readable names, ABSENT stubs.

``builders.run_builders`` and the composition helpers of the facade are what an operator calls;
these are for tools built on top (the reconciler evaluates builders one by one with
:func:`evaluate`; logs use :func:`builder_name` and :func:`describe_parent`; the reconciler
finds a placed child's cluster with :func:`placement_of` and orders children by
:func:`dependency_graph` and :func:`dependencies_of`). This public module only re-exports; see
``docs/builders.md``.
"""

from __future__ import annotations

from builders._compose import (
    absent_stub,
    builder_name,
    describe_parent,
    evaluate,
    placement_of,
)
from builders._dependencies import (
    Dependencies,
    DependencyGraph,
    GatedBuilder,
    Observed,
    Precondition,
    ReadyRule,
    dependencies_of,
    dependency_graph,
    rule_verdict,
)
from builders._errors import DependencyCycleError, DependencyError

__all__ = [
    "Dependencies",
    "DependencyCycleError",
    "DependencyError",
    "DependencyGraph",
    "GatedBuilder",
    "Observed",
    "Precondition",
    "ReadyRule",
    "absent_stub",
    "builder_name",
    "dependencies_of",
    "dependency_graph",
    "describe_parent",
    "evaluate",
    "placement_of",
    "rule_verdict",
]
