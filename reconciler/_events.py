"""Kubernetes Events on a parent: what people see in ``kubectl describe`` after a reconcile.

``v1`` Events involving the parent: the parent reconcile records one per kind of change (created,
updated, recreated, deleted) naming each child concerned, and a warning naming the failed ones.
Recording is best effort: a refused or failed Event never fails the reconcile (it is logged
instead). Messages name objects and actions only, never field values, so Secret data cannot leak
through them.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from builders import ObjectRef
from reconciler._clients import ClusterClient, KubeObject
from reconciler._clocks import Clock, RealClock
from reconciler._errors import ApiError
from reconciler._times import format_time

__all__ = ["EventRecorder"]

_log = logging.getLogger(__name__)
_MAX_MESSAGE = 16384


class EventRecorder:
    """Creates ``v1`` Events about a parent object, reported by ``component``."""

    def __init__(
        self, client: ClusterClient, *, component: str, clock: Clock | None = None
    ) -> None:
        self.client = client
        self.component = component
        self.clock: Clock = clock if clock is not None else RealClock()

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
            "message": message if len(message) <= _MAX_MESSAGE else (
                message[: _MAX_MESSAGE - 16] + " ... (truncated)"
            ),
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
        """Create one Event on ``parent``; False (and a log line) when the server refused it."""
        event = self.event_for(parent, reason=reason, message=message, type=type)
        try:
            self.client.create(event)
        except ApiError as exc:
            _log.warning("could not record event %s on %s: %s", reason, ObjectRef.of(parent), exc)
            return False
        return True
