"""The verbs of the Kubernetes API on stored objects: what a real apiserver's registry does.

``Operations`` implements get, list, create, update, patch, delete and deletecollection for any
served type: server-managed metadata (``uid``, ``creationTimestamp``, ``generation``,
``resourceVersion``, ``generateName``), optimistic concurrency (409), namespace lifecycle
(404/403), status subresources, no-op updates that keep the ``resourceVersion``, finalizers and
``deletionTimestamp``, propagation policies (the ``orphan``/``foregroundDeletion`` finalizers),
dry run, list snapshots at a version and continue tokens. Per-kind rules come from the
``KindStrategy`` of ``_kinds``; storage and the event log from ``_storage``. No HTTP here: inputs
are decoded bodies and query values, failures are ``ApiStatusError``.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import uuid
from collections.abc import Mapping
from typing import Any

import attrs
import yaml

from reconciler.embedded._applying import apply_fields, managed_after_apply, remove_fields
from reconciler.embedded._encoding import load_yaml
from reconciler.embedded._kinds import Invalid, KindRegistry, ResourceType, ServerContext
from reconciler.embedded._patching import MERGE_PATCH, STRATEGIC_MERGE_PATCH, apply_patch
from reconciler.embedded._selectors import FieldSelector, LabelSelector
from reconciler.embedded._statuses import (
    ApiStatusError,
    already_exists,
    bad_request,
    conflict,
    expired,
    invalid,
    invalid_options,
    namespace_terminating,
    not_found,
    status_body,
    success_status,
)
from reconciler.embedded._storage import Bucket, Storage, TooOld
from reconciler.embedded._times import now_timestamp

__all__ = [
    "FIELD_VALIDATION_DIRECTIVES",
    "ListQuery",
    "Operations",
    "Target",
    "copy_json",
    "warning_header",
]

NAMESPACES: Bucket = ("", "namespaces")
CRDS: Bucket = ("apiextensions.k8s.io", "customresourcedefinitions")
ORPHAN_FINALIZER = "orphan"
FOREGROUND_FINALIZER = "foregroundDeletion"
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
# Kinds whose registry answers a DELETE with the deleted object instead of a Success Status
# (``ReturnDeletedObject`` in kube-apiserver's storage for them).
_RETURNS_DELETED_OBJECT: frozenset[Bucket] = frozenset({
    ("", "pods"), ("", "services"), ("", "serviceaccounts"),
})
_SERVER_METADATA = (
    "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
    "generation", "selfLink",
)
_LIST_TOO_OLD = "The resourceVersion for the provided list is too old."
_CONTINUE_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list."
)


ManagedFields = list[dict[str, Any]]
"""``metadata.managedFields`` entries."""

Warnings = list[str]
"""Warning texts a write collects for the ``Warning`` response header."""


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists, scalars), faster than ``copy.deepcopy``."""
    if isinstance(value, Mapping):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


@attrs.frozen(kw_only=True)
class ListQuery:
    """The decoded query of a list request."""

    labels: LabelSelector = attrs.field(factory=LabelSelector)
    fields: FieldSelector = attrs.field(factory=FieldSelector)
    limit: int = 0
    continue_token: str | None = None
    resource_version: str | None = None
    resource_version_match: str | None = None


@attrs.frozen(kw_only=True)
class Target:
    """The object a request addresses: its type, namespace ("" when cluster-scoped) and name."""

    rt: ResourceType
    namespace: str
    name: str

    @property
    def storage_namespace(self) -> str:
        """The namespace objects of this type are stored under ("" for cluster-scoped)."""
        return self.namespace if self.rt.namespaced else ""


def _encode_continue(rv: int, start: str) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        return int(data["rv"]), str(data["start"])
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise bad_request(f"continue key is not valid: {exc}") from exc


FIELD_VALIDATION_DIRECTIVES = ("Ignore", "Warn", "Strict")
"""The values of the ``fieldValidation`` query parameter; absent means ``Warn`` (1.25)."""


def warning_header(warnings: Warnings) -> dict[str, str]:
    """The ``Warning`` response header carrying ``warnings`` (RFC 7234 code 299, agent ``-``,
    Go-quoted text), one comma-separated value for all; empty when there is none."""
    if not warnings:
        return {}
    return {"Warning": ", ".join(f"299 - {json.dumps(text)}" for text in warnings)}


