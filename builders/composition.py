"""The machinery under composition: running one builder, readable names, ABSENT stubs.

``builders.run_builders`` and the composition helpers of the facade are what an operator calls;
these are for tools built on top (the reconciler evaluates builders one by one with
:func:`evaluate`; logs use :func:`builder_name` and :func:`describe_parent`). This public module
only re-exports; see ``docs/builders.md``.
"""

from __future__ import annotations

from builders._compose import absent_stub, builder_name, describe_parent, evaluate

__all__ = [
    "absent_stub",
    "builder_name",
    "describe_parent",
    "evaluate",
]
