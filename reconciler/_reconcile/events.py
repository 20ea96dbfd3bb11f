"""Kubernetes Events on a parent: what people see in ``kubectl describe`` after a reconcile.

``v1`` Events involving the parent: the parent reconcile records one per kind of change (created,
updated, recreated, deleted) naming each child concerned, and a warning naming the failed ones.
Recording is best effort: a refused or failed Event never fails the reconcile (it is logged
instead). Messages name objects and actions only, never field values, so Secret data cannot leak
through them.

Repeated identical Events are aggregated on one Event, as client-go's ``EventCorrelator`` does:
an Event with the same parent (by uid), type, reason, message and component as one this recorder
wrote bumps that Event's ``count`` and ``lastTimestamp`` (one merge patch) instead of creating a
new one, so a failure retried by backoff leaves one Event counting its attempts, not one per
attempt. The recorder remembers the last ``cache_size`` distinct Events (least recently used
forgotten first); an Event that was deleted or expired meanwhile is created afresh.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Protocol

import attrs

from builders import ObjectRef
from reconciler._base.clocks import Clock, RealClock
from reconciler._base.errors import ApiError, NotFoundError
from reconciler._base.text import bounded
from reconciler._base.times import format_time
from reconciler._client.protocol import ClusterClient, KubeObject

__all__ = ["EventRecorder", "EventSink"]

_log = logging.getLogger(__name__)


_EventKey = tuple[str, str, str, str, str, str]
"""(namespace, involved uid or name, type, reason, message, component): what makes two Events
the same one, as client-go's aggregation key without the source host."""


class EventSink(Protocol):
    """Where a parent reconcile's Events go: an ``EventRecorder`` (inline), or the driver's
    ``EventSender`` (queued, sent from a thread of its own)."""

    def record(self, parent: KubeObject, *, reason: str, message: str,
               type: str = "Normal") -> bool:
        """Record (or queue) one Event on ``parent``; False when it was not."""


@attrs.define
class _Seen:
    name: str
    namespace: str
    count: int
    first: str


class EventRecorder:
    """Creates ``v1`` Events about a parent object, reported by ``component``; a repeat of an
    Event it wrote bumps that Event's ``count`` and ``lastTimestamp`` instead."""

    def __init__(
        self, client: ClusterClient, *, component: str, clock: Clock | None = None,
        cache_size: int = 4096,
    ) -> None:
        self.client = client
        self.component = component
        self.clock: Clock = clock if clock is not None else RealClock()
        self.cache_size = cache_size
        self._lock = threading.Lock()
        self._seen: OrderedDict[_EventKey, _Seen] = OrderedDict()

    def event_for(
        self, parent: KubeObject, *, reason: str, message: str, type: str = "Normal"
    ) -> dict[str, Any]:
        """The Event object that :meth:`record` would create (pure; for tests and dry runs)."""
        meta: Mapping[str, Any] = parent.get("metadata") or {}
        ref = ObjectRef.of(parent)
        now = format_time(self.clock.time())
        involved = {
            "apiVersion": ref.api_version, "kind": ref.kind, "name": ref.name,
            "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion"),
        }
        if ref.namespace:
            involved["namespace"] = ref.namespace
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{ref.name}.{uuid.uuid4().hex[:16]}",
                "namespace": ref.namespace or "default",
            },
            "involvedObject": {k: v for k, v in involved.items() if v is not None},
            "reason": reason,
            "message": bounded(message),
            "type": type,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }

    def record(
        self, parent: KubeObject, *, reason: str, message: str, type: str = "Normal"
    ) -> bool:
        """Record an Event on ``parent``: a new one, or a repeat counted on the Event recorded
        before; False (and a log line) when the server refused it."""
        event = self.event_for(parent, reason=reason, message=message, type=type)
        key = self._key(event)
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None:
                self._seen.move_to_end(key)
        if seen is not None:
            bumped = self._bump(seen, event)
            if bumped is not None:
                return bumped
        try:
            self.client.create(event)
        except ApiError as exc:
            _log.warning("could not record event %s on %s: %s", reason, ObjectRef.of(parent), exc)
            return False
        meta = event["metadata"]
        with self._lock:
            self._seen[key] = _Seen(name=meta["name"], namespace=meta["namespace"], count=1,
                                    first=event["firstTimestamp"])
            self._seen.move_to_end(key)
            while len(self._seen) > self.cache_size:
                self._seen.popitem(last=False)
        return True

    def _bump(self, seen: _Seen, event: Mapping[str, Any]) -> bool | None:
        """Count ``event`` on the Event recorded before: True, False when the server refused
        the patch, None when that Event is gone (expired or deleted)."""
        with self._lock:
            seen.count += 1
            count = seen.count
        patch = {"count": count, "lastTimestamp": event["lastTimestamp"]}
        try:
            self.client.patch("v1", "Event", seen.name, patch,
                              patch_type="application/merge-patch+json",
                              namespace=seen.namespace)
        except NotFoundError:
            return None  # the caller creates a new Event
        except ApiError as exc:
            _log.warning("could not count event %s again (%s/%s): %s", event["reason"],
                         seen.namespace, seen.name, exc)
            return False
        return True

    def _key(self, event: Mapping[str, Any]) -> _EventKey:
        involved = event["involvedObject"]
        return (
            str(event["metadata"]["namespace"]),
            f"{involved.get('kind')}/{involved.get('uid') or involved.get('name')}",
            str(event["type"]), str(event["reason"]), str(event["message"]), self.component,
        )

