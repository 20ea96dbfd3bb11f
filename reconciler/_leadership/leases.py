"""The one writer of ``coordination.k8s.io/v1`` Leases.

Three parts of the driver keep a record in a Lease: leader election
(``reconciler._leadership.election``), each shard's membership
(``reconciler._sharding.shards.ShardLease``) and the resync heartbeat
(``reconciler._driver.resync_loop.HeartbeatStore``). They decide differently when and what to
write, but the writing is the same and easy to get subtly wrong, so it lives here once:

- a read answers ``None`` for a missing Lease (absence is a state of the record, not an error);
- a missing Lease is created; an existing one is replaced (PUT) with the new fields merged over
  the Lease as it was read, so its ``metadata.resourceVersion`` is the precondition and a change
  someone else made in between is refused (409, ``ConflictError``), never overwritten;
- the ``MicroTime`` fields (``acquireTime``, ``renewTime``) are formatted by
``reconciler._base.times``
  from the caller's clock; a change of holder sets ``acquireTime`` and counts a transition in
  ``leaseTransitions`` (whether taking a released, vacant Lease counts is the caller's word:
  leader election says no, as a release is no takeover; shard Leases say yes).

API errors propagate as ``reconciler.ApiError``: whether a failed write matters (a lost round of
an election, a missed heartbeat) is the caller's decision.

``LeaseHold`` is the reading side for those outside the election (``optk uninstall``): who holds
a Lease, when it was last renewed, and for how long that counts (``leader_hold``: the Lease's own
``leaseDurationSeconds``; the heartbeat's reading is ``reconciler._driver.resync_loop``'s).

(``ShardLease.renew``/``release`` still spell the same writes out themselves: ``_shards`` was
being edited elsewhere when this module was made; ``hold(..., count_vacant=True)`` and
``release`` with ``labels`` on the writer are exactly what they do.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from reconciler._base.errors import NotFoundError
from reconciler._base.times import format_micro_time, parse_time
from reconciler._client.protocol import ClusterClient, KubeObject

__all__ = ["LEASE_API_VERSION", "LEASE_KIND", "LeaseHold", "LeaseWriter", "holder_record",
           "leader_hold"]

LEASE_API_VERSION = "coordination.k8s.io/v1"
LEASE_KIND = "Lease"


def holder_record(
    holder: str, renew_time: float, *, duration: int | None = None,
) -> dict[str, Any]:
    """The spec fields saying that ``holder`` (empty: nobody) renewed at ``renew_time`` (epoch
    seconds), and for how long the record holds (``leaseDurationSeconds``) when given."""
    record: dict[str, Any] = {"holderIdentity": holder, "renewTime": format_micro_time(renew_time)}
    if duration is not None:
        record["leaseDurationSeconds"] = duration
    return record


@attrs.frozen(kw_only=True)
class LeaseHold:
    """Who holds the Lease ``where`` (empty: nobody, it was released), when the record was last
    renewed (epoch seconds, the writer's clock) and for how long after that it counts."""

    where: str
    holder: str
    renewed: float
    valid_for: float

    def age(self, now: float) -> float:
        """Seconds since the last renewal at ``now`` (negative when the writer's clock is ahead)."""
        return now - self.renewed

    def fresh(self, now: float) -> bool:
        """Whether someone holds the Lease and renewed it less than ``valid_for`` ago."""
        return bool(self.holder) and self.age(now) < self.valid_for


def leader_hold(lease: KubeObject, *, default_duration: float) -> LeaseHold | None:
    """The hold an election Lease records (``holderIdentity``, ``renewTime``, and
    ``leaseDurationSeconds``, else ``default_duration``); ``None`` when it was never renewed."""
    spec = lease.get("spec") or {}
    renewed = parse_time(spec.get("renewTime"))
    if renewed is None:
        return None
    meta = lease.get("metadata") or {}
    duration = spec.get("leaseDurationSeconds")
    return LeaseHold(where=f"{meta.get('namespace')}/{meta.get('name')}",
                     holder=str(spec.get("holderIdentity") or ""), renewed=renewed,
                     valid_for=float(duration) if duration else default_duration)


def _taken_over(
    lease: KubeObject, identity: str, now: float, *, count_vacant: bool = True,
) -> dict[str, Any]:
    """The spec fields that change when ``identity`` takes ``lease`` over: none when it holds it
    already; else ``acquireTime`` (``now``) and ``leaseTransitions`` one more than before (or as
    before, for a vacant Lease when ``count_vacant`` is false)."""
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    if holder == identity:
        return {}
    counted = 1 if holder or count_vacant else 0
    return {"acquireTime": format_micro_time(now),
            "leaseTransitions": int(spec.get("leaseTransitions") or 0) + counted}


class LeaseWriter:
    """Reads, creates and replaces the Lease ``namespace/name``.

    ``labels`` are set when the writer creates the Lease (and left as they are afterwards).
    """

    def __init__(
        self, client: ClusterClient, *, name: str, namespace: str,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.client = client
        self.name = name
        self.namespace = namespace
        self.labels = dict(labels or {})

    @property
    def where(self) -> str:
        """``namespace/name``, for messages."""
        return f"{self.namespace}/{self.name}"

    def read(self) -> dict[str, Any] | None:
        """The Lease as the server has it, or ``None`` when there is none."""
        try:
            return self.client.get(LEASE_API_VERSION, LEASE_KIND, self.name,
                                   namespace=self.namespace)
        except NotFoundError:
            return None

    def create(
        self, spec: Mapping[str, Any], *, annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Create the Lease with ``spec`` (``AlreadyExistsError`` when another writer was first)."""
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if self.labels:
            metadata["labels"] = dict(self.labels)
        if annotations is not None:
            metadata["annotations"] = dict(annotations)
        return self.client.create({
            "apiVersion": LEASE_API_VERSION, "kind": LEASE_KIND,
            "metadata": metadata, "spec": dict(spec),
        })

    def replace(
        self, lease: KubeObject, spec: Mapping[str, Any], *,
        annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Replace ``lease`` (as read) with ``spec`` merged over its spec and ``annotations`` over
        its annotations; ``ConflictError`` when it changed since it was read."""
        new: dict[str, Any] = {**lease, "spec": {**(lease.get("spec") or {}), **spec}}
        if annotations is not None:
            metadata = dict(lease.get("metadata") or {})
            metadata["annotations"] = {**(metadata.get("annotations") or {}), **annotations}
            new["metadata"] = metadata
        return self.client.replace(new)

    def put(
        self, spec: Mapping[str, Any], *, annotations: Mapping[str, str] | None = None,
        over: KubeObject | None = None,
    ) -> dict[str, Any]:
        """Write ``spec`` (and ``annotations``) whatever the Lease holds: over ``over`` (the
        version last written or read, so no request to read it again) or over what a read finds,
        creating the Lease when there is none."""
        lease = over if over is not None else self.read()
        if lease is None:
            return self.create(spec, annotations=annotations)
        return self.replace(lease, spec, annotations=annotations)

    def hold(
        self, lease: KubeObject | None, identity: str, *, now: float, duration: int,
        count_vacant: bool = True,
    ) -> dict[str, Any]:
        """Write ``identity`` as the holder at ``now``: create the Lease (acquired now, no
        transitions yet) when ``lease`` is ``None``, else replace ``lease`` (as the caller read
        it). Renewing keeps ``acquireTime``; taking the Lease from another holder sets it to now
        and counts one more ``leaseTransitions``, and so does taking a vacant (released) Lease
        unless ``count_vacant`` is false."""
        record = holder_record(identity, now, duration=duration)
        if lease is None:
            return self.create({**record, "acquireTime": format_micro_time(now),
                                "leaseTransitions": 0})
        return self.replace(lease, {**record, **_taken_over(lease, identity, now,
                                                           count_vacant=count_vacant)})

    def release(self, identity: str, *, now: float, duration: int | None = None) -> bool:
        """Empty the holder (renewed at ``now``; ``duration`` shortens the record) so another
        candidate need not wait for the record to expire; only when ``identity`` holds the Lease.
        Whether it was released."""
        lease = self.read()
        if lease is None or (lease.get("spec") or {}).get("holderIdentity") != identity:
            return False
        self.replace(lease, holder_record("", now, duration=duration))
        return True

