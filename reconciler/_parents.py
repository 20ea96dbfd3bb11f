"""The parent reconcile: run one parent's builders and bring every child to its desired state.

``ParentReconciler.reconcile(parent)`` is a plain call (the driver's work queue calls it, and so can
a test or a script). It builds the children, stamps the identity of DESIGN.md section 5 on each
(labels, controller owner reference, namespace), reads the live children with one LIST per kind
(by the ``optk.dev/owner-uid`` label) instead of one GET per child, reconciles every child through
``ResourceReconciler`` (one child's error never stops the others), optionally prunes children that
are ours and no longer built (per-kind allow-list), records Events on the parent, and writes the
parent's status conditions (DESIGN.md section 6) only when they changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import attrs

from builders import BuilderFailedError, DesiredState, ResourceBuilder
from builders.composition import evaluate
from builders.convert import is_client_model, to_plain_object
from builders.names import (
    COMPONENT_LABEL,
    INSTANCE_LABEL,
    MANAGED_BY_LABEL,
    OWNER_UID_LABEL,
    label_value,
    owner_reference,
)
from reconciler._caches import PassThroughCache, ReadCache
from reconciler._clients import ClusterClient, KubeObject
from reconciler._clocks import Clock, RealClock
from reconciler._errors import ApiError, NotFoundError, ObjectRef, ReconcilerError
from reconciler._events import EventRecorder, parse_rfc3339, rfc3339
from reconciler._reconciling import (
    Action,
    ApiCall,
    ReconcileResult,
    ResourceReconciler,
    is_owned,
)

__all__ = ["ChildError", "ParentReconciler", "ParentResult", "parent_conditions"]

_log = logging.getLogger(__name__)

_EVENT_REASONS = {
    Action.CREATED: "Created",
    Action.UPDATED: "Updated",
    Action.RECREATED: "Recreated",
    Action.DELETED: "Deleted",
}

_Key = tuple[str, str, str | None, str]
_READ: Any = object()  # "read this child on its own"


@attrs.frozen(kw_only=True)
class ChildError:
    """One child that could not be reconciled, and why."""

    ref: ObjectRef
    message: str
    error: BaseException = attrs.field(eq=False, repr=False)

    @property
    def retry_after(self) -> float | None:
        """The server's ``Retry-After`` when it throttled this child's request."""
        return self.error.retry_after if isinstance(self.error, ApiError) else None


@attrs.frozen(kw_only=True)
class ParentResult:
    """The outcome of one parent reconcile: per child, pruned objects, status, requeue."""

    parent: ObjectRef
    children: tuple[ReconcileResult, ...] = ()
    pruned: tuple[ReconcileResult, ...] = ()
    errors: tuple[ChildError, ...] = ()
    status_written: bool = False
    status_error: str = ""
    api_calls: tuple[ApiCall, ...] = ()
    """Every request of this reconcile: lists, child reads and writes, status, events."""
    requeue_after: float | None = None
    """Seconds until the parent should be reconciled again (a child asked, or was throttled)."""
    dry_run: bool = False
    """True when nothing was written (no child, Event or status): a plan of what would be."""

    @property
    def ok(self) -> bool:
        """True when every child was reconciled and the status written (if needed)."""
        return not self.errors and not self.status_error

    @property
    def requeue(self) -> bool:
        """Whether a later reconcile was asked for (errors aside: the driver backs off on those)."""
        return self.requeue_after is not None

    @property
    def writes(self) -> int:
        """Write requests made (create, patch, update, delete), events and status included."""
        return sum(1 for c in self.api_calls if c.verb in ("create", "patch", "update", "delete"))


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _key(obj: Mapping[str, Any]) -> _Key:
    meta = _meta(obj)
    return (
        str(obj.get("apiVersion", "")), str(obj.get("kind", "")),
        meta.get("namespace") or None, str(meta.get("name", "")),
    )


def _ref_of_key(key: _Key) -> ObjectRef:
    return ObjectRef(api_version=key[0], kind=key[1], namespace=key[2], name=key[3])


def _condition(
    type_: str, ok: bool, *, reason: str, message: str, generation: Any
) -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
    }


def parent_conditions(
    *, generation: Any, errors: Sequence[ChildError], pending: Sequence[ReconcileResult],
    children: int,
) -> list[dict[str, Any]]:
    """The ``Reconciled`` and ``Ready`` conditions for one outcome (without transition times).

    ``Reconciled`` says whether every child was applied; ``Ready`` additionally needs nothing
    pending: no child waiting for a deletion to finish (reason ``ChildrenPending``) and none
    skipped because it is not ours (``ChildrenSkipped``). Messages list the per-child errors and
    reasons.
    """
    if errors:
        listed = "; ".join(f"{e.ref}: {e.message}" for e in errors)
        message = f"{len(errors)} of {children} children failed: {listed}"[:4096]
        return [
            _condition("Reconciled", False, reason="ChildrenFailed", message=message,
                       generation=generation),
            _condition("Ready", False, reason="ChildrenFailed", message=message,
                       generation=generation),
        ]
    reconciled = _condition(
        "Reconciled", True, reason="ReconcileSucceeded",
        message=f"all {children} children reconciled", generation=generation,
    )
    if pending:
        waiting = "; ".join(f"{r.ref}: {r.reason}" for r in pending)
        skipped = any(r.requeue_after is None for r in pending)
        ready = _condition("Ready", False, reason="ChildrenSkipped" if skipped else
                           "ChildrenPending", message=waiting[:4096], generation=generation)
    else:
        ready = _condition("Ready", True, reason="ChildrenReady",
                           message=f"all {children} children are as desired", generation=generation)
    return [reconciled, ready]


class ParentReconciler:
    """Reconciles parents of one kind: ``reconcile(parent) -> ParentResult``.

    ``build(parent)`` returns the parent's ``ResourceBuilder`` list, in order. ``operator_name``
    fills the ``app.kubernetes.io/managed-by`` label and is the Events' reporting component.
    ``prune_kinds`` lists the ``(apiVersion, kind)`` pairs whose unbuilt children (ours, found by
    the ``optk.dev/owner-uid`` label) are deleted; pruning is off when it is empty. Events and
    status writing can be switched off. ``dry_run`` writes nothing (server-side dry runs for
    creates and patches, no Events, no status): the result is a plan. The status (with
    ``lastReconcileTime``) is written only when its conditions or ``observedGeneration`` change,
    so a steady state makes no writes; the driver's restart-proof resync schedule needs no fresher
    time (it rests on its own heartbeat). ``status_refresh`` (seconds, default ``None``: off)
    optionally also rewrites the time once it is that old, at one write per parent per period.
    """

    def __init__(
        self,
        client: ClusterClient,
        build: Callable[[KubeObject], Iterable[ResourceBuilder]],
        *,
        operator_name: str,
        reader: ReadCache | None = None,
        resources: ResourceReconciler | None = None,
        prune_kinds: Collection[tuple[str, str]] = (),
        events: bool = True,
        write_status: bool = True,
        status_refresh: float | None = None,
        dry_run: bool = False,
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.build = build
        self.operator_name = operator_name
        self.clock: Clock = clock if clock is not None else RealClock()
        self.reader: ReadCache = reader if reader is not None else PassThroughCache(client)
        self.resources = resources if resources is not None else ResourceReconciler(
            client, reader=self.reader, clock=self.clock, dry_run=dry_run
        )
        if self.resources.dry_run != dry_run:
            raise ValueError("ParentReconciler(dry_run=...) must match its resources' dry_run")
        self.dry_run = dry_run
        self.prune_kinds = frozenset(prune_kinds)
        self.recorder = EventRecorder(client, component=operator_name, clock=self.clock) if (
            events and not dry_run
        ) else None
        self.write_status = write_status and not dry_run
        self.status_refresh = status_refresh
        self._no_status_subresource: set[tuple[str, str]] = set()

    # -- entry point ------------------------------------------------------------------------

    def reconcile(self, parent: KubeObject) -> ParentResult:
        """Reconcile every child of ``parent`` (a live object with a uid); never raises for a
        child's failure: those are in ``ParentResult.errors`` and in the parent's status."""
        if is_client_model(parent):
            parent = to_plain_object(parent)
        parent_ref = ObjectRef.of(parent)
        uid = _meta(parent).get("uid")
        if not uid or not parent_ref.name:
            raise ValueError(f"parent {parent_ref} must be a live object with metadata.uid")
        run = _ParentRun(self, parent, str(uid))
        return run.execute()

    # -- identity ---------------------------------------------------------------------------

    def decorate(self, parent: KubeObject, obj: KubeObject, state: DesiredState) -> dict[str, Any]:
        """``obj`` (a dict or an official model) with the namespace, labels and controller owner
        reference of section 5."""
        child = to_plain_object(obj) if is_client_model(obj) else dict(obj)
        meta = dict(_meta(child))
        parent_meta = _meta(parent)
        parent_ns = parent_meta.get("namespace") or None
        api_version, kind = str(child.get("apiVersion", "")), str(child.get("kind", ""))
        try:
            namespaced = self.client.is_namespaced(api_version, kind)
        except NotFoundError:
            namespaced = bool(meta.get("namespace") or parent_ns)
        if namespaced and not meta.get("namespace") and parent_ns:
            meta["namespace"] = parent_ns
        if not namespaced:
            meta.pop("namespace", None)
        if not state.is_absent:
            name = str(parent_meta.get("name", ""))
            labels = dict(meta.get("labels") or {})
            labels[MANAGED_BY_LABEL] = self.operator_name
            labels[INSTANCE_LABEL] = label_value(name)
            if COMPONENT_LABEL not in labels:
                child_name = str(meta.get("name", ""))
                component = child_name.removeprefix(f"{name}-") or kind.lower()
                labels[COMPONENT_LABEL] = label_value(component)
            labels[OWNER_UID_LABEL] = label_value(str(parent_meta.get("uid")))
            meta["labels"] = labels
            if parent_ns is None or meta.get("namespace") == parent_ns:
                owner = owner_reference(parent)
                others = [
                    ref for ref in meta.get("ownerReferences") or ()
                    if ref.get("uid") != owner["uid"] and not ref.get("controller")
                ]
                meta["ownerReferences"] = [*others, owner]
        child["metadata"] = meta
        return child


class _ParentRun:
    """One ``reconcile(parent)`` call."""

    def __init__(self, owner: ParentReconciler, parent: KubeObject, uid: str) -> None:
        self.o = owner
        self.parent = parent
        self.uid = uid
        self.ref = ObjectRef.of(parent)
        self.calls: list[ApiCall] = []
        self.results: list[ReconcileResult] = []
        self.errors: list[ChildError] = []
        self.changes: dict[str, list[ObjectRef]] = {}
        self.build_failed = False
        self.selector = f"{OWNER_UID_LABEL}={label_value(uid)}"

    def execute(self) -> ParentResult:
        built = self._build()
        live, unlisted = self._prefetch(built)
        built_keys = set()
        for key, obj, state in built:
            built_keys.add(key)
            failure = unlisted.get((key[0], key[1], key[2]))
            if failure is not None:
                # The list of its kind failed (throttled, server error): one GET per child
                # would only add load; the child fails with the list's error and is retried.
                self._fail(_ref_of_key(key), f"listing its kind failed: {failure}", failure)
            elif key in live:
                self._child(key, obj, state, live[key])
            elif state.is_absent:
                # Not labelled as ours: ABSENT must still find it by name.
                self._child(key, obj, state, _READ)
            else:
                # Missing from our labelled children: create; a taken name becomes an update.
                self._child(key, obj, state, None)
        pruned = self._prune(live, built_keys)
        self._emit_events()
        status_written, status_error = self._status(pruned)
        requeues = [r.requeue_after for r in (*self.results, *pruned) if r.requeue_after]
        requeues += [e.retry_after for e in self.errors if e.retry_after]
        return ParentResult(
            parent=self.ref, children=tuple(self.results), pruned=tuple(pruned),
            errors=tuple(self.errors), status_written=status_written, status_error=status_error,
            api_calls=tuple(self.calls), requeue_after=min(requeues) if requeues else None,
            dry_run=self.o.dry_run,
        )

    # -- children ---------------------------------------------------------------------------

    def _build(self) -> list[tuple[_Key, dict[str, Any], DesiredState]]:
        built: list[tuple[_Key, dict[str, Any], DesiredState]] = []
        try:
            builders = list(self.o.build(self.parent))
        except Exception as exc:
            self.build_failed = True
            self._fail(self.ref, f"build failed: {exc}", exc)
            return built
        for index, builder in enumerate(builders):
            try:
                # evaluate() converts client models, checks identity, and names the builder
                # and the parent in the BuilderFailedError it raises.
                obj, state = evaluate(builder, parent=self.parent)
                child = self.o.decorate(self.parent, obj, state)
            except Exception as exc:
                self.build_failed = True
                name = exc.builder if isinstance(exc, BuilderFailedError) else f"#{index}"
                where = ObjectRef(api_version="", kind="builder", name=name)
                self._fail(where, f"builder failed: {exc}", exc)
                continue
            built.append((_key(child), child, state))
        return built

    def _fail(self, ref: ObjectRef, message: str, exc: BaseException) -> None:
        _log.warning("reconcile of %s: %s: %s", self.ref, ref, message)
        self.errors.append(ChildError(ref=ref, message=message, error=exc))

    def _prefetch(
        self, built: Sequence[tuple[_Key, dict[str, Any], DesiredState]]
    ) -> tuple[dict[_Key, dict[str, Any]], dict[tuple[str, str, str | None], ReconcilerError]]:
        """Our live children, by one LIST per (kind, namespace) with the owner-uid selector;
        and the scopes whose list failed, with the error."""
        scopes: set[tuple[str, str, str | None]] = {(k[0], k[1], k[2]) for k, _, _ in built}
        parent_ns = self.ref.namespace
        for api_version, kind in self.o.prune_kinds:
            scopes.add((api_version, kind, parent_ns))
        live: dict[_Key, dict[str, Any]] = {}
        failed: dict[tuple[str, str, str | None], ReconcilerError] = {}
        for api_version, kind, namespace in sorted(scopes, key=str):
            if not self.o.reader.from_memory:
                self.calls.append(ApiCall(
                    verb="list",
                    ref=ObjectRef(api_version=api_version, kind=kind, name="", namespace=namespace),
                ))
            try:
                items = self.o.reader.list(
                    api_version, kind, namespace=namespace, label_selector=self.selector
                )
            except ReconcilerError as exc:
                _log.warning("listing %s %s for %s failed: %s", kind, api_version, self.ref, exc)
                failed[(api_version, kind, namespace)] = exc
                continue
            for item in items:
                live[_key(item)] = item
        return live, failed

    def _child(self, key: _Key, obj: dict[str, Any], state: DesiredState, live: Any) -> None:
        ref = _ref_of_key(key)
        try:
            if live is _READ:
                result = self.o.resources.reconcile_resource(obj, state, owner_uid=self.uid)
            else:
                result = self.o.resources.reconcile_resource(
                    obj, state, owner_uid=self.uid, live=live
                )
        except Exception as exc:
            self._fail(ref, str(exc), exc)
            return
        self._record(result)
        self.results.append(result)

    def _record(self, result: ReconcileResult) -> None:
        self.calls.extend(result.api_calls)
        reason = _EVENT_REASONS.get(result.action)
        if reason:
            self.changes.setdefault(reason, []).append(result.ref)

    def _emit_events(self) -> None:
        """One Event per kind of change, naming every child it concerns (aggregated as
        Kubernetes' own event correlator would, so a thousand creates are not a thousand
        Events); and a Warning listing the failed children."""
        if self.o.recorder is None:
            return
        for reason, refs in self.changes.items():
            what = "child" if len(refs) == 1 else f"{len(refs)} children"
            self._event(reason, f"{reason} {what}: " + ", ".join(str(r) for r in refs))
        if self.errors:
            self._event(
                "ReconcileError", f"{len(self.errors)} children failed: "
                + "; ".join(f"{e.ref}: {e.message}" for e in self.errors), "Warning",
            )

    def _event(self, reason: str, message: str, type_: str = "Normal") -> None:
        assert self.o.recorder is not None
        self.calls.append(ApiCall(verb="create", ref=ObjectRef(
            api_version="v1", kind="Event", name="", namespace=self.ref.namespace or "default",
        )))
        self.o.recorder.record(self.parent, reason=reason, message=message, type=type_)

    def _prune(
        self, live: Mapping[_Key, dict[str, Any]], built: set[_Key]
    ) -> list[ReconcileResult]:
        pruned: list[ReconcileResult] = []
        if not self.o.prune_kinds:
            return pruned
        if self.build_failed:  # an object a failed builder would have built is not "unbuilt"
            _log.warning("not pruning children of %s: a builder failed", self.ref)
            return pruned
        for key, obj in sorted(live.items(), key=lambda kv: str(kv[0])):
            if key in built or (key[0], key[1]) not in self.o.prune_kinds:
                continue
            if not is_owned(obj, owner_uid=self.uid)[0]:
                continue
            try:
                result = self.o.resources.reconcile_resource(
                    obj, DesiredState.ABSENT, owner_uid=self.uid, live=obj
                )
            except Exception as exc:
                self._fail(_ref_of_key(key), f"prune failed: {exc}", exc)
                continue
            self._record(result)
            pruned.append(result)
        return pruned

    # -- status -----------------------------------------------------------------------------

    def _status(self, pruned: Sequence[ReconcileResult]) -> tuple[bool, str]:
        if not self.o.write_status:
            return False, ""
        meta = _meta(self.parent)
        generation = meta.get("generation")
        pending = [
            r for r in (*self.results, *pruned)
            if r.requeue_after is not None or r.action is Action.SKIPPED
        ]
        wanted = parent_conditions(
            generation=generation, errors=self.errors, pending=pending,
            children=len(self.results) + len(self.errors),
        )
        current = self.parent.get("status")
        current = current if isinstance(current, Mapping) else {}
        now = self.o.clock.time()
        conditions, changed = _merge_conditions(current.get("conditions"), wanted, rfc3339(now))
        last = parse_rfc3339(current.get("lastReconcileTime"))
        refresh = self.o.status_refresh
        stale = last is None or (refresh is not None and now - last >= refresh)
        if not changed and current.get("observedGeneration") == generation and not stale:
            return False, ""
        patch = {"status": {
            "observedGeneration": generation,
            "lastReconcileTime": rfc3339(now),
            "conditions": conditions,
        }}
        return self._write_status(patch)

    def _write_status(self, patch: Mapping[str, Any]) -> tuple[bool, str]:
        kind = (self.ref.api_version, self.ref.kind)
        sub = None if kind in self.o._no_status_subresource else "status"
        while True:
            self.calls.append(ApiCall(verb="patch", ref=self.ref))
            try:
                self.o.client.patch(
                    self.ref.api_version, self.ref.kind, self.ref.name, patch,
                    patch_type="application/merge-patch+json", namespace=self.ref.namespace,
                    subresource=sub,
                )
            except NotFoundError as exc:
                if sub is None:
                    return False, f"parent is gone: {exc}"
                self.o._no_status_subresource.add(kind)  # 404 on /status: no such subresource
                sub = None
                continue
            except ApiError as exc:
                return False, f"status write failed: {exc}"
            return True, ""


def _merge_conditions(
    existing: Any, wanted: Sequence[Mapping[str, Any]], now: str
) -> tuple[list[dict[str, Any]], bool]:
    """Existing conditions with ours replaced (transition time kept unless the status flips)."""
    old = [dict(c) for c in existing or () if isinstance(c, Mapping)]
    by_type = {c.get("type"): c for c in old}
    changed = False
    merged_ours: dict[Any, dict[str, Any]] = {}
    for cond in wanted:
        before = by_type.get(cond["type"])
        new = dict(cond)
        if before is not None and before.get("status") == cond["status"]:
            new["lastTransitionTime"] = before.get("lastTransitionTime") or now
        else:
            new["lastTransitionTime"] = now
        if before is None or any(before.get(k) != v for k, v in new.items()):
            changed = True
        merged_ours[cond["type"]] = new
    result = [merged_ours.pop(c.get("type")) if c.get("type") in merged_ours else c for c in old]
    result.extend(merged_ours.values())
    return result, changed

