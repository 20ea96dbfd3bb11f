"""Reconciling one parent: pure plans and conditions, the resource and parent reconcilers,
readiness, memos, finalizers and cleanup, Events, installs.

Modules: ``planning`` (pure ``plan_child``), ``reconciling`` (``ResourceReconciler``, the thin
executor), ``declared`` (pure ``declared_children``: the one evaluation of a parent's builders),
``parents`` (``ParentReconciler``), ``parent_settings`` (``ParentSettings``), ``resource_settings``
(``ResourceSettings``), ``conditions`` (pure conditions and Events;
``Reconciling``/``Stalled`` for kstatus), ``failures`` (pure: a failing build or builder said once,
with the user's file and line, or waiting for its input), ``custom_conditions`` (pure: the
condition types a status function may add, checked), ``readiness`` (``Ready`` from the children's
health, ``builders.health``), ``memo`` (build, resync and status memos, ``RecentKeys``),
``finalizing`` (pure cleanup decisions), ``cleanups`` (their executor), ``changelog`` (the one INFO
line per reconcile), ``events`` (``EventRecorder``), ``install`` (``Operator(install=...)``:
``install_all`` applies it and waits until the CRDs' kinds are served), ``ordering`` (pure: which
children a reconcile writes now and which wait for their dependencies, teardown in reverse),
``waits`` (what parents wait on, and which child events wake them), ``applying`` (pure: the write
strategies ``ThreeWayMerge``/``ServerSideApply``, whether to apply, the migrations to and from
server-side apply), ``policies`` (pure: pauses, per-object policies, ignore-field annotations, the
drift mode), ``contention`` (pure with an injected clock: a field another writer keeps changing
back, the backoff), ``guard`` (``PlanGuard``: the executor's one hook applying both to each plan),
``sharing`` (pure: children several parents build, ``builders.shared``: the record of the parents
on the object, joining, leaving, the last one deletes), ``interventions`` (pure: the
``Paused``/``Drifted``/``Contested`` conditions and Events), ``placement`` (children placed in
other clusters, ``builders.placed``: applied through their cluster's client, the parent's
inventory, pruning, teardown; issue 41).

Private: the public names are re-exported by ``reconciler`` and its public
modules.
"""
