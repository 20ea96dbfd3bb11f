"""New operator versions reach existing parents: the operator's fingerprint and the restart check.

A restart with the same code must make no writes and cause no herd (the periodic resync resumes
from the heartbeat, ``reconciler._driver.resync_loop``), but a restart with changed builders must
bring every existing child to what the new code builds within seconds, not after the resync
interval. So the heartbeat Lease also records the *fingerprint* of the operator that last brought
every parent up to date (``operator_fingerprint``: a digest of the toolkit's version, the operator's
kind and name, its ``build`` function's code and the source of the modules that the module
defining ``build`` uses, transitively, within its directory: the user's operator code). At start
(or at a takeover) ``UpgradeCheck`` compares it with the running operator's: when it changed,
every parent is reconciled from the caches (a reconcile with nothing to change makes no
request), and the new fingerprint is recorded only once each parent was reconciled under it, so
a crash in the middle makes the next start finish the pass. The log says which of the two a
start did.

Boundary: this module decides and queues; the Lease I/O is ``HeartbeatStore``'s, the reconciles
are the workers'.

What ``UpgradeCheck`` receives from the runtime (``reconciler._driver.runtime`` wires it; it never
sees the runtime): the running operator's fingerprint, the ``heartbeats`` store (the recorded
fingerprint; None: no heartbeat, nothing to compare), the ``parents`` informer (the parents to
pass over), the ``queue`` and ``schedule`` (a pass queues every parent and takes it off the
timer), the ``stats`` (reconciles counted per parent tell when the pass is complete), and
``force_beat()`` (record the new fingerprint at once) and ``stopping()``; ``roll(old, changed)``
(None: none) is a gradual rollout's (``reconciler._driver.rollouts``): it takes the pass over,
and the new fingerprint is recorded once it returns True (every parent moved).
``operator_fingerprint`` reads an ``Operator`` through the ``Fingerprinted`` protocol.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import time
from collections.abc import Callable
from importlib import metadata
from types import ModuleType
from typing import Protocol

from reconciler._cache.informers import Informer
from reconciler._driver.resync_loop import HeartbeatStore
from reconciler._driver.resyncs import ResyncSchedule
from reconciler._driver.stats import RuntimeStats
from reconciler._driver.triggers import ParentKey
from reconciler._workqueue.queues import WorkQueue

__all__ = ["Fingerprinted", "UpgradeCheck", "operator_fingerprint"]

_log = logging.getLogger("optk.operator")

_MAX_SOURCES = 500
"""At most this many module files are read into one fingerprint (bounded start-up cost)."""


def _toolkit_version() -> str:
    try:
        return metadata.version("operator-toolkit")
    except metadata.PackageNotFoundError:
        return "unknown"


def _source_files(module_name: str) -> list[str]:
    """The files of ``module_name`` and of the modules it uses (its globals: modules, and the
    modules of its functions and classes), transitively, within the directory of its file: the
    user's operator code, not whatever else the process loaded."""
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if module is None or not path:
        return []
    root = os.path.dirname(os.path.abspath(path)) + os.sep
    seen: dict[str, str] = {}
    todo: list[ModuleType] = [module]
    while todo and len(seen) < _MAX_SOURCES:
        current = todo.pop()
        file = getattr(current, "__file__", None)
        if not file or current.__name__ in seen:
            continue
        file = os.path.abspath(file)
        if not file.startswith(root) or not file.endswith(".py"):
            continue
        seen[current.__name__] = file
        for value in list(vars(current).values()):
            used = value if isinstance(value, ModuleType) else sys.modules.get(
                str(getattr(value, "__module__", "") or ""))
            if used is not None and used.__name__ not in seen:
                todo.append(used)
    return sorted(set(seen.values()))


