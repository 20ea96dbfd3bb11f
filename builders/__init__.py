"""Pure desired-state builders: what an operator wants the cluster to hold, as plain functions.

A :data:`ResourceBuilder` is a zero-argument callable returning ``(object, DesiredState)``; an
operator is a function of its parent object returning a list of them. This package holds the
builder model, the helpers that make and combine builders and the object helpers; it never talks
to a cluster (that is ``reconciler``'s job) and imports neither ``kubernetes`` nor ``reconciler``.
The Hypothesis testing kit lives in :mod:`builders.testing`.
"""

from __future__ import annotations

from collections.abc import Callable

from builders._state import (
    BeforeCreate,
    BeforeDelete,
    BeforeUpdate,
    DesiredState,
    KubeObject,
    ShouldUpdate,
    StateKind,
    keep_cluster_ip,
    keep_hpa_replicas,
)

ResourceBuilder = Callable[[], tuple[KubeObject, DesiredState]]
"""A pure, zero-argument callable returning one object and the state it should be in."""

__all__ = [
    "BeforeCreate",
    "BeforeDelete",
    "BeforeUpdate",
    "DesiredState",
    "KubeObject",
    "ResourceBuilder",
    "ShouldUpdate",
    "StateKind",
    "keep_cluster_ip",
    "keep_hpa_replicas",
]
