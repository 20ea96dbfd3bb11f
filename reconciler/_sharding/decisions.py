"""Sharding decisions: which replica owns which parent, and when a parent may move.

Issue 16, after the published controller-sharding design (one Lease per replica, a sharder that
labels objects with their shard, a drain handshake before a move). Everything here is a pure
function of values: the ``Sharding`` settings, membership from the shard Leases as observed by
the assigner's own clock (``observe_members``, ``live_shards``), rendezvous hashing
(``rendezvous_shard``: adding or removing one of N shards moves about 1/N of the parents), the
assigner's decision for one parent (``decide``: assign, drain, force a stuck drain, or nothing),
when the passing of time alone changes a decision (``next_change``: the assigner sleeps until
the next Lease expiry), what the assigner keeps of a parent (``metadata_view``), the owner's
side of the handshake (``must_release``) and the label patches, among them the conditional
relabelling of a moved-in parent's child (``adopt_patch``). The I/O shell that renews the Leases,
runs the assigner and acknowledges drains is ``reconciler._sharding.shards``.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from builders.names import MANAGED_BY_LABEL, OWNER_UID_LABEL
from reconciler._base.errors import ReconcilerUsageError
from reconciler._reconcile.policies import patch_allowed

__all__ = [
    "DRAIN_LABEL",
    "RING_LABEL",
    "SHARD_ENV",
    "SHARD_LABEL",
    "Assignment",
    "Decision",
    "Member",
    "Sharding",
    "adopt_patch",
    "assign_patch",
    "child_labels",
    "decide",
    "drain_patch",
    "draining",
    "lease_name",
    "live_shards",
    "metadata_view",
    "must_release",
    "next_change",
    "observe_members",
    "parent_hash_key",
    "release_patch",
    "rendezvous_shard",
    "shard_child_labels",
    "shard_of",
]

SHARD_LABEL = "optk.dev/shard"
"""The label on a parent (and its children) naming the shard that owns it."""
DRAIN_LABEL = "optk.dev/drain"
"""The label the assigner sets on a parent to ask its owner to let it go (value ``"true"``)."""
RING_LABEL = "optk.dev/shard-ring"
"""The label on every shard Lease naming its operator (the assigner lists Leases by it)."""
SHARD_ENV = "OPTK_SHARD_ID"
"""The environment variable giving a replica its shard id when ``Sharding.shard_id`` is empty."""

_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")


@attrs.frozen(kw_only=True)
class Sharding:
    """Scale-out across replicas: ``Operator(..., sharding=Sharding(namespace="operators"))``.

    Each replica holds the Lease ``<operator>-shard-<shard_id>`` in ``namespace`` and renews it
    every ``renew_period`` seconds; a replica that cannot renew within ``renew_deadline`` stops
    (as a leader that cannot renew steps down), and the assigner treats a Lease unchanged for
    ``lease_duration`` (by its own clock) as gone. ``shard_id`` names the replica (empty: the
    ``OPTK_SHARD_ID`` environment variable, else the runtime's identity); it is a label value.
    ``drain_timeout`` bounds a drain: a live owner that has not acknowledged by then loses the
    parent anyway. ``replicas_hint``: at start, the assigner waits up to one lease duration for
    that many shards before assigning, so replicas starting together do not move parents twice.
    """

    shard_id: str = ""
    namespace: str = "default"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    renew_period: float = 2.0
    drain_timeout: float = 60.0
    replicas_hint: int | None = None

    def __attrs_post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.renew_period > 0:
            raise ReconcilerUsageError(
                "sharding needs lease_duration > renew_deadline > renew_period > 0, got "
                f"{self.lease_duration}, {self.renew_deadline}, {self.renew_period}"
            )
        if self.shard_id and not _LABEL_VALUE.match(self.shard_id):
            raise ReconcilerUsageError(
                f"sharding: shard_id must be a label value, got {self.shard_id!r}")
        if self.drain_timeout <= 0:
            raise ReconcilerUsageError(
                f"sharding: drain_timeout must be > 0, got {self.drain_timeout}")
        if self.replicas_hint is not None and self.replicas_hint < 1:
            raise ReconcilerUsageError(
                f"sharding: replicas_hint must be >= 1, got {self.replicas_hint}")

    def resolve_id(self, environ: Mapping[str, str], identity: str) -> str:
        """This replica's shard id: ``shard_id``, else ``$OPTK_SHARD_ID``, else ``identity``
        (cut to a label value)."""
        chosen = self.shard_id or environ.get(SHARD_ENV, "") or identity
        value = re.sub(r"[^A-Za-z0-9._-]", "-", chosen)[:63].strip("-._")
        if not value or not _LABEL_VALUE.match(value):
            raise ReconcilerUsageError(
                f"sharding: cannot make a shard id (a label value) of {chosen!r}")
        return value


def lease_name(operator: str, shard: str) -> str:
    """The name of a shard's Lease: ``<operator>-shard-<shard>``."""
    return f"{operator}-shard-{shard}"


# --- membership ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Member:
    """A shard Lease as the assigner saw it: its record, and when (the assigner's monotonic
    clock) that record last changed. Expiry is judged by that local time, never by the
    ``renewTime`` another machine wrote, so clock skew between replicas does not matter."""

    shard: str
    holder: str
    record: tuple[Any, ...]
    observed_at: float
    duration: float

    def live(self, now: float) -> bool:
        """Whether the shard holds its Lease: a holder, and a record renewed within a duration."""
        return bool(self.holder) and now < self.observed_at + self.duration


def observe_members(
    previous: Mapping[str, Member], leases: Iterable[Mapping[str, Any]], *, now: float,
    default_duration: float,
) -> dict[str, Member]:
    """Fold the shard Leases listed now into the membership table: a record that did not change
    keeps the time it was first seen; a Lease that disappeared is dropped (gone)."""
    members: dict[str, Member] = {}
    for lease in leases:
        meta = lease.get("metadata") or {}
        spec = lease.get("spec") or {}
        shard = str((meta.get("labels") or {}).get(SHARD_LABEL) or "")
        if not shard:
            continue
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, spec.get("renewTime"), meta.get("resourceVersion"))
        duration = float(spec.get("leaseDurationSeconds") or default_duration)
        old = previous.get(shard)
        observed_at = old.observed_at if old is not None and old.record == record else now
        members[shard] = Member(shard=shard, holder=holder, record=record,
                                observed_at=observed_at, duration=duration)
    return members


