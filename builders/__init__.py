"""Pure desired-state builders: what an operator wants the cluster to hold, as plain functions.

A :data:`ResourceBuilder` is a zero-argument callable returning ``(object, DesiredState)``; an
operator is a function of its parent object returning a list of them. This facade holds what an
operator author calls: the builder model (:class:`DesiredState` and its hooks), the ways to make
and combine builders (:func:`resource_builder`, :func:`compose`, :func:`present_if`,
:func:`for_each`, :class:`Component`, :func:`shared`, :func:`placed`), the child identity helpers
(DESIGN.md section 5), :func:`overrides`, the declared :class:`Inputs` a build may read, and
the errors. The rest is in public submodules: :mod:`builders.objects` (keyword-only object
helpers), :mod:`builders.names`
(label keys, names, validators), :mod:`builders.schemas` (validation against the Kubernetes
schemas), :mod:`builders.specs` (typed parent specs and generated CRDs; :func:`spec_of` and
:func:`crd_for` are here too), :mod:`builders.convert` (client models as dicts),
:mod:`builders.inputs` (declared inputs' errors and digests), :mod:`builders.composition`
(running one builder, readable names), :mod:`builders.helm` (existing Helm charts rendered by
Helm's own engine as builders, the ``helm`` extra) and the Hypothesis testing kit
:mod:`builders.testing`.
It never talks to a cluster (that is ``reconciler``'s job) and imports neither ``kubernetes``
nor ``reconciler``. See ``docs/builders.md``.
"""

from __future__ import annotations

from builders._compose import (
    Builders,
    Component,
    ResourceBuilder,
    absent,
    compose,
    for_each,
    placed,
    present_if,
    resource_builder,
    run_builders,
    shared,
)
from builders._crds import crd_for
from builders._errors import BuilderError, BuilderFailedError, InvalidSpecError
from builders._identity import ObjectRef
from builders._inputs import Inputs
from builders._names import child_name, selector_labels, standard_labels
from builders._objects import child_meta
from builders._overrides import overrides, with_overrides
from builders._specs import spec_of
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

__all__ = [
    "BeforeCreate",
    "BeforeDelete",
    "BeforeUpdate",
    "BuilderError",
    "BuilderFailedError",
    "Builders",
    "Component",
    "DesiredState",
    "Inputs",
    "InvalidSpecError",
    "KubeObject",
    "ObjectRef",
    "ResourceBuilder",
    "ShouldUpdate",
    "StateKind",
    "absent",
    "child_meta",
    "child_name",
    "compose",
    "crd_for",
    "for_each",
    "keep_cluster_ip",
    "keep_hpa_replicas",
    "overrides",
    "placed",
    "present_if",
    "resource_builder",
    "run_builders",
    "selector_labels",
    "shared",
    "spec_of",
    "standard_labels",
    "with_overrides",
]
