"""A Hypothesis state machine over joins, leaves, crashes, partitions and parent creations.

A pure model of the protocol, driven by the real decisions of ``reconciler._sharding.decisions``:
shard Leases renewed (or not) in model time, the assigner deciding per parent with membership judged
by its own clock, owners starting and finishing reconciles, and acknowledging drains only when
no reconcile of the parent is in flight. At every step no parent may have two replicas able to
write it; at the end, once the survivors have renewed and the assigner has run to a fixpoint,
every parent has exactly one live owner, its rendezvous shard among the live ones.
"""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from reconciler._sharding.decisions import (
    DRAIN_LABEL,
    SHARD_LABEL,
    Decision,
    Member,
    decide,
    live_shards,
    must_release,
    parent_hash_key,
    rendezvous_shard,
    shard_of,
)

LEASE = 10.0
RENEW_DEADLINE = 7.0
DRAIN_TIMEOUT = 30.0
IDS = ["r0", "r1", "r2"]


@attrs.define
class Replica:
    """A replica process: running, crashed, or partitioned (it cannot renew its Lease nor see
    changes, but its writes may still get through: the worst case)."""

    name: str
    last_renew: float
    version: int = 0
    crashed: bool = False
    partitioned: bool = False
    released: bool = False
    in_flight: set[str] = attrs.field(factory=set)
    stale: dict[str, str | None] | None = None
    """A partitioned replica's last view of the owners (its watches are dead too)."""

    def owner_seen(self, parent: dict[str, Any]) -> str | None:
        """The owner of ``parent`` as this replica sees it."""
        if self.stale is not None:
            return self.stale.get(parent["metadata"]["name"])
        return shard_of(parent)

    def active(self, now: float) -> bool:
        """Whether it still works: not crashed, not released, and renewed within the renew
        deadline (a replica that could not renew for that long stops itself, partitioned or
        merely slow)."""
        if self.crashed or self.released:
            return False
        return now - self.last_renew < RENEW_DEADLINE