def _strict_decoding_error(unknown: list[str]) -> str:
    return "strict decoding error: " + ", ".join(f'unknown field "{path}"' for path in unknown)


def _strip_for_list(obj: Mapping[str, Any], rt: ResourceType) -> Mapping[str, Any]:
    if rt.is_custom:
        return _served(obj, rt)
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}


def _served(obj: Mapping[str, Any], rt: ResourceType) -> Mapping[str, Any]:
    """``obj`` as served at ``rt``'s version (custom resources are stored version-agnostic)."""
    if obj.get("apiVersion") == rt.api_version and obj.get("kind") == rt.kind:
        return obj
    return {**obj, "apiVersion": rt.api_version, "kind": rt.kind}


class Operations:
    """The API verbs over one ``Storage`` and one ``KindRegistry``."""

    def __init__(
        self, storage: Storage, registry: KindRegistry, context: ServerContext
    ) -> None:
        self.storage = storage
        self.registry = registry
        self.context = context

    # -- helpers --------------------------------------------------------------------------

    @staticmethod
    def bucket(rt: ResourceType) -> Bucket:
        """Where objects of ``rt`` are stored."""
        return (rt.group, rt.plural)

    def served(self, obj: Mapping[str, Any], rt: ResourceType) -> Mapping[str, Any]:
        """``obj`` with the ``apiVersion``/``kind`` of the endpoint it is served from."""
        return _served(obj, rt)

    def _existing(self, target: Target) -> Mapping[str, Any]:
        obj = self.storage.get(
            self.bucket(target.rt), namespace=target.storage_namespace, name=target.name
        )
        if obj is None:
            raise not_found(target.rt, target.name)
        return obj

    def _check_namespace(self, rt: ResourceType, *, namespace: str, name: str) -> None:
        if not rt.namespaced:
            return
        ns = self.storage.get(NAMESPACES, namespace="", name=namespace)
        if ns is None:
            raise not_found(None, namespace, plural="namespaces")
        if _meta(ns).get("deletionTimestamp"):
            raise namespace_terminating(rt, name, namespace=namespace)

    def _check_body(
        self, rt: ResourceType, body: Any, *, namespace: str, name: str | None
    ) -> dict[str, Any]:
        if not isinstance(body, Mapping):
            raise bad_request(
                f"the object provided is unrecognized (must be of type {rt.kind}): "
                "couldn't get version/kind; json parse error: not an object"
            )
        obj: dict[str, Any] = copy_json(body)
        api_version = obj.get("apiVersion")
        kind = obj.get("kind")
        if api_version not in (None, "", rt.api_version) and not rt.is_custom:
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({rt.api_version})"
            )
        if kind not in (None, "", rt.kind):
            raise bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
            )
        obj["apiVersion"] = rt.api_version
        obj["kind"] = rt.kind
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if rt.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and body_ns != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if name is not None:
            body_name = meta.get("name")
            if body_name and body_name != name:
                raise bad_request(
                    f"the name of the object ({body_name}) does not match the name on the URL "
                    f"({name})"
                )
            meta["name"] = name
        return obj

    def _check_fields(
        self, rt: ResourceType, obj: Mapping[str, Any], *, field_validation: str | None,
        warnings: Warnings | None, in_body: bool, options_kind: str,
    ) -> None:
        """``fieldValidation`` on a decoded body (``in_body``: a create or update, whose error
        names the kind) or a patched object: ``Strict`` answers 400 listing the unknown fields,
        ``Warn`` (the default) adds one warning per field, ``Ignore`` says nothing. The fields
        are dropped later either way."""
        directive = field_validation or "Warn"
        if directive not in FIELD_VALIDATION_DIRECTIVES:
            raise invalid_options(directive, options_kind=options_kind)
        if directive == "Ignore" or (directive == "Warn" and warnings is None):
            return
        unknown = self.registry.strategy(rt).unknown_fields(obj)
        if not unknown:
            return
        if directive == "Warn":
            assert warnings is not None
            warnings.extend(f'unknown field "{path}"' for path in unknown)
            return
        message = _strict_decoding_error(unknown)
        if in_body:
            message = (f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                       f"{message}")
        raise bad_request(message)

    def _invalid(self, rt: ResourceType, exc: Invalid, *, obj: Mapping[str, Any]) -> ApiStatusError:
        return invalid(rt, str(_meta(obj).get("name") or ""), causes=exc.causes)

    def _restore_allocations(self, allocated: set[str]) -> None:
        self.context.restore_cluster_ips(allocated)

    def _commit(
        self, rt: ResourceType, obj: dict[str, Any], *, event_type: str,
        old: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        with self.storage.lock:
            _meta(obj)["resourceVersion"] = str(self.storage.next_resource_version())
            self.storage.commit(self.bucket(rt), obj, event_type=event_type, old=old)
        return obj

    # -- reads ----------------------------------------------------------------------------

    def get(self, target: Target) -> Mapping[str, Any]:
        """The stored object (404 when missing)."""
        return self.served(self._existing(target), target.rt)

    def list(
        self, rt: ResourceType, *, namespace: str | None, query: ListQuery
    ) -> dict[str, Any]:
        """A list body honouring selectors, ``limit``/``continue`` and ``resourceVersion``."""
        bucket = self.bucket(rt)
        ns = namespace if rt.namespaced else None
        start = ""
        with self.storage.lock:
            snapshot_rv = self.storage.resource_version
            if query.continue_token:
                snapshot_rv, start = _decode_continue(query.continue_token)
                try:
                    items = self.storage.snapshot(bucket, snapshot_rv, namespace=ns)
                except TooOld as exc:
                    fresh = _encode_continue(-1, start)
                    raise expired(_CONTINUE_TOO_OLD, continue_token=fresh) from exc
            else:
                exact = query.resource_version_match == "Exact" or (
                    query.limit > 0
                    and query.resource_version not in (None, "", "0")
                    and query.resource_version_match != "NotOlderThan"
                )
                if exact and query.resource_version not in (None, "", "0"):
                    try:
                        snapshot_rv = int(str(query.resource_version))
                    except ValueError as exc:
                        raise bad_request(
                            f"invalid resource version: {query.resource_version}"
                        ) from exc
                    try:
                        items = self.storage.snapshot(bucket, snapshot_rv, namespace=ns)
                    except TooOld as exc:
                        raise expired(_LIST_TOO_OLD) from exc
                else:
                    items = self.storage.items(bucket, ns)
        selected = [
            obj for obj in items
            if query.labels.matches(obj) and query.fields.matches(obj)
            and (not start or _list_key(obj) > start)
        ]
        metadata: dict[str, Any] = {"resourceVersion": str(snapshot_rv)}
        if query.limit > 0 and len(selected) > query.limit:
            page = selected[: query.limit]
            metadata["continue"] = _encode_continue(snapshot_rv, _list_key(page[-1]))
            if query.labels.empty and not query.fields.terms:
                metadata["remainingItemCount"] = len(selected) - query.limit
            selected = page
        return {
            "kind": rt.list_kind,
            "apiVersion": rt.api_version,
            "metadata": metadata,
            "items": [_strip_for_list(obj, rt) for obj in selected],
        }

    # -- create ---------------------------------------------------------------------------

    def create(
        self, rt: ResourceType, body: Any, *, namespace: str, dry_run: bool = False,
        managed_fields: ManagedFields | None = None, field_validation: str | None = None,
        warnings: Warnings | None = None,
    ) -> dict[str, Any]:
        """POST: a new object with server metadata, defaults and validation; 201 body.

        ``field_validation`` is the request's ``fieldValidation``; ``Warn`` warnings are
        appended to ``warnings`` (``None``: not collected).
        """
        obj = self._check_body(rt, body, namespace=namespace, name=None)
        self._check_fields(rt, obj, field_validation=field_validation, warnings=warnings,
                           in_body=True, options_kind="CreateOptions")
        meta = _meta(obj)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = str(meta["generateName"]) + "".join(
                random.choice(_NAME_CHARS) for _ in range(5)
            )
        name = str(meta.get("name") or "")
        self._check_namespace(rt, namespace=namespace, name=name)
        for field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds",
                      "selfLink", "managedFields"):
            meta.pop(field, None)
        if managed_fields:
            meta["managedFields"] = managed_fields
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_timestamp()
        if rt.has_generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        strategy = self.registry.strategy(rt)
        # allocations (ClusterIPs) of a create that is refused or only dry-run are given back
        allocated = set(self.context.allocated_cluster_ips)
        try:
            try:
                strategy.prepare_create(obj, self.context)
                strategy.validate_create(obj)
            except Invalid as exc:
                raise self._invalid(rt, exc, obj=obj) from exc
            if not name:
                raise invalid(rt, "", causes=[{
                    "reason": "FieldValueRequired",
                    "message": "Required value: name or generateName is required",
                    "field": "metadata.name",
                }])
            with self.storage.lock:
                if self.storage.get(
                    self.bucket(rt), namespace=namespace if rt.namespaced else "", name=name
                ):
                    raise already_exists(rt, name)
                if dry_run:
                    self._restore_allocations(allocated)
                    return obj
                self._commit(rt, obj, event_type="ADDED", old=None)
        except ApiStatusError:
            self._restore_allocations(allocated)
            raise
        if self.bucket(rt) == CRDS:
            self.registry.crd_applied(obj)
        return obj

    # -- update and patch -----------------------------------------------------------------

    def update(
        self, target: Target, body: Any, *, subresource: str | None = None,
        dry_run: bool = False, field_validation: str | None = None,
        warnings: Warnings | None = None,
    ) -> dict[str, Any]:
        """PUT: replace the object (``resourceVersion`` in the body is a precondition);
        ``fieldValidation`` as for ``create``."""
        new = self._check_body(target.rt, body, namespace=target.namespace, name=target.name)
        self._check_fields(target.rt, new, field_validation=field_validation,
                           warnings=warnings, in_body=True, options_kind="UpdateOptions")
        with self.storage.lock:
            old = self._existing(target)
            return self._update(target.rt, old, new=new, subresource=subresource,
                                dry_run=dry_run)

    def patch(
        self, target: Target, body: bytes, *, content_type: str,
        subresource: str | None = None, dry_run: bool = False,
        field_validation: str | None = None, warnings: Warnings | None = None,
    ) -> dict[str, Any]:
        """PATCH with a JSON, merge or strategic merge patch; then as an update.

        ``fieldValidation`` judges the patched object, as a real server does (the error then
        is the bare ``strict decoding error: ...``)."""
        rt = target.rt
        with self.storage.lock:
            old = self._existing(target)
            patched = apply_patch(self.served(old, rt), body, content_type=content_type, rt=rt)
            new = self._check_body(rt, patched, namespace=target.namespace, name=target.name)
            self._check_fields(rt, new, field_validation=field_validation, warnings=warnings,
                               in_body=False, options_kind="PatchOptions")
            return self._update(rt, old, new=new, subresource=subresource, dry_run=dry_run)

    def apply(
        self, target: Target, body: bytes | Mapping[str, Any], *,
        field_manager: str | None, force: bool = False, dry_run: bool = False,
    ) -> tuple[int, dict[str, Any]]:
        """Server-side apply: create when missing, else merge the applied configuration.

        Field ownership per apply manager is kept in ``metadata.managedFields`` (``_applying``):
        conflicts answer 409 unless ``force``; fields the manager no longer applies are removed.
        Returns the HTTP code (201 when created) and the object.
        """
        rt, namespace, name = target.rt, target.namespace, target.name
        if not field_manager:
            cause = {"reason": "FieldValueRequired", "field": "fieldManager",
                     "message": "Required value: is required for apply patch"}
            raise ApiStatusError(422, status_body(
                422, "Invalid",
                message='PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is '
                "required for apply patch",
                details={"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [cause]},
            ))
        try:  # the HTTP layer passes the body decoded (bounded, off the loop)
            applied = body if isinstance(body, Mapping) else load_yaml(body)
        except yaml.YAMLError as exc:
            raise bad_request(f"error decoding YAML: {exc}") from exc
        if not isinstance(applied, Mapping):
            raise bad_request("the apply configuration must be an object")
        unknown = self.registry.strategy(rt).unknown_fields(dict(applied))
        if unknown:
            # 1.25's field manager cannot type the configuration, whatever fieldValidation
            # says: a plain error, answered as 500 without a reason.
            raise ApiStatusError(500, {
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": f"failed to create typed patch object: .{unknown[0]}: field not "
                           "declared in schema",
                "code": 500,
            })
        with self.storage.lock:
            existing = self.storage.get(self.bucket(rt), namespace=target.storage_namespace,
                                        name=name)
            owned, removed = apply_fields(existing, applied, manager=field_manager, force=force)
            managed = managed_after_apply(existing, manager=field_manager,
                                          api_version=rt.api_version, owned=owned, force=force)
            if existing is None:
                obj = self._check_body(rt, applied, namespace=namespace, name=name)
                return 201, self.create(rt, obj, namespace=namespace, dry_run=dry_run,
                                        managed_fields=managed)
            patch_type = MERGE_PATCH if rt.is_custom else STRATEGIC_MERGE_PATCH
            raw = json.dumps(applied).encode()
            patched = apply_patch(self.served(existing, rt), raw, content_type=patch_type, rt=rt)
            new = self._check_body(rt, patched, namespace=namespace, name=name)
            remove_fields(new, removed)
            return 200, self._update(rt, existing, new=new, subresource=None, dry_run=dry_run,
                                     managed_fields=managed)

    # -- the scale subresource -------------------------------------------------------------

    def get_scale(self, target: Target) -> dict[str, Any]:
        """GET ``.../scale``: the ``autoscaling/v1`` Scale of a workload."""
        return _scale_of(self._existing(target))

    def update_scale(
        self, target: Target, body: Any, *, dry_run: bool = False,
    ) -> dict[str, Any]:
        """PUT ``.../scale``: set ``spec.replicas`` (the Scale's version is a precondition)."""
        rt, name = target.rt, target.name
        with self.storage.lock:
            old = self._existing(target)
            if not isinstance(body, Mapping):
                raise bad_request("the Scale must be an object")
            spec = body.get("spec") or {}
            replicas = spec.get("replicas") if isinstance(spec, Mapping) else None
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
                raise invalid(rt, name, causes=[{
                    "reason": "FieldValueInvalid", "field": "spec.replicas",
                    "message": f"Invalid value: {json.dumps(replicas)}: must be greater than or "
                               "equal to 0",
                }])
            new: dict[str, Any] = copy_json(old)
            new.setdefault("spec", {})["replicas"] = replicas
            wanted_rv = (body.get("metadata") or {}).get("resourceVersion")
            _meta(new)["resourceVersion"] = wanted_rv or _meta(old).get("resourceVersion")
            return _scale_of(self._update(rt, old, new=new, subresource=None, dry_run=dry_run))

    def patch_scale(
        self, target: Target, body: bytes, *, content_type: str, dry_run: bool = False,
    ) -> dict[str, Any]:
        """PATCH ``.../scale``: patch the Scale, then as ``update_scale``."""
        with self.storage.lock:
            scale = _scale_of(self._existing(target))
            scale_type = attrs.evolve(target.rt, group="autoscaling", version="v1", kind="Scale",
                                      plural="scales", singular="scale", is_custom=False)
            patched = apply_patch(scale, body, content_type=content_type, rt=scale_type)
            return self.update_scale(target, patched, dry_run=dry_run)

    def _update(
        self, rt: ResourceType, old: Mapping[str, Any], *, new: dict[str, Any],
        subresource: str | None, dry_run: bool,
        managed_fields: ManagedFields | None = None,
    ) -> dict[str, Any]:
        old_meta = _meta(old)
        name = str(old_meta.get("name"))
        wanted_rv = _meta(new).get("resourceVersion")
        if wanted_rv and str(wanted_rv) != str(old_meta.get("resourceVersion")):
            raise conflict(rt, name)
        strategy = self.registry.strategy(rt)
        if subresource == "status":
            status = new.get("status")
            new = copy_json(old)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
            new["apiVersion"], new["kind"] = rt.api_version, rt.kind
            strategy.prepare_status_update(old, new)
        else:
            meta = _meta(new)
            for field in _SERVER_METADATA:
                if field == "uid" and meta.get("uid"):
                    continue  # a changed uid is the strategies' to refuse (field is immutable)
                if field in old_meta:
                    meta[field] = copy_json(old_meta[field])
                else:
                    meta.pop(field, None)
            meta.pop("managedFields", None)
            if managed_fields is not None:
                meta["managedFields"] = managed_fields
            elif "managedFields" in old_meta:
                meta["managedFields"] = copy_json(old_meta["managedFields"])
            if "status" in rt.subresources:
                if "status" in old:
                    new["status"] = copy_json(old["status"])
                else:
                    new.pop("status", None)
            if old_meta.get("deletionTimestamp"):
                added = [f for f in meta.get("finalizers") or ()
                         if f not in (old_meta.get("finalizers") or ())]
                if added:
                    quoted = ", ".join(json.dumps(f) for f in added)
                    cause = {
                        "reason": "FieldValueForbidden",
                        "message": "Forbidden: no new finalizers can be added if the object is "
                                   f"being deleted, found new finalizers []string{{{quoted}}}",
                        "field": "metadata.finalizers",
                    }
                    raise invalid(rt, name, causes=[cause])
            try:
                strategy.prepare_update(old, new, self.context)
                strategy.validate_update(old, new)
            except Invalid as exc:
                raise self._invalid(rt, exc, obj=new) from exc
            if rt.has_generation and strategy.spec_changed(old, new):
                meta["generation"] = int(old_meta.get("generation") or 0) + 1
        meta = _meta(new)
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        if not meta.get("finalizers"):
            meta.pop("finalizers", None)
        if new == old:
            return new  # a no-op update writes nothing and keeps the resourceVersion
        if dry_run:
            return new
        if old_meta.get("deletionTimestamp") and not meta.get("finalizers") and not (
            self.bucket(rt) == NAMESPACES and (new.get("spec") or {}).get("finalizers")
        ):  # a namespace's spec.finalizers hold it too (ShouldDeleteNamespaceDuringUpdate)
            self._remove(rt, old, final=new)
            return new
        self._commit(rt, new, event_type="MODIFIED", old=old)
        if self.bucket(rt) == CRDS:
            self.registry.crd_applied(new)
        return new

    # -- delete ---------------------------------------------------------------------------

    def delete(
        self, target: Target, *, options: Mapping[str, Any], dry_run: bool = False,
    ) -> Mapping[str, Any]:
        """DELETE: mark for deletion (finalizers pending) or remove; the object or a Status."""
        rt, name = target.rt, target.name
        with self.storage.lock:
            old = self._existing(target)
            old_meta = _meta(old)
            self._check_preconditions(rt, old, preconditions=options.get("preconditions"))
            policy = options.get("propagationPolicy")
            if policy is None and options.get("orphanDependents") is True:
                policy = "Orphan"
            if policy not in (None, "Orphan", "Background", "Foreground"):
                raise invalid(rt, name, causes=[{
                    "reason": "FieldValueNotSupported",
                    "message": f'Unsupported value: "{policy}": supported values: "Foreground", '
                               '"Background", "Orphan"',
                    "field": "propagationPolicy",
                }])
            finalizers = list(old_meta.get("finalizers") or ())
            extra = {"Orphan": ORPHAN_FINALIZER, "Foreground": FOREGROUND_FINALIZER}
            wanted = extra.get(str(policy))
            if wanted:
                for other in (ORPHAN_FINALIZER, FOREGROUND_FINALIZER):
                    if other != wanted and other in finalizers:
                        finalizers.remove(other)
                if wanted not in finalizers:
                    finalizers.append(wanted)
            is_namespace = self.bucket(rt) == NAMESPACES
            if not finalizers and not is_namespace:
                final = copy_json(old)
                if not dry_run:
                    self._remove(rt, old, final=final)
                if self.bucket(rt) in _RETURNS_DELETED_OBJECT:
                    return self.served(final, rt)
                return success_status(rt, name, uid=str(old_meta.get("uid")))
            if old_meta.get("deletionTimestamp") and finalizers == list(
                old_meta.get("finalizers") or ()
            ):
                return self.served(old, rt)
            new: dict[str, Any] = copy_json(old)
            meta = _meta(new)
            if not meta.get("deletionTimestamp"):
                meta["deletionTimestamp"] = now_timestamp()
                if not is_namespace:  # a real Namespace gets none (tests/conformance)
                    meta["deletionGracePeriodSeconds"] = 0
                if rt.has_generation:
                    meta["generation"] = int(meta.get("generation") or 0) + 1
            if finalizers:
                meta["finalizers"] = finalizers
            if is_namespace:
                new.setdefault("status", {})["phase"] = "Terminating"
            if dry_run:
                return new
            return self._commit(rt, new, event_type="MODIFIED", old=old)

    def _check_preconditions(
        self, rt: ResourceType, old: Mapping[str, Any], *, preconditions: Any
    ) -> None:
        if not isinstance(preconditions, Mapping):
            return
        meta = _meta(old)
        name = str(meta.get("name"))
        for field, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            wanted = preconditions.get(field)
            if wanted and str(wanted) != str(meta.get(field)):
                raise conflict(rt, name, message=(
                    f'Operation cannot be fulfilled on {rt.qualified_kind} "{name}": the {label} '
                    f"in the precondition ({wanted}) does not match the {label} in record "
                    f"({meta.get(field)}). The object might have been modified"
                ))

    def _remove(self, rt: ResourceType, old: Mapping[str, Any], *, final: dict[str, Any]) -> None:
        self._commit(rt, final, event_type="DELETED", old=old)
        self.registry.strategy(rt).on_delete(final, self.context)
        if self.bucket(rt) == CRDS:
            self._remove_custom_resources(final)

    def force_remove(self, rt: ResourceType, obj: Mapping[str, Any]) -> None:
        """Remove ``obj`` now, whatever its finalizers (the namespace controller's last step)."""
        with self.storage.lock:
            namespace, name = _key_parts(obj)
            current = self.storage.get(self.bucket(rt), namespace=namespace, name=name)
            if current is not None:
                final = copy_json(current)
                meta = _meta(final)
                spec = final.get("spec")
                if isinstance(spec, dict) and "finalizers" in spec:
                    spec.pop("finalizers")
                meta.pop("finalizers", None)
                self._remove(rt, current, final=final)

    def _remove_custom_resources(self, crd: Mapping[str, Any]) -> None:
        spec = crd.get("spec") or {}
        group = str(spec.get("group") or "")
        plural = str((spec.get("names") or {}).get("plural") or "")
        bucket = (group, plural)
        for version in spec.get("versions") or ():
            rt = self.registry.lookup(group, str(version.get("name")), plural)
            if rt is not None:
                for obj in self.storage.items(bucket):
                    self._commit(rt, copy_json(obj), event_type="DELETED", old=obj)
                break
        self.registry.crd_removed(crd)

    def delete_collection(
        self, rt: ResourceType, *, namespace: str | None, query: ListQuery,
        options: Mapping[str, Any], dry_run: bool = False,
    ) -> dict[str, Any]:
        """DELETE on a collection: delete each selected object; the list of what was deleted."""
        listed = self.list(rt, namespace=namespace,
                           query=ListQuery(labels=query.labels, fields=query.fields))
        deleted = []
        for item in listed["items"]:
            meta = _meta(item)
            try:
                target = Target(rt=rt, namespace=str(meta.get("namespace") or ""),
                                name=str(meta.get("name")))
                result = self.delete(target, options=options, dry_run=dry_run)
            except ApiStatusError as exc:
                if exc.code == 404:
                    continue
                raise
            deleted.append(item if result.get("kind") == "Status" else result)
        return {**listed, "items": deleted}


def _selector_text(selector: Any) -> str:
    if not isinstance(selector, Mapping):
        return ""
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or ():
        op = str(expr.get("operator", ""))
        key = str(expr.get("key", ""))
        values = ",".join(str(v) for v in expr.get("values") or ())
        parts.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})",
                      "Exists": key, "DoesNotExist": f"!{key}"}.get(op, key))
    return ",".join(parts)


def _scale_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = _meta(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    scale_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                       "creationTimestamp") if k in meta}
    return {
        "kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": scale_meta,
        "spec": {"replicas": int(spec.get("replicas") or 0)},
        "status": {"replicas": int(status.get("replicas") or 0),
                   "selector": _selector_text(spec.get("selector"))},
    }


def _key_parts(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = _meta(obj)
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _list_key(obj: Mapping[str, Any]) -> str:
    meta = _meta(obj)
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}\x00"
