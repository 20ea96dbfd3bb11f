"""The guard between the planner and the executor: what people and other writers say about a plan.

Why it exists: ``planning.plan_child`` decides what the toolkit's desired state needs;
people may have said otherwise (a child's ``optk.dev/policy``, its ``optk.dev/ignore-fields``,
the operator's ``drift`` mode and ``ignore_fields``), and another writer may be fighting the
toolkit over a field (``contention``). ``PlanGuard`` is the one hook the executor
(``reconciler._reconcile.reconciling``) calls: ``match_options(live)`` before the match and
``review(plan)`` after it; the parent reconcile asks ``refusal(live)`` which of a child's
annotated pointers were not honoured. It holds no decision of its own: those are in
``policies`` (pure) and ``contention`` (pure, with an injected clock); ``optk plan`` uses a
guard without contention.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from objectmatcher import MatchOption
from reconciler._base.clocks import Clock
from reconciler._base.errors import PolicyAnnotationError
from reconciler._reconcile.contention import Contention, ContentionDetector
from reconciler._reconcile.planning import ChildPlan
from reconciler._reconcile.policies import (
    DriftMode,
    child_policy,
    ignore_options,
    parse_ignore_fields,
    refused_ignore_fields,
    restrict_plan,
)

__all__ = ["PlanGuard"]


class PlanGuard:
    """Restricts each plan to what policies, the drift mode and contention allow."""

    def __init__(self, *, drift: DriftMode = DriftMode.REPAIR,
                 ignore_fields: Collection[str] = (),
                 contention: ContentionDetector | None = None) -> None:
        parse_ignore_fields(",".join(ignore_fields))  # a bad pointer fails at construction
        self.drift = DriftMode(drift)
        self.ignore_fields = tuple(ignore_fields)
        self.contention = contention

    @classmethod
    def of(cls, *, drift: DriftMode, ignore_fields: Collection[str],
           contention: Contention | None, clock: Clock, field_manager: str) -> PlanGuard:
        """The guard of an operator's settings (``Policies(drift=, ignore_fields=,
        contention=)``), its contention detector on ``clock``."""
        return cls(drift=drift, ignore_fields=ignore_fields,
                   contention=None if contention is None else ContentionDetector(
                       contention, clock=clock, field_manager=field_manager))

    @staticmethod
    def contested(guard: PlanGuard | None) -> int:
        """How many children ``guard`` holds back now (0 without one or without contention)."""
        return 0 if guard is None or guard.contention is None else (
            guard.contention.contested_count())

    def match_options(self, live: Mapping[str, Any] | None) -> tuple[MatchOption, ...]:
        """The ignore options of the operator and of the live child's annotation."""
        return ignore_options(live, self.ignore_fields)

    @staticmethod
    def refusal(live: Mapping[str, Any] | None) -> PolicyAnnotationError | None:
        """Why the live child's ``optk.dev/ignore-fields`` is not honoured in full (pointers
        reaching the identity the toolkit keeps: compared and repaired), or None."""
        return refused_ignore_fields(live)

    def refused(self, plan: ChildPlan, *, owner_uid: str | None) -> None:
        """The server refused the write of ``plan`` (as reviewed): contention takes back the
        round it counted (``ContentionDetector.refused``)."""
        if self.contention is not None:
            self.contention.refused(plan, parent_uid=owner_uid or "")

    def review(self, plan: ChildPlan, *, owner_uid: str | None, look: bool = False) -> ChildPlan:
        """``plan`` with the writes a policy, the drift mode or contention hold back held.
        ``look``: a plan that is not executed (``ContentionDetector.review``)."""
        plan = restrict_plan(plan, policy=child_policy(plan.live), drift=self.drift)
        if self.contention is not None and not plan.held:
            plan = self.contention.review(plan, parent_uid=owner_uid or "", look=look)
        return plan
