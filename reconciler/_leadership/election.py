"""Leader election with a ``coordination.k8s.io/v1`` Lease, as client-go's ``leaderelection``.

Several replicas of an operator may run; only the holder of the Lease reconciles, the others keep
their informers warm and take over within the lease duration when the leader dies. Numbers are
DESIGN.md's: a 15 s lease, a 10 s renew deadline, a 2 s retry period. A candidate considers the
lease free when its holder is empty or when the record has not changed for a whole lease duration
*by the candidate's own clock* (it measures the time since it last saw the record change, never
trusts timestamps written by another machine). Updates carry the Lease's ``resourceVersion``, so
two candidates can never both win a round (the writing is ``reconciler._leadership.leases``'; what
to write when is decided here). A leader that cannot renew within the renew deadline
steps down; a leader that stops releases the lease so a standby takes over at once.

The elector keeps the replica's ``WriteFence`` (``reconciler._leadership.fencing``): each
successful renew opens it for ``renew_deadline`` seconds from when the renew request was sent, and
seeing another holder or stepping down closes it, so the runtime's writes stop the moment the lease
may have expired, whatever this elector's thread is doing (a paused process resumes with its fence
past). A replica releases the lease on its way out only while its fence is still valid.

A candidate waiting for the lease logs one INFO line when it starts waiting (naming the holder,
again when the holder changes) and one when it takes over. While it waits it watches its Lease
(an ``Informer`` on that one name): a release (an empty ``holderIdentity``) or a deletion wakes
it at once, so a standby takes a released lease within a round trip, not at its next retry
(issue 31, finding 2: 3.4 s after the leader's SIGTERM). The retry period still bounds the wait
when the watch is down.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from typing import Any

import attrs

from reconciler._base.clocks import Clock, RealClock
from reconciler._base.errors import ApiError, ReconcilerUsageError
from reconciler._cache.informers import Informer
from reconciler._client.protocol import ClusterClient
from reconciler._leadership.fencing import WriteFence
from reconciler._leadership.leases import LEASE_API_VERSION, LEASE_KIND, LeaseWriter

__all__ = ["LeaderElection", "LeaderElector", "LeaseConfig"]

_log = logging.getLogger("optk.leadership")


@attrs.frozen(kw_only=True)
class LeaderElection:
    """Where the Lease lives and the election's timing (seconds).

    ``Operator(leader_election=LeaderElection(namespace="operators"))`` turns election on; an
    empty ``name`` there means ``<operator name>-leader``. A ``LeaderElector`` needs the name.
    """

    namespace: str = "default"
    name: str = ""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __attrs_post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ReconcilerUsageError(
                "leader election needs lease_duration > renew_deadline > retry_period > 0, got "
                f"{self.lease_duration}, {self.renew_deadline}, {self.retry_period}"
            )

    def named(self, default: str) -> LeaderElection:
        """These settings with ``name`` set to ``default`` when it is empty."""
        return self if self.name else attrs.evolve(self, name=default)


LeaseConfig = LeaderElection
"""The earlier name of ``LeaderElection``, kept importable."""


class LeaderElector:
    """Campaigns for a Lease and calls back when leadership starts and stops.

    ``run()`` blocks: it campaigns until elected, calls ``on_started``, renews until it fails or
    ``stop()`` is called, then calls ``on_stopped`` (and releases the lease when stopping).
    """

    def __init__(
        self,
        client: ClusterClient,
        config: LeaderElection,
        *,
        identity: str,
        on_started: Callable[[], None] = lambda: None,
        on_stopped: Callable[[], None] = lambda: None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        fence: WriteFence | None = None,
        watch: bool = True,
    ) -> None:
        if not config.name:
            raise ReconcilerUsageError(
                f"leader election in {config.namespace!r} needs a Lease name"
            )
        self.client = client
        self.config = config
        self.identity = identity
        self.leases = LeaseWriter(client, name=config.name, namespace=config.namespace)
        self._on_started = on_started
        self._on_stopped = on_stopped
        self._clock = clock or RealClock()
        self.fence = fence if fence is not None else WriteFence(
            clock=self._clock, validity=config.renew_deadline, identity=identity
        )
        """Open while this replica may write (``renew_deadline`` after its last renew)."""
        self._rng = rng or random.Random()
        self._cond = threading.Condition()
        self._stopping = False
        self._release_on_stop = True
        self._leading = False
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self.transitions_seen = 0
        self._watch = watch
        self._released = False  # the watch saw the lease released: campaign now
        self._waiting_for = ""  # the holder this candidate last logged it waits for

    @property
    def is_leader(self) -> bool:
        """Whether this candidate currently holds the lease."""
        with self._cond:
            return self._leading

    def stop(self, *, release: bool = True) -> None:
        """Stop campaigning or leading; ``run`` returns, releasing the lease if ``release``.

        ``release=False`` leaves the lease to expire, as a crashed leader would.
        """
        with self._cond:
            self._stopping = True
            self._release_on_stop = release
            self._cond.notify_all()

    def run(self) -> None:
        """Campaign, lead, and return when leadership is lost or ``stop`` was called."""
        if not self._acquire():
            return
        with self._cond:
            self._leading = True
        after = f" (taking over from {self._waiting_for})" if self._waiting_for else ""
        _log.info("%s became the leader of lease %s%s", self.identity, self._where(), after)
        try:
            self._on_started()
            self._renew_loop()
        finally:
            with self._cond:
                self._leading = False
                release = self._stopping and self._release_on_stop
            if release and self.fence.valid():  # else the lease may be another's already
                self._release()
            self.fence.revoke()
            _log.info("%s stopped leading lease %s", self.identity, self._where())
            self._on_stopped()

    # --- phases ------------------------------------------------------------------------------

    def _acquire(self) -> bool:
        watch = self._watch_lease() if self._watch else None
        try:
            while not self._sleep(0):
                if self._try_acquire_or_renew():
                    return True
                jitter = self.config.retry_period * self._rng.random() * 1.2
                if self._sleep(self.config.retry_period + jitter, wakeable=True):
                    return False
            return False
        finally:
            if watch is not None:
                watch.stop()

    def _watch_lease(self) -> Informer:
        """Watch this Lease while campaigning: a release or deletion wakes the wait."""
        informer = Informer(self.client, LEASE_API_VERSION, LEASE_KIND,
                            namespace=self.config.namespace,
                            field_selector=f"metadata.name={self.config.name}",
                            clock=self._clock)

        def seen(event_type: str, old: Any, new: Any) -> None:
            holder = ((new or {}).get("spec") or {}).get("holderIdentity") or ""
            if event_type == "DELETED" or not holder:
                with self._cond:
                    self._released = True
                    self._cond.notify_all()

        informer.add_handler(seen)
        return informer.start()

    def _renew_loop(self) -> None:
        last_renew = self._clock.monotonic()
        while not self._sleep(self.config.retry_period):
            sent = self._clock.monotonic()
            if self._try_acquire_or_renew():
                last_renew = sent
            elif self._clock.monotonic() - last_renew >= self.config.renew_deadline:
                self.fence.revoke()
                _log.warning("%s failed to renew lease %s within %.0fs; stepping down",
                             self.identity, self._where(), self.config.renew_deadline)
                return
            else:
                with self._cond:
                    still = self._leading
                if not still:
                    return

    def _sleep(self, seconds: float, *, wakeable: bool = False) -> bool:
        """Wait ``seconds`` of clock time (less when ``wakeable`` and the lease was seen
        released); whether ``stop`` was called."""
        with self._cond:
            deadline = self._clock.monotonic() + seconds
            while not self._stopping and self._clock.monotonic() < deadline:
                if wakeable and self._released:
                    break
                self._clock.wait(self._cond, deadline - self._clock.monotonic())
            self._released = False
            return self._stopping

    # --- one round ---------------------------------------------------------------------------

    def _try_acquire_or_renew(self) -> bool:
        sent = self._clock.monotonic()  # the fence counts from the request, not the answer
        now_wall = self._clock.time()
        try:
            lease = self.leases.read()
        except ApiError as error:
            _log.warning("reading lease %s failed: %s", self._where(), error)
            return False
        if lease is None:
            return self._create(now_wall, sent)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime"), spec.get("leaseTransitions"))
        now = self._clock.monotonic()
        if record != self._observed:
            self._observed = record
            self._observed_at = now
        duration = float(spec.get("leaseDurationSeconds") or self.config.lease_duration)
        if holder and holder != self.identity and now < self._observed_at + duration:
            self.fence.revoke()  # another holds it: stop writing now, not at the deadline
            if holder != self._waiting_for:
                self._waiting_for = holder
                _log.info("%s is waiting for lease %s, held by %s", self.identity,
                          self._where(), holder)
            return False  # held by a live candidate
        if holder != self.identity:
            self.transitions_seen += 1
        try:  # a released (vacant) lease taken is no transition: only a takeover counts
            updated = self.leases.hold(lease, self.identity, now=now_wall,
                                       duration=int(self.config.lease_duration),
                                       count_vacant=False)
        except ApiError as error:  # a conflict means another candidate won this round
            _log.debug("updating lease %s failed: %s", self._where(), error)
            return False
        updated_spec = updated.get("spec") or {}
        self._observed = (self.identity, updated_spec.get("renewTime"),
                          updated_spec.get("leaseTransitions"))
        self._observed_at = self._clock.monotonic()
        self.fence.renewed(sent)
        return True

    def _create(self, now_wall: float, sent: float) -> bool:
        try:
            self.leases.hold(None, self.identity, now=now_wall,
                             duration=int(self.config.lease_duration))
        except ApiError as error:
            _log.debug("creating lease %s failed: %s", self._where(), error)
            return False
        self._observed_at = self._clock.monotonic()
        self.fence.renewed(sent)
        return True

    def _release(self) -> None:
        """Give the lease up so a standby need not wait for it to expire."""
        try:
            self.leases.release(self.identity, now=self._clock.time(), duration=1)
        except ApiError as error:
            _log.warning("releasing lease %s failed: %s", self._where(), error)

    def _where(self) -> str:
        return f"{self.config.namespace}/{self.config.name}"
