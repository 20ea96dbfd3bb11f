"""People stay in control: pauses, per-object policies and the drift mode, decided in pure code.

Why it exists: a user steps in on one object (``optk.dev/paused: "true"`` on a parent,
``optk.dev/policy`` and ``optk.dev/ignore-fields`` on a child) or on the whole operator
(``Policies(paused=..., paused_namespaces=..., drift=..., ignore_fields=...)``, ``optk run
--paused``/``--pause-namespace``, ``OPTK_PAUSED``/``OPTK_PAUSED_NAMESPACES``), and the planner
must honour it without any I/O. This module reads those annotations (a bad value is an error
naming the object and the annotation), turns ``optk.dev/ignore-fields`` JSON pointers into
``objectmatcher`` ignore options, and restricts a ``ChildPlan`` to the writes a policy or the
drift mode allows (:func:`restrict_plan`), saying which field paths drifted.

Its boundary: it decides, it never executes and never counts. ``reconciler._reconcile.guard``
applies these decisions (and ``contention``'s) to each plan; ``reconciler._reconcile.parents``
asks :meth:`PauseSettings.reason` before a parent's reconcile; the table of policies is in
docs/driver.md.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import attrs

from builders import ObjectRef
from builders.names import COMPONENT_LABEL, INSTANCE_LABEL, MANAGED_BY_LABEL, OWNER_UID_LABEL
from objectmatcher import LAST_APPLIED_ANNOTATION, MatchOption, ignore_field
from reconciler._base.errors import PolicyAnnotationError, ReconcilerUsageError
from reconciler._base.text import quoted
from reconciler._reconcile.applying import APPLIED_DIGEST_ANNOTATION
from reconciler._reconcile.planning import ChildPlan, PlanAction

__all__ = [
    "IGNORE_FIELDS_ANNOTATION",
    "PAUSED_ANNOTATION",
    "POLICY_ANNOTATION",
    "ChildPolicy",
    "DriftMode",
    "PauseSettings",
    "PolicyAnnotationError",
    "applied_record",
    "child_policy",
    "drift_paths",
    "identity_reached",
    "ignore_options",
    "json_pointer",
    "parse_ignore_fields",
    "refused_ignore_fields",
    "restrict_plan",
]

PAUSED_ANNOTATION = "optk.dev/paused"
"""On a parent: ``"true"`` stops every write for it and its children (``"false"``: not paused)."""
POLICY_ANNOTATION = "optk.dev/policy"
"""On a child: ``ignore``, ``create-only``, ``no-prune`` or ``observe`` (:class:`ChildPolicy`)."""
IGNORE_FIELDS_ANNOTATION = "optk.dev/ignore-fields"
"""On a child: comma-separated JSON pointers (``/spec/replicas``) the toolkit never compares."""


class ChildPolicy(enum.Enum):
    """What the toolkit may do to one child (``optk.dev/policy``; docs/driver.md has the table)."""

    REPAIR = "repair"
    """No annotation: create, patch, delete as the desired state says."""
    IGNORE = "ignore"
    """Never touched: no create, patch or delete."""
    CREATE_ONLY = "create-only"
    """Created when missing, never patched (deleted when its state or pruning says so)."""
    NO_PRUNE = "no-prune"
    """Never deleted (neither pruned nor by an ``ABSENT`` state); created and patched."""
    OBSERVE = "observe"
    """Drift reported on the parent, never written."""


class DriftMode(enum.Enum):
    """``Policies(drift=...)``: what a changed child gets when the parent did not change."""

    REPAIR = "repair"
    """Patch it back (the default)."""
    WARN = "warn"
    """Report it (``Drifted`` condition on the parent, one Event, ``optk_drifted_objects``),
    do not write it; a change of the parent's spec is still applied."""


_TRUE = frozenset({"true"})
_FALSE = frozenset({"false", ""})


