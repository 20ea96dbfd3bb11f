"""The driver: the Operator value, triggers, resync schedule and loop, routing, workers, settling,
standby, upgrades, the runtime (the one composition root) and the process shell.

Private: the public names are re-exported by ``reconciler`` and its public
modules."""