class ShardingModel(RuleBasedStateMachine):
    """The protocol over model time; the assigner's view of Leases is updated as it observes."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.replicas: dict[str, Replica] = {}
        self.parents: dict[str, dict[str, Any]] = {}
        self.members: dict[str, Member] = {}
        self.drains: dict[str, float] = {}

    @initialize(count=st.integers(1, 3), parents=st.integers(0, 6))
    def start(self, count: int, parents: int) -> None:
        """Replicas starting together, and some parents."""
        for name in IDS[:count]:
            self.join(name)
        for index in range(parents):
            self.create(index)
        self.assign()

    # --- the world ---------------------------------------------------------------------------

    def observe(self) -> None:
        """The assigner lists the Leases (a record that changed is seen as changing now)."""
        for r in self.replicas.values():
            holder = "" if r.released else r.name
            record = (holder, r.version)
            old = self.members.get(r.name)
            at = old.observed_at if old is not None and old.record == record else self.now
            self.members[r.name] = Member(shard=r.name, holder=holder, record=record,
                                          observed_at=at, duration=LEASE)

    def writers(self, name: str) -> set[str]:
        """Replicas that may write this parent now: its active owner, or an active replica
        with a reconcile of it in flight."""
        parent = self.parents[name]
        return {r.name for r in self.replicas.values() if r.active(self.now)
                and (r.owner_seen(parent) == r.name or name in r.in_flight)}

    @rule(name=st.sampled_from(IDS))
    def join(self, name: str) -> None:
        old = self.replicas.get(name)
        if old is not None and (old.active(self.now) or old.partitioned):
            return  # running already, or cut off from the server
        self.replicas[name] = Replica(name=name, last_renew=self.now,
                                      version=(old.version + 1) if old else 0)

    @rule(name=st.sampled_from(IDS))
    def renew(self, name: str) -> None:
        r = self.replicas.get(name)
        if r is not None and r.active(self.now) and not r.partitioned:
            r.last_renew = self.now
            r.version += 1

    @rule()
    def renew_all(self) -> None:
        """Every replica that can renews (the usual case, every renew period)."""
        for name in self.replicas:
            self.renew(name)

    @rule(seconds=st.sampled_from([1.0, 3.0, 5.0]))
    def tick(self, seconds: float) -> None:
        """Time passes as usual: renewals, then an assigner round and acknowledgements."""
        self.advance(seconds)
        self.renew_all()
        self.assign()
        self.acknowledge()

    @rule(name=st.sampled_from(IDS))
    def leave(self, name: str) -> None:
        """Graceful stop: in-flight reconciles finish, then the Lease is released."""
        r = self.replicas.get(name)
        if r is not None and r.active(self.now) and not r.partitioned:
            r.in_flight.clear()
            r.released = True
            r.version += 1

    @rule(name=st.sampled_from(IDS))
    def crash(self, name: str) -> None:
        r = self.replicas.get(name)
        if r is not None:
            r.crashed = True
            r.in_flight.clear()

    @rule(name=st.sampled_from(IDS))
    def partition(self, name: str) -> None:
        r = self.replicas.get(name)
        if r is not None and not r.crashed and not r.partitioned:
            r.partitioned = True
            r.stale = {n: shard_of(p) for n, p in self.parents.items()}

    @rule(index=st.integers(0, 9))
    def create(self, index: int) -> None:
        self.parents.setdefault(f"p{index}", {"metadata": {"name": f"p{index}",
                                                          "namespace": "ns", "labels": {}}})

    @rule(seconds=st.sampled_from([0.5, 2.0, 5.0, 11.0]))
    def advance(self, seconds: float) -> None:
        self.now += seconds
        for r in self.replicas.values():
            if not r.active(self.now):
                r.in_flight.clear()  # a replica that stopped itself runs nothing any more

    # --- owners ------------------------------------------------------------------------------

    @precondition(lambda self: self.parents)
    @rule(data=st.data())
    def start_reconcile(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.parents)))
        owner = shard_of(self.parents[name])
        r = self.replicas.get(owner or "")
        if r is not None and r.active(self.now) and not must_release(self.parents[name], r.name):
            r.in_flight.add(name)

    @rule()
    def finish_reconciles(self) -> None:
        for r in self.replicas.values():
            r.in_flight.clear()

    @rule()
    def acknowledge(self) -> None:
        for name, parent in self.parents.items():
            r = self.replicas.get(shard_of(parent) or "")
            if (r is not None and r.active(self.now) and must_release(parent, r.name)
                    and name not in r.in_flight and not r.partitioned):
                labels = parent["metadata"]["labels"]
                labels.pop(SHARD_LABEL, None)
                labels.pop(DRAIN_LABEL, None)

    # --- the assigner ------------------------------------------------------------------------

    @rule()
    def assign(self) -> None:
        self.observe()
        live = live_shards(self.members, now=self.now)
        for name, parent in self.parents.items():
            verdict = decide(parent, live=live, drain_started=self.drains.get(name),
                             now=self.now, drain_timeout=DRAIN_TIMEOUT)
            labels = parent["metadata"]["labels"]
            if verdict.decision is Decision.DRAIN:
                labels[DRAIN_LABEL] = "true"
                self.drains[name] = self.now
            elif verdict.decision in (Decision.ASSIGN, Decision.FORCE):
                assert verdict.target is not None
                labels[SHARD_LABEL] = verdict.target
                labels.pop(DRAIN_LABEL, None)
                self.drains.pop(name, None)
            elif verdict.decision is Decision.WAIT:
                self.drains.setdefault(name, self.now)

    # --- properties --------------------------------------------------------------------------

    @invariant()
    def never_two_writers(self) -> None:
        for name in self.parents:
            assert len(self.writers(name)) <= 1, (name, self.writers(name), self.now)

    def teardown(self) -> None:
        """Let the survivors renew, finish and acknowledge, the assigner run to a fixpoint:
        every parent ends with exactly one live owner, its rendezvous shard."""
        for r in self.replicas.values():
            if not r.active(self.now) or r.partitioned:
                r.crashed = True  # stopped itself, or cut off for good: gone
        for _ in range(8):
            self.now += LEASE / 2
            for name in self.replicas:
                self.renew(name)
            self.finish_reconciles()
            self.assign()
            self.acknowledge()
            self.assign()
        live = {n for n, r in self.replicas.items() if r.active(self.now)}
        for name, parent in self.parents.items():
            if not live:
                continue
            owners = {r for r in live if shard_of(parent) == r}
            assert len(owners) == 1, (name, parent, live)
            assert shard_of(parent) == rendezvous_shard(parent_hash_key(parent), sorted(live))
            assert DRAIN_LABEL not in parent["metadata"]["labels"]


TestShardingModel = ShardingModel.TestCase
TestShardingModel.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


def test_a_partitioned_owner_stops_before_the_assigner_moves_its_parents() -> None:
    """The scenario the renew deadline exists for, spelled out: the owner cannot renew but its
    writes still pass; it must have stopped by the time its Lease is a duration old."""
    model = ShardingModel()
    model.join("r0")
    model.join("r1")
    model.create(0)
    model.assign()
    owner = shard_of(model.parents["p0"])
    other = "r1" if owner == "r0" else "r0"
    model.partition(str(owner))
    model.advance(5.0)
    model.renew(other)
    model.advance(6.0)
    model.renew(other)
    model.assign()
    assert shard_of(model.parents["p0"]) == other
    assert model.writers("p0") == {other}
    model.never_two_writers()
