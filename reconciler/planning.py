"""The reconcile's decisions in pure code, and the client wrapper that counts its requests.

``plan_child`` decides what one child needs (a ``ChildPlan``: create, patch, recreate, delete or
skip, with the body); ``is_owned`` is its ownership rule; ``DEFAULT_RECREATE_KINDS`` the kinds
recreated on an immutable-field change when recreation is allowed; ``parent_conditions`` computes a
parent's status conditions from its children's results (``DEFAULT_HEALTH_CHECKS``: the per-kind
checks ``Readiness`` starts from). ``CountingClient`` wraps a client and
records each request as an ``ApiCall`` (what ``ReconcileResult.api_calls`` holds). Dry runs and
``optk plan`` are plans that are not executed. What people say about a plan (docs/driver.md,
"Pause, policies, drift and contention"): the annotations ``PAUSED_ANNOTATION``
(``optk.dev/paused``), ``POLICY_ANNOTATION`` (``optk.dev/policy``, a ``ChildPolicy``) and
``IGNORE_FIELDS_ANNOTATION`` (``optk.dev/ignore-fields``), the ``DriftMode`` of
``Policies(drift=...)``, ``restrict_plan`` (a plan restricted to what a policy allows) and
``PolicyAnnotationError`` (an annotation that cannot be read). This public module only
re-exports (the implementation is private); see ``docs/reconciler.md``.
"""

from __future__ import annotations

from reconciler._base.errors import PolicyAnnotationError
from reconciler._client.counting import ApiCall, CountingClient
from reconciler._reconcile.conditions import parent_conditions
from reconciler._reconcile.planning import ChildPlan, PlanAction, is_owned, plan_child
from reconciler._reconcile.policies import (
    IGNORE_FIELDS_ANNOTATION,
    PAUSED_ANNOTATION,
    POLICY_ANNOTATION,
    ChildPolicy,
    DriftMode,
    restrict_plan,
)
from reconciler._reconcile.readiness import DEFAULT_HEALTH_CHECKS
from reconciler._reconcile.reconciling import DEFAULT_RECREATE_KINDS

__all__ = [
    "DEFAULT_HEALTH_CHECKS",
    "DEFAULT_RECREATE_KINDS",
    "IGNORE_FIELDS_ANNOTATION",
    "PAUSED_ANNOTATION",
    "POLICY_ANNOTATION",
    "ApiCall",
    "ChildPlan",
    "ChildPolicy",
    "CountingClient",
    "DriftMode",
    "PlanAction",
    "PolicyAnnotationError",
    "is_owned",
    "parent_conditions",
    "plan_child",
    "restrict_plan",
]
