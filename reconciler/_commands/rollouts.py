"""``optk rollout status | resume | abort MODULE[:ATTR]``: read or change a gradual rollout.

The rollout record is the annotations of the Lease ``<name>-rollout`` beside the operator's
heartbeat (``reconciler._driver.rollouts``); the running operator reads it every
``Rollout.poll`` seconds, and a write here wins over the operator's (it writes over the version
it last saw, so it reads again on a conflict). What resume and abort mean is decided in
``reconciler._driver.rollout_plan``; this module only reads, prints and writes the record.

Exit codes: 0 done (or the status printed), 1 nothing to do (no rollout recorded, or one that
cannot be resumed or aborted in its phase), 2 a usage error (the operator cannot be loaded, it
keeps no heartbeat, the cluster cannot be reached).
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from reconciler._base.clocks import RealClock
from reconciler._base.errors import ConflictError, ReconcilerUsageError
from reconciler._base.times import format_time
from reconciler._client.protocol import ClusterClient
from reconciler._driver.operators import Operator
from reconciler._driver.rollout_plan import Phase, RolloutState, abort, resume
from reconciler._driver.rollouts import RolloutStore, rollout_lease

__all__ = ["ACTIONS", "rollout_action", "rollout_command", "rollout_store"]

ACTIONS = ("status", "resume", "abort")


def rollout_store(client: ClusterClient, operator: Operator) -> RolloutStore:
    """The record of ``operator``'s rollout (``ReconcilerUsageError`` when it keeps no
    heartbeat: then a new version is never told apart, and nothing is rolled out)."""
    if (lease := operator.heartbeat_lease) is None:
        raise ReconcilerUsageError(
            f"operator {operator.name!r} keeps no resync heartbeat (resync.heartbeat is None), "
            "so it has no rollout record")
    namespace, name = rollout_lease(lease)
    return RolloutStore(client, name=name, namespace=namespace)


def rollout_action(store: RolloutStore, action: str, *, now: float
                   ) -> tuple[RolloutState | None, str]:
    """Do ``action`` on the record: the state after it (None: no rollout recorded) and what
    went wrong ("" when nothing did)."""
    if action not in ACTIONS:
        raise ReconcilerUsageError(f"rollout action must be one of {', '.join(ACTIONS)}, "
                                   f"got {action!r}")
    for _ in range(3):
        state = store.read()
        if state is None:
            return None, f"no rollout recorded in Lease {store.where}"
        if action == "status":
            return state, ""
        new = resume(state, now=now) if action == "resume" else abort(state)
        if new == state:
            return state, f"a {state.phase.value.lower()} rollout cannot be {action}d"
        try:
            store.write(new)
            return new, ""
        except ConflictError:
            continue  # the operator wrote meanwhile: read again
    return None, f"Lease {store.where} kept changing; try again"


def describe(state: RolloutState, *, operator: str) -> str:
    """The rollout as a few lines of text."""
    lines = [f"rollout of operator {operator}: {state.phase.value} "
             f"(fingerprint {(state.source or 'none')[:8]} -> {state.target[:8]})",
             f"  rolled: every parent up to {state.cursor or '(none yet)'} "
             "(in namespace/name order)"]
    if state.in_flight:
        lines.append(f"  batch {state.batch}: after {state.cursor or '(the first)'} up to "
                     f"{state.batch_end}, started {format_time(state.batch_started)}")
    if state.phase is Phase.PAUSED:
        lines.append(f"  paused by {state.failed}: {state.reason}")
        lines.append("  next: fix the cause, then `optk rollout resume` (the batch restarts), "
                     "or `optk rollout abort`")
    if state.phase is Phase.ABORTED:
        lines.append("  aborted: parents not rolled stay unreconciled by this version (a spec "
                     "change still reconciles its parent) until another version is deployed")
    return "\n".join(lines)


def as_json(state: RolloutState | None, *, operator: str, where: str) -> str:
    """The rollout as JSON for tools (``"rollout": null`` when none is recorded)."""
    body = None if state is None else {
        "phase": state.phase.value, "source": state.source, "target": state.target,
        "cursor": state.cursor, "batch": state.batch, "batchEnd": state.batch_end,
        "batchStarted": format_time(state.batch_started) if state.in_flight else None,
        "failed": state.failed or None, "reason": state.reason or None}
    return json.dumps({"operator": operator, "lease": where, "rollout": body}, indent=2,
                      sort_keys=True)


def rollout_command(action: str, target: str, *, kubeconfig: str | None = None,
                    output: str = "text", out: TextIO | None = None) -> int:
    """``optk rollout ACTION MODULE[:ATTR]``: print the rollout after ``action``; the exit code
    (module docstring)."""
    from reconciler._commands.loading import connected

    out = sys.stdout if out is None else out  # read when called: tests replace it
    operator, client = connected(target, kubeconfig)
    store = rollout_store(client, operator)
    state, problem = rollout_action(store, action, now=RealClock().time())
    if output == "json":
        print(as_json(state, operator=operator.name, where=store.where), file=out)
    elif state is not None:
        print(describe(state, operator=operator.name), file=out)
    if problem:
        print(f"optk rollout {action}: {problem}", file=sys.stderr)
    return 1 if problem else 0
