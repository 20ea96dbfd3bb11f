"""Events sent off the workers' path: a reconcile queues its Events and goes on.

A parent reconcile records an Event after its writes (``reconciler._reconcile.events``). Sent
inline, that is one more round trip to the API server on the worker's path for every parent
that changed: a burst of spec changes waits for the Events too. client-go sends its Events from
a broadcaster goroutine for that reason; this is the same thing for the driver: ``EventSender``
has the ``EventRecorder``'s ``record`` signature, queues the Event and returns, and one thread
records the queued Events in order (a repeat is still counted on the Event before it).

The queue is bounded (``capacity``): when the API server is slower than the reconciles, the
Events over it are dropped, counted (``dropped``) and logged once per burst, as client-go drops
Events when its broadcaster's channel is full; a reconcile never waits for an Event. A write
the fence refuses (this replica lost its lease) is dropped too. ``close`` sends what is queued
within its timeout and stops the thread; ``pending`` says how many wait (the runtime is not idle
while any do). The runtime owns the sender (``reconciler._driver.runtime``); a
``ParentReconciler`` used on its own records inline.
"""

from __future__ import annotations

import collections
import logging
import threading
import time

import attrs

from reconciler._base.errors import LeadershipLostError
from reconciler._client.protocol import KubeObject
from reconciler._reconcile.events import EventRecorder

__all__ = ["EventSender"]

_log = logging.getLogger(__name__)


@attrs.frozen(kw_only=True)
class _Queued:
    parent: KubeObject
    reason: str
    message: str
    type: str


class EventSender:
    """Records ``recorder``'s Events from one thread of its own, in the order queued."""

    def __init__(self, recorder: EventRecorder, *, capacity: int = 1000,
                 name: str = "optk-events") -> None:
        self.recorder = recorder
        self.capacity = capacity
        self.dropped = 0
        """Events not sent: the queue was full, or the fence refused the write."""
        self._name = name
        self._lock = threading.Condition()
        self._queue: collections.deque[_Queued] = collections.deque()
        self._sending = 0
        self._closed = False
        self._warned = False
        self._thread: threading.Thread | None = None

    def record(self, parent: KubeObject, *, reason: str, message: str,
               type: str = "Normal") -> bool:
        """Queue an Event on ``parent`` (``EventRecorder.record``'s arguments); False when
        it was dropped (the queue is full, or the sender is closed)."""
        with self._lock:
            if self._closed or len(self._queue) >= self.capacity:
                self.dropped += 1
                warn, self._warned = not self._warned, True
            else:
                self._queue.append(_Queued(parent=parent, reason=reason, message=message,
                                           type=type))
                self._warned = False
                self._start()
                self._lock.notify_all()
                return True
        if warn:
            _log.warning("event %s on %s dropped: %d Events wait to be sent (the API server "
                         "is slower than the reconciles)", reason,
                         (parent.get("metadata") or {}).get("name"), self.capacity)
        return False

    @property
    def pending(self) -> int:
        """Events queued or being sent."""
        with self._lock:
            return len(self._queue) + self._sending

    def close(self, timeout: float = 5.0) -> bool:
        """Send what is queued within ``timeout`` (real seconds), then stop; whether all was
        sent. Events recorded afterwards are dropped."""
        deadline = time.monotonic() + timeout
        with self._lock:
            self._closed = True
            self._lock.notify_all()
            while self._queue or self._sending:
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None:
                    break
                self._lock.wait(min(left, 0.1))
            unsent = len(self._queue)
            self.dropped += unsent
            self._queue.clear()
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
        if unsent:
            _log.warning("shutdown: %d Events not sent", unsent)
        return unsent == 0

    def _start(self) -> None:
        if self._thread is None:  # under the lock
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closed:
                    self._lock.wait()
                if not self._queue:
                    return
                item = self._queue.popleft()
                self._sending = 1
            try:
                self.recorder.record(item.parent, reason=item.reason, message=item.message,
                                     type=item.type)
            except LeadershipLostError:
                with self._lock:
                    self.dropped += 1
            except Exception:  # never let one Event stop the others
                _log.exception("event %s could not be recorded", item.reason)
            finally:
                with self._lock:
                    self._sending = 0
                    self._lock.notify_all()