def live_shards(members: Mapping[str, Member], *, now: float) -> frozenset[str]:
    """The shards holding their Lease at ``now``."""
    return frozenset(shard for shard, member in members.items() if member.live(now))


def next_change(
    members: Mapping[str, Member], *, now: float, drains: Iterable[float] = (),
    drain_timeout: float,
) -> float | None:
    """The next instant (assigner clock) after ``now`` at which the passing of time alone
    changes a decision: the earliest expiry of a live member's Lease (``observed_at +
    duration``) or the earliest timeout of a drain started at one of ``drains``; ``None`` when
    there is none. The assigner sleeps until then, so a crashed shard's parents move the moment
    its Lease expires, not at the next periodic tick."""
    instants = [m.observed_at + m.duration for m in members.values() if m.live(now)]
    instants.extend(started + drain_timeout for started in drains
                    if started + drain_timeout > now)
    return min(instants, default=None)


# --- partitioning ----------------------------------------------------------------------------


def _score(shard: str, key: str) -> int:
    digest = hashlib.blake2b(f"{shard}\x00{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def rendezvous_shard(key: str, shards: Iterable[str]) -> str | None:
    """The shard with the highest hash of ``(shard, key)`` (highest random weight); ``None``
    when there is no shard. Removing a shard moves only its own keys; adding one takes about
    1/N of the keys, from every other shard evenly."""
    best: tuple[int, str] | None = None
    for shard in shards:
        candidate = (_score(shard, key), shard)
        if best is None or candidate > best:
            best = candidate
    return None if best is None else best[1]


def parent_hash_key(parent: Mapping[str, Any]) -> str:
    """A parent's partition key: ``namespace/name`` (known at creation, stable)."""
    meta = parent.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name')}"


def shard_of(obj: Mapping[str, Any]) -> str | None:
    """The shard label of an object, if any."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    value = labels.get(SHARD_LABEL)
    return str(value) if value else None


def shard_child_labels(parent: Mapping[str, Any]) -> dict[str, str]:
    """The labels the children of a sharded operator's ``parent`` carry: its shard label (none
    while it is unassigned), so that each replica's child informers select only the children
    of its own parents."""
    shard = shard_of(parent)
    return {} if shard is None else {SHARD_LABEL: shard}


def child_labels(sharding: Sharding | None) -> Callable[[Mapping[str, Any]], dict[str, str]] | None:
    """What ``ParentReconciler(child_labels=...)`` gets for an operator with these sharding
    settings, the same for the running replicas, ``optk plan`` and ``optk trace`` (so a plan of
    a sharded operator keeps the label): :func:`shard_child_labels`, or None unsharded. The
    labels are stamped by the one evaluation of the builders (``reconciler._reconcile.declared``),
    which keeps each builder's component and so its gates (``depends_on``, ``precondition``,
    ``when_served``, ``ready_when``); wrapping the builders to add them hid the components."""
    return None if sharding is None else shard_child_labels


def draining(obj: Mapping[str, Any]) -> bool:
    """Whether the object carries the drain mark."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(DRAIN_LABEL) == "true"


# --- the assigner's decision and the owner's side --------------------------------------------


class Decision(enum.Enum):
    """What the assigner does with one parent."""

    NOTHING = "nothing"
    ASSIGN = "assign"          # set the shard label (unassigned, or its owner is gone)
    DRAIN = "drain"            # its live owner must let it go first: set the drain mark
    WAIT = "wait"              # a drain is in progress
    FORCE = "force"            # a drain timed out: assign anyway


@attrs.frozen(kw_only=True)
class Assignment:
    """The assigner's decision for one parent: what to do and the shard it belongs to."""

    decision: Decision
    target: str | None = None
    current: str | None = None


