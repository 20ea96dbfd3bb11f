"""The leader gate: whether this runtime stands by, takes over or leads, and losing the lead.

With leader election on, a runtime starts standing by: the events it sees are held (their
parents remembered, not queued: the leader handles them) until it is elected and takes over;
from the takeover on, events are queued. Without election nothing is ever held. Losing the
lead (the elector's ``on_stopped``, or a write the fence refused in a worker) clears the leader
metric and stops the runtime, so that a restart campaigns afresh.

The one piece of state the router, the standby and the workers share: the router asks whether
an event is held (``holds``) and whether a first sight waits for the takeover
(``standing_by``), the standby takes the held events over (``take_over``), the workers step
down through ``lost_leadership``. The runtime (``reconciler._driver.runtime``) builds it before
those three, so none of them asks another (issue 37: a tree). It receives the ``election``
(None without leader election; its lease duration bounds the replay, its name labels the
leader metric), the ``clock``, the ``metrics`` and the ``lifecycle`` (``stopping()``, ``stop()``).
"""

from __future__ import annotations

import logging
import threading

from reconciler._base.clocks import Clock
from reconciler._base.lifecycle import Lifecycle
from reconciler._base.metrics import OperatorMetrics
from reconciler._driver.triggers import ParentKey
from reconciler._leadership.election import LeaderElection

__all__ = ["LeaderGate"]

_log = logging.getLogger("optk.operator")


class LeaderGate:
    """Holds a standby's events until the takeover; steps down when the lead is lost."""

    def __init__(self, election: LeaderElection | None, *, clock: Clock,
                 metrics: OperatorMetrics, lifecycle: Lifecycle) -> None:
        self.election = election
        self._clock = clock
        self._metrics = metrics
        self._lifecycle = lifecycle
        self._lock = threading.Lock()
        self._held: dict[ParentKey, float] = {}
        self._taking_over = False

    @property
    def taking_over(self) -> bool:
        """Whether a takeover started (from then on events are queued, not held)."""
        with self._lock:
            return self._taking_over

    def standing_by(self) -> bool:
        """Whether it campaigns, neither leading nor taking over (a first sight waits for the
        takeover, which queues what is due). A runtime leads only after its takeover."""
        return self.election is not None and not self.taking_over

    def holds(self, key: ParentKey) -> bool:
        """On a standby, remember an event's parent instead of queueing it (the leader handles
        it; ``take_over`` replays the recent ones); whether it was held."""
        if self.election is None:
            return False
        with self._lock:
            if self._taking_over:
                return False
            self._held[key] = self._clock.monotonic()
            return True

    def take_over(self) -> dict[ParentKey, float]:
        """The takeover starts: nothing is held from now on; the held parents, with when (clock
        monotonic) their last event was seen."""
        with self._lock:
            self._taking_over = True
            held, self._held = self._held, {}
        return held

    def replay_horizon(self) -> float:
        """The clock's monotonic time before which a held event is the old leader's: one lease
        duration ago (the old leader handled earlier ones while it renewed)."""
        election = self.election
        return self._clock.monotonic() - (election.lease_duration if election else 0.0)

    def lost_leadership(self) -> None:
        """The elector's ``on_stopped``, and the workers' step down after a fenced write: stop
        the runtime unless it is stopping already."""
        if self.election is not None:
            self._metrics.set_leader(self.election.name, False)
        if not self._lifecycle.stopping():
            _log.error("leadership lost; stopping so that a restart campaigns afresh")
            self._lifecycle.stop_soon()
