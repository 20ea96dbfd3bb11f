"""The gradual rollout of a new operator version, as pure decisions (issue 29).

When the operator's fingerprint changes (``reconciler._driver.upgrades``) and the operator sets
``rollout=Rollout(...)``, parents move to the new version in batches instead of all at once. This
module decides, from plain values, everything about it: the order of the parents (by
``namespace/name``, a total order that needs no per-parent record), which parents a batch holds,
whether a parent may be written by the new code (``admits``), when a batch is done or failed
(``judge``), and what resume and abort do. The progress is a ``RolloutState`` of a few strings,
whatever the number of parents: the *cursor* (every parent up to it, in that order, is rolled)
and the end of the batch in flight; ``to_annotations``/``from_annotations`` carry it in the
rollout Lease's annotations. The I/O (the Lease, queueing, waiting, the pause's condition, Event,
metric and log line) is ``reconciler._driver.rollouts``'.

Rules (docs/driver.md, "Gradual rollouts"):

- A parent beyond the cursor and outside the batch in flight is left alone (read-only: no child
  and no status write) until its batch, except when its owner consents (``consents``): it was
  never reconciled (a new parent), its spec changed since its last reconcile
  (``metadata.generation`` differs from ``status.observedGeneration``), or a manual reconcile
  was requested after it (``optk.dev/reconcile-requested-at``). Those are reconciled at once.
- A batch is done when each of its parents was reconciled by the new version without failure
  and (``wait_ready``) its ``Ready`` condition is ``True``. The first failure (a builder or child
  error: ``Reconciled`` is ``False``) or a batch not done within ``batch_timeout`` pauses the
  rollout (``pause_on_failure``; else the batch counts as done and the next one starts).
- ``resume`` restarts the paused batch; ``abort`` stops the rollout for this version for good:
  parents not rolled stay unreconciled by it (consent aside) until another version is deployed,
  which starts a new rollout from the first parent.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from reconciler._base.errors import ReconcilerUsageError, ReconcilerUsageTypeError
from reconciler._base.keys import ParentKey, meta_of
from reconciler._base.times import parse_time
from reconciler._driver.resyncs import last_reconcile_time
from reconciler._driver.triggers import REQUESTED_AT_ANNOTATION

__all__ = [
    "Observation",
    "Phase",
    "Rollout",
    "RolloutState",
    "Verdict",
    "abort",
    "admits",
    "batch_members",
    "consents",
    "from_annotations",
    "judge",
    "next_batch",
    "observe",
    "order_key",
    "resume",
    "start",
    "to_annotations",
]

MAX_REASON = 512
"""At most this many characters of a pause's reason are kept (the Lease stays small)."""


@attrs.frozen(kw_only=True)
class Rollout:
    """How a new operator version reaches the parents: ``max_in_flight`` parents per batch, in
    ``namespace/name`` order; a batch is done when its parents are ``Ready`` (``wait_ready``;
    else when they were reconciled without failure) or, at the latest, after ``batch_timeout``
    seconds; the first failure pauses the rollout (``pause_on_failure``; else it carries on).
    ``poll`` is how often (seconds) a paused rollout's record is read again for a resume or an
    abort (``optk rollout resume|abort``)."""

    max_in_flight: int = 10
    wait_ready: bool = True
    pause_on_failure: bool = True
    batch_timeout: float = 600.0
    poll: float = 5.0

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.max_in_flight, int) or isinstance(self.max_in_flight, bool):
            raise ReconcilerUsageTypeError(
                f"Rollout.max_in_flight must be an int, got {self.max_in_flight!r}")
        if self.max_in_flight < 1:
            raise ReconcilerUsageError(
                f"Rollout.max_in_flight must be >= 1, got {self.max_in_flight}")
        for field in ("batch_timeout", "poll"):
            value = getattr(self, field)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise ReconcilerUsageError(f"Rollout.{field} must be a number > 0, got {value!r}")


class Phase(enum.StrEnum):
    """Where a rollout stands."""

    ROLLING = "Rolling"
    PAUSED = "Paused"
    DONE = "Done"
    ABORTED = "Aborted"


