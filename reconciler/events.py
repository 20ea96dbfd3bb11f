"""Kubernetes Events on a parent: the recorder the parent reconcile reports through.

This public module only re-exports (the implementation is private); see ``docs/reconciler.md``.
"""

from __future__ import annotations

from reconciler._reconcile.events import EventRecorder

__all__ = ["EventRecorder"]
