"""The reconcile's decisions in pure code, and the client wrapper that counts its requests.

``plan_child`` decides what one child needs (a ``ChildPlan``: create, patch, recreate, delete or
skip, with the body); ``is_owned`` is its ownership rule; ``DEFAULT_RECREATE_KINDS`` the kinds
recreated on an immutable-field change when recreation is allowed; ``parent_conditions`` computes a
parent's status conditions from its children's results (``DEFAULT_HEALTH_CHECKS``: the per-kind
checks ``Readiness`` starts from). ``CountingClient`` wraps a client and
records each request as an ``ApiCall`` (what ``ReconcileResult.api_calls`` holds). Dry runs and
``optk plan`` are plans that are not executed. This public module only re-exports (the
implementation is private); see ``docs/reconciler.md``.
"""

from __future__ import annotations

from reconciler._client.counting import ApiCall, CountingClient
from reconciler._reconcile.conditions import parent_conditions
from reconciler._reconcile.planning import ChildPlan, PlanAction, is_owned, plan_child
from reconciler._reconcile.readiness import DEFAULT_HEALTH_CHECKS
from reconciler._reconcile.reconciling import DEFAULT_RECREATE_KINDS

__all__ = [
    "DEFAULT_HEALTH_CHECKS",
    "DEFAULT_RECREATE_KINDS",
    "ApiCall",
    "ChildPlan",
    "CountingClient",
    "PlanAction",
    "is_owned",
    "parent_conditions",
    "plan_child",
]
