"""The health of any object, kstatus-compatible, and health rules of one's own (public face).

:func:`health_of` says whether an object is ``Current``, ``InProgress``, ``Failed`` or
``Terminating`` by the rules of kstatus (the built-in workloads, Jobs, Pods, PVCs, Services, CRDs,
PDBs, and any object with ``Ready``/``Reconciling``/``Stalled`` conditions and
``observedGeneration``); a :data:`HealthRule` is a pure function of one's own, and
:func:`jsonpath_rule` makes one from a JSONPath expression. ``reconciler``'s ``Readiness`` decides
the parent's ``Ready`` condition with them. See docs/builders.md, section "Health".
"""

from __future__ import annotations

from builders._health import SCHEDULE_WINDOW, Health, HealthStatus, health_of
from builders._health_rules import HealthRule, as_health, jsonpath_rule

__all__ = [
    "SCHEDULE_WINDOW",
    "Health",
    "HealthRule",
    "HealthStatus",
    "as_health",
    "health_of",
    "jsonpath_rule",
]