@attrs.frozen(kw_only=True)
class RolloutState:
    """The progress of one rollout: from fingerprint ``source`` to ``target``. Every parent whose
    ``order_key`` is at most ``cursor`` is rolled (``""``: none yet); the batch in flight (number
    ``batch``) holds those after the cursor up to ``batch_end`` (``""``: no batch in flight),
    opened at ``batch_started`` (epoch seconds). A pause names ``failed`` (``namespace/name``)
    and says why (``reason``)."""

    target: str
    source: str = ""
    phase: Phase = Phase.ROLLING
    cursor: str = ""
    batch_end: str = ""
    batch: int = 0
    batch_started: float = 0.0
    failed: str = ""
    reason: str = ""

    @property
    def in_flight(self) -> bool:
        """Whether a batch is open."""
        return bool(self.batch_end)


@attrs.frozen(kw_only=True)
class Observation:
    """What the rollout sees of one parent of the batch in flight: whether the new version
    reconciled it since the batch opened, the failure its status reports then (None: none) and
    whether its ``Ready`` condition is ``True``."""

    reconciled: bool
    failure: str | None = None
    ready: bool = False


@attrs.frozen(kw_only=True)
class Verdict:
    """What ``judge`` decided: the next state, and whether it changed (the batch is done, or
    the rollout paused: ``paused`` names the parent whose pause must be reported)."""

    state: RolloutState
    changed: bool = False
    paused: str | None = None


def order_key(key: ParentKey) -> str:
    """The rollout's order of a parent: ``namespace/name`` (namespaces and names hold no ``/``,
    so the string order is the order by namespace, then name)."""
    return f"{key[0]}/{key[1]}"


def start(*, target: str, source: str | None) -> RolloutState:
    """A new rollout from ``source`` (None: unknown) to ``target``: nothing rolled yet."""
    return RolloutState(target=target, source=source or "")


def next_batch(state: RolloutState, keys: Iterable[ParentKey], *, now: float,
               max_in_flight: int) -> RolloutState:
    """Open the next batch: the first ``max_in_flight`` parents after the cursor (``DONE`` when
    none is left). Only a rolling rollout without a batch in flight moves."""
    if state.phase is not Phase.ROLLING or state.in_flight:
        return state
    after = sorted(k for k in map(order_key, keys) if k > state.cursor)[:max_in_flight]
    if not after:
        return attrs.evolve(state, phase=Phase.DONE, batch_end="", batch_started=0.0)
    return attrs.evolve(state, batch_end=after[-1], batch=state.batch + 1, batch_started=now)


def batch_members(state: RolloutState, keys: Iterable[ParentKey]) -> list[ParentKey]:
    """The parents of the batch in flight among ``keys``, in order."""
    if not state.in_flight:
        return []
    return sorted((k for k in keys if state.cursor < order_key(k) <= state.batch_end),
                  key=order_key)


def admits(state: RolloutState | None, key: ParentKey) -> bool:
    """Whether the new version may write parent ``key`` (consent aside: see ``consents``):
    always without a rollout or once it is done; else only a rolled parent or one of the batch
    in flight (a paused batch's parents too: their reconcile is what the pause is about)."""
    if state is None or state.phase is Phase.DONE:
        return True
    position = order_key(key)
    return position <= state.cursor or (state.in_flight and position <= state.batch_end)


def consents(parent: Mapping[str, Any]) -> bool:
    """Whether the parent's owner asked for a reconcile, which the new version does at once
    even outside its batch: never reconciled (new), spec changed since its last reconcile, or a
    manual reconcile requested after it."""
    last = last_reconcile_time(parent)
    if last is None:
        return True
    meta = meta_of(parent)
    status = parent.get("status")
    observed = status.get("observedGeneration") if isinstance(status, Mapping) else None
    if meta.get("generation") is not None and observed != meta.get("generation"):
        return True
    requested = parse_time((meta.get("annotations") or {}).get(REQUESTED_AT_ANNOTATION))
    return requested is not None and requested > last