def _annotations(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = (obj or {}).get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return annotations if isinstance(annotations, Mapping) else {}


@attrs.frozen(kw_only=True)
class PauseSettings:
    """Which parents are paused besides those annotated ``optk.dev/paused: "true"``.

    ``everything`` pauses the operator (``optk run --paused``, ``OPTK_PAUSED=1``);
    ``namespaces`` pauses the parents of those namespaces (``--pause-namespace``,
    ``OPTK_PAUSED_NAMESPACES=a,b``). A parent paused by its annotation gets the status
    condition that says so (the one write it takes); an operator- or namespace-wide pause,
    meant for maintenance, writes nothing at all."""

    everything: bool = False
    namespaces: frozenset[str] = frozenset()

    @classmethod
    def of(cls, *, paused: bool, namespaces: Iterable[str],
           environ: Mapping[str, str]) -> PauseSettings:
        """The settings from code (``Operator``) and environment (``OPTK_PAUSED``,
        ``OPTK_PAUSED_NAMESPACES``)."""
        flag = environ.get("OPTK_PAUSED", "").strip().lower()
        if flag not in ("", "0", "1", "true", "false"):
            raise ReconcilerUsageError(f"OPTK_PAUSED={flag!r}: expected 1, 0, true or false")
        listed = [n.strip() for n in environ.get("OPTK_PAUSED_NAMESPACES", "").split(",")]
        names: set[str] = {*namespaces, *(n for n in listed if n)}
        return cls(everything=paused or flag in ("1", "true"), namespaces=frozenset(names))

    def reason(self, parent: Mapping[str, Any]) -> tuple[str, bool] | None:
        """Why ``parent`` is paused and whether that pause may write its status condition;
        None when it is not paused. An unreadable annotation pauses (nothing is written
        before it is fixed) and raises nothing: the reason names it."""
        if self.everything:
            return "the operator is paused (--paused or OPTK_PAUSED)", False
        meta = parent.get("metadata")
        namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
        if namespace and namespace in self.namespaces:
            return (f"namespace {namespace} is paused (--pause-namespace or "
                    "OPTK_PAUSED_NAMESPACES)"), False
        value = _annotations(parent).get(PAUSED_ANNOTATION)
        if value is None or str(value).strip().lower() in _FALSE:
            return None
        if str(value).strip().lower() in _TRUE:
            return f"annotation {PAUSED_ANNOTATION} is \"true\"", True
        error = PolicyAnnotationError(ref=ObjectRef.of(parent), annotation=PAUSED_ANNOTATION,
                                      value=value, expected="true or false")
        return str(error), True


def child_policy(live: Mapping[str, Any] | None) -> ChildPolicy:
    """The policy a live child's ``optk.dev/policy`` annotation sets (``REPAIR`` without one,
    or for a missing child); :class:`PolicyAnnotationError` for an unknown value."""
    value = _annotations(live).get(POLICY_ANNOTATION)
    if value is None or value == "":
        return ChildPolicy.REPAIR
    try:
        return ChildPolicy(str(value).strip().lower())
    except ValueError:
        assert live is not None
        raise PolicyAnnotationError(
            ref=ObjectRef.of(live), annotation=POLICY_ANNOTATION, value=value,
            expected="ignore, create-only, no-prune or observe") from None


_NEVER_DELETED = frozenset({ChildPolicy.IGNORE, ChildPolicy.NO_PRUNE, ChildPolicy.OBSERVE})
_PATCHED = frozenset({ChildPolicy.REPAIR, ChildPolicy.NO_PRUNE})


def patch_allowed(live: Mapping[str, Any] | None) -> bool:
    """Whether a live child's policy lets the toolkit patch it: none, or ``no-prune``. Under
    ``ignore``, ``create-only`` and ``observe`` no patch is sent, bookkeeping included (a
    sharded owner's shard label); nor under an unknown value (such a child fails with
    :class:`PolicyAnnotationError` where it is written, and nothing is written to it)."""
    try:
        return child_policy(live) in _PATCHED
    except PolicyAnnotationError:
        return False


def kept_by_policy(live: Mapping[str, Any] | None) -> bool:
    """Whether a live child's policy forbids deleting it (``ignore``, ``no-prune``,
    ``observe``): it stays, and nothing should wait for it to go. An unknown value is not a
    policy that keeps (the child fails with :class:`PolicyAnnotationError` where it is
    written)."""
    try:
        return live is not None and child_policy(live) in _NEVER_DELETED
    except PolicyAnnotationError:
        return False


_IDENTITY: tuple[tuple[tuple[str, ...], str], ...] = (
    (("apiVersion",), "apiVersion"),
    (("kind",), "kind"),
    (("metadata", "name"), "its name"),
    (("metadata", "namespace"), "its namespace"),
    (("metadata", "ownerReferences"), "its owner references"),
    (("metadata", "finalizers"), "its finalizers (items are addressed by position)"),
    *((("metadata", "labels", label), f"the label {label}")
      for label in (MANAGED_BY_LABEL, INSTANCE_LABEL, COMPONENT_LABEL, OWNER_UID_LABEL)),
    (("metadata", "annotations", "optk.dev/"), "the toolkit's optk.dev/ annotations"),
)
"""What the toolkit keeps on every child (DESIGN.md section 5) and compares whatever a child's
annotation says: an ``optk.dev/ignore-fields`` pointer reaching into one of them is refused.
The last key of the annotations entry is a prefix: every ``optk.dev/`` annotation."""

_LISTS = frozenset({"ownerReferences", "finalizers"})  # kept fields with fields inside them
_ESCAPE = re.compile(r"~(?![01])")


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _token_reaches(token: str, kept: str) -> bool:
    if token == "*":
        return True
    return token.startswith(kept) if kept.endswith("/") else token == kept


def identity_reached(path: Sequence[str]) -> str | None:
    """What of the identity the toolkit keeps the ignored key ``path`` would leave out of the
    comparison (``"its owner references"``; several joined by commas), or None. A path reaches
    an identity field when it names it, a field above it (``/metadata``, ``/metadata/labels``),
    a field inside it (an owner reference's ``uid``), or any of these through ``*``."""
    reached = [what for kept, what in _IDENTITY
               if (len(path) <= len(kept) or kept[-1] in _LISTS)
               and all(_token_reaches(t, k) for t, k in zip(path, kept, strict=False))]
    return ", ".join(reached) or None


def _pointers(text: str, *, ref: ObjectRef | None,
              annotation: str) -> list[tuple[str, tuple[str, ...]]]:
    """Each pointer of ``text`` with its key path; a malformed one raises (naming it)."""
    found = []
    for raw in text.split(","):
        pointer = raw.strip()
        if not pointer:
            continue
        why = ("it must start with /" if not pointer.startswith("/") else
               "it has an empty key" if "" in pointer[1:].split("/") else
               "~ must be followed by 0 or 1" if _ESCAPE.search(pointer) else None)
        if why is not None:
            raise _refused(ref, annotation, text,
                           f"{quoted(pointer)} is not a JSON pointer such as /spec/replicas: "
                           f"{why}")
        found.append((pointer, tuple(_unescape(token) for token in pointer[1:].split("/"))))
    return found


def _refused(ref: ObjectRef | None, annotation: str, text: str, why: str,
             **written: str) -> PolicyAnnotationError:
    return PolicyAnnotationError(
        ref=ref or ObjectRef(api_version="", kind="Operator", name="ignore_fields"),
        annotation=annotation, value=text, expected=why, **written)


def parse_ignore_fields(text: str, *, ref: ObjectRef | None = None) -> tuple[tuple[str, ...], ...]:
    """Comma-separated JSON pointers (RFC 6901: ``/spec/replicas``,
    ``/metadata/annotations/example.com~1owner``) as key paths; ``*`` is any key or item.
    :class:`PolicyAnnotationError` names a malformed pointer, or one reaching the identity the
    toolkit keeps (:func:`identity_reached`)."""
    paths = []
    for pointer, path in _pointers(text, ref=ref, annotation=IGNORE_FIELDS_ANNOTATION):
        if (what := identity_reached(path)) is not None:
            raise _refused(ref, IGNORE_FIELDS_ANNOTATION, text, _identity_why(pointer, what))
        paths.append(path)
    return tuple(paths)


def _identity_why(pointer: str, what: str) -> str:
    return (f"pointer {quoted(pointer)} reaches {what}, which the toolkit keeps on every child; "
            "it is compared and repaired whatever the annotation says")


def _annotated_paths(live: Mapping[str, Any] | None) -> tuple[
        list[tuple[str, ...]], list[tuple[str, str]]]:
    """The live child's ``optk.dev/ignore-fields`` paths it honours, and the pointers it
    refuses with what they reach; a malformed annotation raises."""
    value = _annotations(live).get(IGNORE_FIELDS_ANNOTATION)
    if not value:
        return [], []
    assert live is not None
    honoured, refused = [], []
    for pointer, path in _pointers(str(value), ref=ObjectRef.of(live),
                                   annotation=IGNORE_FIELDS_ANNOTATION):
        if (what := identity_reached(path)) is not None:
            refused.append((pointer, what))
        else:
            honoured.append(path)
    return honoured, refused


def ignore_options(live: Mapping[str, Any] | None,
                   declared: Collection[str] = ()) -> tuple[MatchOption, ...]:
    """``objectmatcher`` options ignoring the operator's ``declared`` pointers and those of the
    live child's ``optk.dev/ignore-fields`` annotation: :class:`PolicyAnnotationError` for a
    malformed one; a pointer reaching the identity the toolkit keeps is left out (the
    identity is compared and repaired; :func:`refused_ignore_fields` reports it)."""
    paths = list(parse_ignore_fields(",".join(declared)))
    paths.extend(_annotated_paths(live)[0])
    return tuple(ignore_field(path) for path in dict.fromkeys(paths))


def refused_ignore_fields(live: Mapping[str, Any] | None) -> PolicyAnnotationError | None:
    """The error that names the live child's ``optk.dev/ignore-fields`` pointers reaching the
    identity the toolkit keeps (left out by :func:`ignore_options`), or None (none, or a
    malformed annotation: :func:`ignore_options` raises for that)."""
    try:
        refused = _annotated_paths(live)[1]
    except PolicyAnnotationError:
        return None
    if not refused:
        return None
    assert live is not None
    return _refused(ObjectRef.of(live), IGNORE_FIELDS_ANNOTATION,
                    str(_annotations(live).get(IGNORE_FIELDS_ANNOTATION)),
                    "; ".join(_identity_why(p, what) for p, what in refused),
                    written="the other pointers are honoured, the identity is repaired")


def json_pointer(path: Iterable[Any]) -> str:
    """A diff path (keys and list indexes) as a JSON pointer: ``/spec/replicas``."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


_ANNOTATION_PATH = ("metadata", "annotations", LAST_APPLIED_ANNOTATION)


def drift_paths(plan: ChildPlan) -> tuple[str, ...]:
    """The field paths a patch plan would change, as JSON pointers (the record aside)."""
    return tuple(dict.fromkeys(
        json_pointer(item.path) for item in plan.diff if tuple(item.path[:3]) != _ANNOTATION_PATH
    ))


def applied_record(obj: Mapping[str, Any] | None) -> str | None:
    """What records the build the toolkit wrote last on ``obj`` (a live child or a patch
    body): its last-applied annotation, or, written by server-side apply, the digest of the
    apply configuration (``optk.dev/applied-digest``); None when it has neither."""
    annotations = _annotations(obj)
    found = annotations.get(LAST_APPLIED_ANNOTATION, annotations.get(APPLIED_DIGEST_ANNOTATION))
    return None if found is None else str(found)


def undoes_drift(plan: ChildPlan) -> bool:
    """Whether a patch plan only undoes someone else's change: the object as built is what the
    toolkit last applied (the live record, the last-applied annotation or the digest of the
    server-side apply configuration, equals the new one), so the parent did not change."""
    if plan.action is not PlanAction.PATCH or plan.live is None or not isinstance(
            plan.body, Mapping):  # a JSON patch body (a strategy migration) undoes nothing
        return False
    ours = applied_record(plan.body)
    return ours is not None and applied_record(plan.live) == ours


def _held(plan: ChildPlan, why: str, *, drift: tuple[str, ...] = ()) -> ChildPlan:
    return attrs.evolve(plan, action=PlanAction.UNCHANGED, reason=why, body=None,
                        requeue=False, drift=drift, held=why)


def restrict_plan(plan: ChildPlan, *, policy: ChildPolicy,
                  drift: DriftMode = DriftMode.REPAIR) -> ChildPlan:
    """``plan`` restricted to the writes ``policy`` and the ``drift`` mode allow.

    A held write becomes ``UNCHANGED`` with ``held`` saying why; a held patch names the drifted
    field paths in ``drift`` (a held create of an observed child: ``("",)``, all of it).
    """
    if not plan.writes:
        return plan
    action = plan.action
    if policy is ChildPolicy.IGNORE:
        return _held(plan, f"policy ignore: {action.value} not sent")
    if policy is ChildPolicy.OBSERVE:
        paths = drift_paths(plan) if action is PlanAction.PATCH else ("",)
        return _held(plan, f"policy observe: {action.value} not sent, drift reported",
                     drift=paths)
    if policy is ChildPolicy.CREATE_ONLY and action in (PlanAction.PATCH, PlanAction.RECREATE):
        return _held(plan, f"policy create-only: {action.value} not sent")
    if policy is ChildPolicy.NO_PRUNE and action is PlanAction.DELETE:
        return _held(plan, "policy no-prune: delete not sent")
    if drift is DriftMode.WARN and undoes_drift(plan):
        return _held(plan, "drift mode warn: patch not sent, drift reported",
                     drift=drift_paths(plan))
    return plan