def decide(
    parent: Mapping[str, Any], *, live: frozenset[str], drain_started: float | None,
    now: float, drain_timeout: float,
) -> Assignment:
    """The assigner's decision for ``parent`` given the live shards.

    ``drain_started`` is when (assigner clock) the assigner set this parent's drain mark, if it
    did. Unassigned, or owned by a shard that is not live: assign at once (no one works on it).
    Owned by a live shard other than the rendezvous choice: drain first; while the mark is on,
    wait for the owner's acknowledgement (it removes both labels) up to ``drain_timeout``, then
    force. A parent already where it belongs is left alone (a stray drain mark on it waits for
    its owner's acknowledgement, after which it is assigned to the same shard again).
    """
    target = rendezvous_shard(parent_hash_key(parent), sorted(live))
    current = shard_of(parent)
    if target is None:
        return Assignment(decision=Decision.NOTHING, current=current)
    if current is None or current not in live:
        return Assignment(decision=Decision.ASSIGN, target=target, current=current)
    if draining(parent):
        if drain_started is not None and now - drain_started >= drain_timeout:
            return Assignment(decision=Decision.FORCE, target=target, current=current)
        return Assignment(decision=Decision.WAIT, target=target, current=current)
    if current == target:
        return Assignment(decision=Decision.NOTHING, target=target, current=current)
    return Assignment(decision=Decision.DRAIN, target=target, current=current)


def must_release(parent: Mapping[str, Any], shard: str) -> bool:
    """The owner's side: whether ``shard`` must let ``parent`` go (it carries the drain mark and
    this shard's label). The owner starts no new reconcile of it, lets an in-flight one finish,
    and acknowledges by removing both labels."""
    return draining(parent) and shard_of(parent) == shard


def assign_patch(target: str) -> dict[str, Any]:
    """The merge patch that assigns a parent to ``target`` (and clears a drain mark)."""
    return {"metadata": {"labels": {SHARD_LABEL: target, DRAIN_LABEL: None}}}


def drain_patch() -> dict[str, Any]:
    """The merge patch that marks a parent draining."""
    return {"metadata": {"labels": {DRAIN_LABEL: "true"}}}


def adopt_patch(*, shard: str, operator: str, owner_uid: str,
                resource_version: str | None = None) -> list[dict[str, Any]]:
    """The JSON patch with which a new owner labels one child of a moved-in parent with its
    shard: it applies only while the child is still the operator's (``managed-by``) and the
    parent's (``owner-uid``), and, given ``resource_version``, only while the child is as it
    was read (a policy set since then is not overrun): the server refuses it (422, or 409 for
    the version) otherwise."""
    def pointer(label: str) -> str:
        return "/metadata/labels/" + label.replace("~", "~0").replace("/", "~1")

    version = ([{"op": "test", "path": "/metadata/resourceVersion", "value": resource_version}]
               if resource_version is not None else [])
    return [
        *version,
        {"op": "test", "path": pointer(MANAGED_BY_LABEL), "value": operator},
        {"op": "test", "path": pointer(OWNER_UID_LABEL), "value": owner_uid},
        {"op": "add", "path": pointer(SHARD_LABEL), "value": shard},
    ]


def adoption(live: Mapping[str, Any], *, shard: str, operator: str,
             owner_uid: str) -> list[dict[str, Any]] | None:
    """The adoption patch for one live child of a moved-in parent (``adopt_patch``, tied to the
    ``resourceVersion`` read), or None when nothing is to be written: the child is not the
    operator's or not that parent's, it already carries ``shard``, or its ``optk.dev/policy``
    forbids patches (``ignore``, ``create-only``, ``observe``, an unknown value: the shard
    label is a write like any other; the new owner's reconcile reads such a child from the
    server when it needs it)."""
    meta = live.get("metadata") or {}
    labels = meta.get("labels") or {}
    if labels.get(MANAGED_BY_LABEL) != operator or labels.get(OWNER_UID_LABEL) != owner_uid:
        return None
    if labels.get(SHARD_LABEL) == shard or not patch_allowed(live):
        return None
    version = meta.get("resourceVersion")
    return adopt_patch(shard=shard, operator=operator, owner_uid=owner_uid,
                       resource_version=None if version is None else str(version))


_VIEW_FIELDS = ("name", "namespace", "uid", "labels", "resourceVersion", "deletionTimestamp")


def metadata_view(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the assigner keeps of a parent: its type, and of its metadata the name, namespace,
    uid, labels, ``resourceVersion`` and ``deletionTimestamp`` (no spec, status, annotations or
    managed fields): enough to decide and to write a label patch with a precondition."""
    meta = obj.get("metadata") or {}
    view: dict[str, Any] = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    view["metadata"] = {k: meta[k] for k in _VIEW_FIELDS if k in meta}
    return view


def release_patch() -> dict[str, Any]:
    """The owner's acknowledgement: remove the shard label and the drain mark."""
    return {"metadata": {"labels": {SHARD_LABEL: None, DRAIN_LABEL: None}}}