def observe(parent: Mapping[str, Any] | None, *, reconciled: bool) -> Observation:
    """What ``judge`` needs of ``parent`` (None: gone, which counts as done): its ``Reconciled``
    condition's failure message and whether ``Ready`` is ``True``."""
    if parent is None:
        return Observation(reconciled=True, ready=True)
    status = parent.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    by_type = {c.get("type"): c for c in conditions if isinstance(c, Mapping)} if isinstance(
        conditions, list) else {}
    done = by_type.get("Reconciled") or {}
    failure = None
    if reconciled and done.get("status") == "False":
        failure = f"{done.get('reason') or 'Failed'}: {done.get('message') or ''}".strip()
    ready = (by_type.get("Ready") or {}).get("status") == "True"
    return Observation(reconciled=reconciled, failure=failure, ready=ready)


def judge(state: RolloutState, observations: Mapping[ParentKey, Observation], *, now: float,
          rollout: Rollout) -> Verdict:
    """Whether the batch in flight is done, failed or still going, from what was observed of
    each of its parents."""
    if state.phase is not Phase.ROLLING or not state.in_flight:
        return Verdict(state=state)
    ordered: Sequence[tuple[ParentKey, Observation]] = sorted(
        observations.items(), key=lambda item: order_key(item[0]))
    failed = [(key, seen) for key, seen in ordered if seen.failure is not None]
    if failed and rollout.pause_on_failure:
        key, seen = failed[0]
        return _pause(state, key, f"reconcile failed: {seen.failure}")
    waiting = [key for key, seen in ordered if not seen.reconciled or (
        rollout.wait_ready and seen.failure is None and not seen.ready)]
    if not waiting:
        return _done(state)
    if now - state.batch_started < rollout.batch_timeout:
        return Verdict(state=state)
    if not rollout.pause_on_failure:
        return _done(state)
    key = waiting[0]
    why = "not reconciled" if not observations[key].reconciled else "not Ready"
    return _pause(state, key, f"{why} {rollout.batch_timeout:g}s after batch {state.batch} "
                              f"started ({len(waiting)} of {len(ordered)} parents waiting)")


def _done(state: RolloutState) -> Verdict:
    return Verdict(state=attrs.evolve(state, cursor=state.batch_end, batch_end="",
                                      batch_started=0.0), changed=True)


def _pause(state: RolloutState, key: ParentKey, reason: str) -> Verdict:
    name = order_key(key)
    return Verdict(state=attrs.evolve(state, phase=Phase.PAUSED, failed=name,
                                      reason=reason[:MAX_REASON]), changed=True, paused=name)


def resume(state: RolloutState, *, now: float) -> RolloutState:
    """A paused rollout rolls again: the paused batch restarts now (its parents are reconciled
    again). Any other phase is left as it is."""
    if state.phase is not Phase.PAUSED:
        return state
    return attrs.evolve(state, phase=Phase.ROLLING, failed="", reason="",
                        batch_started=now if state.in_flight else 0.0)


def abort(state: RolloutState) -> RolloutState:
    """Stop the rollout for this version (a done one stays done): no further batch; parents not
    rolled stay unreconciled by this version, consent aside."""
    if state.phase is Phase.DONE:
        return state
    return attrs.evolve(state, phase=Phase.ABORTED)


_PREFIX = "optk.dev/rollout-"
_FIELDS = ("target", "source", "phase", "cursor", "batch-end", "batch", "batch-started",
           "failed", "reason")


def to_annotations(state: RolloutState) -> dict[str, str]:
    """The state as the rollout Lease's annotations (a few short strings)."""
    values = (state.target, state.source, state.phase.value, state.cursor, state.batch_end,
              str(state.batch), repr(state.batch_started), state.failed, state.reason)
    return {_PREFIX + field: value for field, value in zip(_FIELDS, values, strict=True)}


def from_annotations(annotations: Mapping[str, Any] | None) -> RolloutState | None:
    """The state ``to_annotations`` wrote, or None when there is none (or it is unreadable)."""
    values = {field: (annotations or {}).get(_PREFIX + field) for field in _FIELDS}
    if not isinstance(values["target"], str) or not values["target"]:
        return None
    text = {field: str(value or "") for field, value in values.items()}
    try:
        return RolloutState(
            target=text["target"], source=text["source"], phase=Phase(text["phase"]),
            cursor=text["cursor"], batch_end=text["batch-end"], batch=int(text["batch"] or 0),
            batch_started=float(text["batch-started"] or 0.0), failed=text["failed"],
            reason=text["reason"][:MAX_REASON])
    except ValueError:
        return None