class Fingerprinted(Protocol):
    """What ``operator_fingerprint`` reads of an ``Operator`` (a protocol, so that this module
    does not import ``reconciler._driver.operators``, which imports the runtime)."""

    @property
    def api_version(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def build(self) -> Callable[..., object]: ...


def operator_fingerprint(operator: Fingerprinted) -> str:
    """A short digest that changes when the operator's code (or the toolkit) changes.

    It covers the toolkit's version, the operator's API version, kind and name, the code of
    ``operator.build`` and the source of the module defining it and of the modules it uses
    (transitively) within its directory. A change of a dependency outside that directory is not
    seen (remove the Lease ``<name>-resync``'s fingerprint annotation to force a full pass).
    """
    digest = hashlib.sha256()
    for part in (_toolkit_version(), operator.api_version, operator.kind, operator.name):
        digest.update(part.encode() + b"\0")
    build = operator.build
    call = vars(type(build)).get("__call__")
    code = getattr(build, "__code__", None) or getattr(call, "__code__", None)
    digest.update(str(getattr(build, "__qualname__", type(build).__qualname__)).encode() + b"\0")
    if code is not None:
        digest.update(code.co_code)
        digest.update(repr(code.co_consts).encode())
    module_name = getattr(build, "__module__", None) or type(build).__module__
    for file in _source_files(module_name):
        try:
            with open(file, "rb") as handle:
                digest.update(os.path.basename(file).encode() + b"\0" + handle.read())
        except OSError:
            continue
    return digest.hexdigest()[:16]


class UpgradeCheck:
    """The start-up (or takeover) comparison of the recorded fingerprint with the running one.

    ``run`` is one thread's body: it waits for the parent cache, logs why the start reconciles
    what it reconciles, queues every parent when the operator changed and records the new
    fingerprint in the heartbeat once each of them was reconciled.
    """

    def __init__(
        self,
        fingerprint: str,
        *,
        heartbeats: HeartbeatStore | None,
        parents: Informer,
        queue: WorkQueue[ParentKey],
        schedule: ResyncSchedule,
        stats: RuntimeStats,
        force_beat: Callable[[], None],
        stopping: Callable[[], bool],
        roll: Callable[[str | None, bool], bool] | None = None,
    ) -> None:
        self._roll = roll
        self._heartbeats = heartbeats
        self._parents = parents
        self._queue = queue
        self._schedule = schedule
        self._stats = stats
        self._force_beat = force_beat
        self._stopping = stopping
        self.fingerprint = fingerprint
        self.completed = False
        """Whether every parent known at the start was reconciled under ``fingerprint``."""

    def run(self) -> None:
        """Compare, queue and wait for the pass (bounded by the runtime's stop)."""
        store, cache, stats = self._heartbeats, self._parents.cache, self._stats
        if store is None:
            return
        if not self._parents.wait_synced(None) or self._stopping():
            return
        keys = cache.keys()
        old = store.recorded_fingerprint
        if not store.lease_found or old == self.fingerprint:
            due = stats.triggers["parent-new"]
            if store.lease_found:
                _log.info("resuming the periodic resync (operator %s unchanged): %d of %d "
                          "parents due now", self.fingerprint[:8], due, len(keys))
            else:
                _log.info("first start of operator %s (no resync heartbeat yet): %d of %d "
                          "parents due now", self.fingerprint[:8], due, len(keys))
            if self._roll is not None:
                self._roll(None, False)
            self._record()
            return
        if self._roll is not None:
            if self._roll(old, True):
                self._record()
            return
        _log.info("operator changed (fingerprint %s -> %s): reconciling all %d parents",
                  (old or "none")[:8], self.fingerprint[:8], len(keys))
        before = {key: stats.reconciles[key] for key in keys}
        for key in keys:
            stats.triggers["operator-changed"] += 1
            self._schedule.take(key)
            self._queue.add(key)
        pending: set[ParentKey] = set(keys)
        while pending and not self._stopping():
            pending = {key for key in pending if stats.reconciles[key] <= before[key]
                       and cache.get(*key) is not None}
            if pending:
                time.sleep(0.02)
        if not pending:
            _log.info("operator %s: all parents reconciled", self.fingerprint[:8])
            self._record()

    def _record(self) -> None:
        self.completed = True
        store = self._heartbeats
        if store is not None and store.fingerprint != self.fingerprint:
            store.fingerprint = self.fingerprint
            self._force_beat()
