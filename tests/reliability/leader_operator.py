"""The Thanos example operator with leader election on, for the failover tests.

``optk run`` has no flag or environment variable that turns leader election on (it is an
``Operator`` field), so this module wraps ``examples.thanos.operator:operator`` with
``attrs.evolve`` and public names only: ``leader_election=LeaderElection(...)`` with a short lease
(``OPTK_TEST_LEASE_SECONDS``, default 4 s; renew deadline 3/4 of it, retry period 1/8) so a
takeover is quick. Run it as
``python -m reconciler run tests.reliability.leader_operator:operator``.
"""

from __future__ import annotations

import os

import attrs

from examples.thanos.operator import operator as thanos_operator
from reconciler import LeaderElection

LEASE_SECONDS = float(os.environ.get("OPTK_TEST_LEASE_SECONDS", "4"))
"""The lease duration the replicas use."""

LEADER_LEASE = f"{thanos_operator.name}-leader"
"""The election Lease's name (in ``default``)."""

operator = attrs.evolve(thanos_operator, leader_election=LeaderElection(
    namespace="default", lease_duration=LEASE_SECONDS, renew_deadline=LEASE_SECONDS * 0.75,
    retry_period=LEASE_SECONDS / 8,
))
"""The example operator, elected."""
