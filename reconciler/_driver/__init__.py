"""The driver: the Operator value, triggers, resync schedule and loop, routing, workers, settling,
standby, upgrades, the runtime (the one composition root) and the process shell.

Modules: ``process`` (the one process shell of ``optk run`` and ``Operator.run``: logging,
connection and ``/version`` probe, heap freeze, signals), ``deployed`` (what
``--leader-elect``/``--lease-namespace``/``--watch-namespace`` change of the ``Operator``), ``heap``
(``HeapSettler``), ``runtime`` (``OperatorRuntime``, the one composition root), ``routing``
(informer events to the queue), ``workers`` (the worker pool: a reconcile step and a settle step; a
spare for each worker stuck on one key), ``settling`` (the pure policy of what follows a reconcile),
``standby`` (standby, takeover, warm informers, drift at start and when a kind lists again),
``upgrades`` (a new operator version reconciles every parent), ``rollouts`` (``RolloutRunner``: a
new version reaches the parents in batches, its record in a Lease beside the heartbeat, the gate the
workers ask), ``rollout_plan`` (the pure rollout rules: order, batches, consent, judging a batch,
resume and abort), ``serving`` (the health server's deferred start), ``resync_loop`` (the resync
timer and heartbeat), ``stats`` (what the runtime did), ``liveness`` (``ProgressWatch``: what
``/healthz`` checks, informer progress and loop threads), ``operators`` (the ``Operator``
value), ``hooks`` (``StartContext``: what an ``on_start`` hook receives),
``parts`` (``Triggering``, ``Telemetry``: what several parts share), ``drift`` (the drift look:
would a reconcile write a child, from the caches), ``leading`` (the leader gate: standing by, taking
over, losing the lead), ``settings`` (its settings grouped by concept: ``Policies``, ``Applying``,
``Watching``, ``Serving``, ``Reporting``), ``triggers`` (pure trigger rules), ``resyncs`` (the
periodic schedule and policy), ``activation`` (``watch_served_kinds``: parents waiting for a kind
are reconciled when a CRD serves it), ``event_sender`` (``EventSender``: the reconciles' Events
queued and sent from a thread of their own, off the workers' path). Declared inputs are
``reconciler._cache.inputs``.

Private: the public names are re-exported by ``reconciler`` and its public
modules.
"""
