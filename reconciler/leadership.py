"""Leader election on a ``coordination.k8s.io/v1`` Lease: the settings (``LeaderElection``, also
on the ``reconciler`` facade), the resolved Lease configuration and the elector that holds it.

This public module only re-exports (the implementation is private); see ``docs/driver.md``.
"""

from __future__ import annotations

from reconciler._leadership.election import LeaderElection, LeaderElector, LeaseConfig

__all__ = ["LeaderElection", "LeaderElector", "LeaseConfig"]
