"""The own-write recorder: a ``ClusterClient`` decorator that knows the toolkit's own writes.

DESIGN.md section 6, "own writes are not drift": ``RecordingClient`` wraps the client handed to
the reconcile, remembers the ``resourceVersion`` each write returned (and the uid each delete
removed) so that the watch echo of the toolkit's own write is not taken for drift, and writes
the result through to the informer cache so the next read sees it. Reads pass through. Waiting
for an echo's write to return uses the injected ``Clock``.

An echo can overtake the response of the write it echoes, and a response can be lost or late
(issue 31: one answer held back for seconds). ``decide_echo`` never blocks the informer's thread
for that: an event of an object with one of our writes in flight whose version is not already
known to be ours is set aside (per object, in arrival order) and decided when the object's
writes have returned, or after ``echo_wait`` seconds (then with what is known by then: a version
still unknown is foreign). Every other event is decided at once, so one late answer delays only
the events of its own object, never those of its kind.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from builders import ObjectRef
from reconciler._base.clocks import Clock, RealClock
from reconciler._cache.informers import Informer
from reconciler._cache.stores import resource_version as _rv
from reconciler._client.protocol import ClusterClient, ForwardingClient, KubeObject

__all__ = ["EchoDecided", "RecordingClient"]

_log = logging.getLogger("optk.operator")

EchoDecided = Callable[[bool], None]
"""What ``decide_echo`` calls with its answer: whether the event is the echo of an own write."""


class RecordingClient(ForwardingClient):
    """A ``ClusterClient`` decorator that remembers its own writes and feeds them to the caches.

    ``is_own_echo(event_type, obj)`` tells whether a watch event is the echo of a write made
    through this client: a created/patched/replaced object arriving with exactly the
    ``resourceVersion`` the write returned, or the deletion of an object (by uid) it deleted.
    Each record is consumed by its echo; a bounded number are kept per object, and only for
    types with an informer (when ``informers`` is given), so unwatched writes leave no record.
    An echo that overtakes its write's response waits for it (at most ``echo_wait`` seconds of
    ``clock``); ``decide_echo`` gives the same answer without blocking its caller.
    """

    def __init__(
        self,
        inner: ClusterClient,
        *,
        informers: Callable[[str, str], Informer | None] | None = None,
        keep: int = 8,
        echo_wait: float = 5.0,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(inner)
        self._clock: Clock = clock or RealClock()
        self._informers = informers
        self._keep = keep
        self._lock = threading.Lock()
        self._versions: dict[ObjectRef, list[str]] = {}
        self._deleted_uids: dict[str, None] = {}
        self._inflight: dict[ObjectRef, int] = {}
        # One condition per key an echo waits on (sharing the lock): a write wakes only the
        # echoes of its own object, and a write nobody waits on wakes nobody.
        self._waiters: dict[ObjectRef, tuple[threading.Condition, int]] = {}
        # Events set aside by ``decide_echo`` until their object's writes return: per object,
        # in arrival order, each with its deadline (clock monotonic) and its continuation.
        self._deferred: dict[ObjectRef, list[tuple[float, str, KubeObject, EchoDecided]]] = {}
        self._timer = threading.Condition(self._lock)
        self._timer_running = False
        self.writes = 0
        self.echo_wait = echo_wait

    # reads and discovery pass through (ForwardingClient); writes are recorded
    def create(self, obj: KubeObject, *, dry_run: bool = False) -> dict[str, Any]:
        """Create, and record the version it returned."""
        with self._writing(self._key(obj)):
            return self._record(self.inner.create(obj, dry_run=dry_run), dry_run)

    def patch(
        self, api_version: str, kind: str, name: str, patch: Any, **kwargs: Any
    ) -> dict[str, Any]:
        """Patch, and record the version it returned."""
        key = ObjectRef(
            api_version=api_version, kind=kind, name=name,
            namespace=kwargs.get("namespace") or None,
        )
        with self._writing(key):
            result = self.inner.patch(api_version, kind, name, patch, **kwargs)
            return self._record(result, bool(kwargs.get("dry_run")))

    def replace(
        self, obj: KubeObject, *, subresource: str | None = None, dry_run: bool = False
    ) -> dict[str, Any]:
        """Replace, and record the version it returned."""
        with self._writing(self._key(obj)):
            result = self.inner.replace(obj, subresource=subresource, dry_run=dry_run)
            return self._record(result, dry_run)

    def delete(self, api_version: str, kind: str, name: str, **kwargs: Any) -> dict[str, Any]:
        """Delete, and record the uid deleted."""
        key = ObjectRef(
            api_version=api_version, kind=kind, name=name,
            namespace=kwargs.get("namespace") or None,
        )
        with self._writing(key):
            result = self.inner.delete(api_version, kind, name, **kwargs)
            if kwargs.get("dry_run"):
                return result
            details = result.get("details") or {}
            uid = details.get("uid") or (result.get("metadata") or {}).get("uid")
            with self._lock:
                self.writes += 1
                if uid:
                    self._deleted_uids[str(uid)] = None
                    while len(self._deleted_uids) > 10_000:
                        del self._deleted_uids[next(iter(self._deleted_uids))]
            meta = result.get("metadata") or {} if result.get("kind") != "Status" else {}
            if meta.get("deletionTimestamp") and meta.get("finalizers"):
                self._record(result, False, count=False)  # still there: finalizers pending
            elif uid:  # gone (a Status, or the object's last state as some kinds answer)
                self._forget(api_version, kind, name, kwargs.get("namespace"), str(uid))
            return result

    def _forget(
        self, api_version: str, kind: str, name: str, namespace: str | None, uid: str
    ) -> None:
        """Write a completed deletion through to the type's informer cache, if any."""
        informer = self._informers(api_version, kind) if self._informers is not None else None
        if informer is not None:
            meta = {"name": name, **({"namespace": namespace} if namespace else {})}
            informer.cache.forget({"metadata": meta}, uid=uid)

    @contextlib.contextmanager
    def _writing(self, key: ObjectRef) -> Iterator[None]:
        """Mark a write in flight, so its echo waits for the version the write returns."""
        with self._lock:
            self._inflight[key] = self._inflight.get(key, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._inflight[key] - 1
                if left:
                    self._inflight[key] = left
                else:
                    del self._inflight[key]
                waiting = self._waiters.get(key)
                if waiting is not None:
                    waiting[0].notify_all()
                ready = [] if left else self._decide_deferred(key, None)
            self._run(ready)

    def is_own_echo(self, event_type: str, obj: KubeObject) -> bool:
        """Whether this watch event is the echo of a write made through this client."""
        key = self._key(obj)
        with self._lock:
            # The echo can overtake the response of the write it echoes: wait for the response.
            if key in self._inflight:
                self._await_settled(key)
            return self._decide(event_type, obj, key)

    def decide_echo(self, event_type: str, obj: KubeObject, then: EchoDecided) -> None:
        """Call ``then(own)`` with whether this watch event echoes a write made through this
        client: at once when that can be told now, else (an own write to the object in flight,
        the version not yet known) once the object's writes have returned or ``echo_wait``
        passed, on the thread that saw that. The caller is never blocked."""
        key = self._key(obj)
        with self._lock:
            if key in self._inflight and not self._known_own(event_type, obj, key):
                queue = self._deferred.setdefault(key, [])
                queue.append((self._clock.monotonic() + self.echo_wait, event_type, obj, then))
                self._start_timer()
                return
            if key in self._deferred:  # behind the events of its object set aside earlier
                self._deferred[key].append((0.0, event_type, obj, then))
                return
            own = self._decide(event_type, obj, key)
        then(own)

    def _known_own(self, event_type: str, obj: KubeObject, key: ObjectRef) -> bool:
        """Whether the event is known to be an own write's echo already (lock held)."""
        meta = obj.get("metadata") or {}
        if event_type == "DELETED":
            return str(meta.get("uid") or "") in self._deleted_uids
        return str(meta.get("resourceVersion") or "") in self._versions.get(key, ())

    def _decide_deferred(
        self, key: ObjectRef, now: float | None,
    ) -> list[tuple[EchoDecided, bool]]:
        """Decide the events of ``key`` set aside (lock held): all of them when ``now`` is None
        (its writes returned), else those up to the last whose deadline is past."""
        queue = self._deferred.get(key)
        if not queue:
            return []
        count = 0
        if now is None or key not in self._inflight:
            count = len(queue)
        else:  # deadlines grow in arrival order; 0.0: known already, set aside for order only
            while count < len(queue) and queue[count][0] <= now:
                count += 1
        ready = [(then, self._decide(event_type, obj, key))
                 for _, event_type, obj, then in queue[:count]]
        del queue[:count]
        if not queue:
            del self._deferred[key]
        return ready

    def _start_timer(self) -> None:
        """Start the thread that decides events set aside past ``echo_wait`` (lock held)."""
        if self._timer_running:
            return
        self._timer_running = True
        threading.Thread(target=self._run_timer, name="optk-echo-timer", daemon=True).start()

    def _run_timer(self) -> None:
        """Decide events whose ``echo_wait`` passed; end when none is set aside."""
        while True:
            with self._lock:
                now = self._clock.monotonic()
                ready = [item for key in list(self._deferred)
                         for item in self._decide_deferred(key, now)]
                deadlines = [deadline for queue in self._deferred.values()
                             for deadline, *_ in queue if deadline > 0.0]
                if not ready:
                    if not self._deferred:
                        self._timer_running = False
                        return
                    soonest = min(deadlines, default=now + self.echo_wait)
                    self._clock.wait(self._timer, max(soonest - now, 0.001))
                    continue
            self._run(ready)

    @staticmethod
    def _run(ready: list[tuple[EchoDecided, bool]]) -> None:
        for then, own in ready:
            try:
                then(own)
            except Exception:  # a handler's failure must not break a write or the timer
                _log.exception("handling a watch event set aside for its echo failed")

    def _decide(self, event_type: str, obj: KubeObject, key: ObjectRef) -> bool:
        """Whether the event is an own write's echo, consuming its record (lock held)."""
        meta = obj.get("metadata") or {}
        if event_type == "DELETED":
            self._versions.pop(key, None)
            return self._deleted_uids.pop(str(meta.get("uid") or ""), 1) is None
        versions = self._versions.get(key)
        rv = str(meta.get("resourceVersion") or "")
        if versions and rv in versions:
            versions.remove(rv)
            if not versions:
                del self._versions[key]
            return True
        return False

    def _await_settled(self, key: ObjectRef) -> None:
        """Wait (lock held) until no write to ``key`` is in flight, at most ``echo_wait``."""
        condition, count = self._waiters.get(key) or (threading.Condition(self._lock), 0)
        self._waiters[key] = (condition, count + 1)
        try:
            deadline = self._clock.monotonic() + self.echo_wait
            while key in self._inflight and self._clock.monotonic() < deadline:
                self._clock.wait(condition, deadline - self._clock.monotonic())
        finally:
            condition, count = self._waiters[key]
            if count > 1:
                self._waiters[key] = (condition, count - 1)
            else:
                del self._waiters[key]

    def _record(
        self, result: dict[str, Any], dry_run: bool, *, count: bool = True
    ) -> dict[str, Any]:
        if dry_run or not isinstance(result, dict):
            return result
        informer = None
        if self._informers is not None and result.get("kind") and result.get("apiVersion"):
            informer = self._informers(str(result["apiVersion"]), str(result["kind"]))
        rv = _rv(result)
        with self._lock:
            if count:
                self.writes += 1
            # Only writes to watched types have echoes to recognise (not Events, say).
            if rv and (self._informers is None or informer is not None):
                versions = self._versions.setdefault(self._key(result), [])
                versions.append(rv)
                del versions[: -self._keep]
        if informer is not None and informer.accepts(result):
            informer.cache.upsert(result, own_write=True)
        return result

    @staticmethod
    def _key(obj: KubeObject) -> ObjectRef:
        return ObjectRef.of(obj)
