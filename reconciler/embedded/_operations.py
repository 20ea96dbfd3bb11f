"""The verbs of the Kubernetes API on stored objects: what a real apiserver's registry does.

The verbs are built in three steps, one concept each: ``_stored_objects.StoredObjects`` (reads
and the checks every write shares), ``_deleting.Deletions`` (delete and its lifecycle), and
``Operations`` here (create, update, patch, server-side apply, the scale subresource).

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

import json
import random
import uuid
from collections.abc import Mapping
from typing import Any

import attrs
import yaml

from reconciler.embedded._applying import apply_configuration, managed_after_update
from reconciler.embedded._deleting import Deletions
from reconciler.embedded._encoding import load_yaml
from reconciler.embedded._kinds import Invalid, ResourceType
from reconciler.embedded._patching import apply_patch
from reconciler.embedded._statuses import (
    ApiStatusError,
    already_exists,
    bad_request,
    conflict,
    invalid,
    status_body,
)
from reconciler.embedded._stored_objects import (
    _NAME_CHARS,
    _SERVER_METADATA,
    CRDS,
    NAMESPACES,
    ManagedFields,
    Target,
    Warnings,
    _meta,
    copy_json,
)
from reconciler.embedded._times import now_timestamp

__all__ = ["Operations"]


class Operations(Deletions):
    """The API verbs over one ``Storage`` and one ``KindRegistry``."""

    # -- create ---------------------------------------------------------------------------

    def create(
        self, rt: ResourceType, body: Any, *, namespace: str, dry_run: bool = False,
        managed_fields: ManagedFields | None = None, field_validation: str | None = None,
        warnings: Warnings | None = None, field_manager: str | None = None,
    ) -> dict[str, Any]:
        """POST: a new object with server metadata, defaults and validation; 201 body.

        ``field_validation`` is the request's ``fieldValidation``; ``Warn`` warnings are
        appended to ``warnings`` (``None``: not collected). ``field_manager`` (the request's
        ``fieldManager`` or User-Agent) owns the fields of the created object (``Update``).
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
        admitted = self.admission.request(rt, "CREATE", namespace=namespace, name=name,
                                          obj=obj, old=None, dry_run=dry_run,
                                          options={"fieldManager": field_manager})
        if admitted is not None:
            obj = self.admission.mutate(admitted, obj, warnings=warnings)
            meta = _meta(obj)
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
            self.admission.validate(admitted, obj=obj, warnings=warnings)
            if not managed_fields and field_manager:
                meta["managedFields"] = managed_after_update(
                    None, obj, manager=field_manager, api_version=rt.api_version,
                    crd_schema=self._crd_schema(rt))
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
        except BaseException:  # refused, or to run again (a webhook call, a stale read)
            self._restore_allocations(allocated)
            raise
        if self.bucket(rt) == CRDS:
            self.registry.crd_applied(obj)
        return obj

    # -- update and patch -----------------------------------------------------------------

    def update(
        self, target: Target, body: Any, *, subresource: str | None = None,
        dry_run: bool = False, field_validation: str | None = None,
        warnings: Warnings | None = None, field_manager: str | None = None,
    ) -> dict[str, Any]:
        """PUT: replace the object (``resourceVersion`` in the body is a precondition);
        ``fieldValidation`` and ``field_manager`` as for ``create``."""
        new = self._check_body(target.rt, body, namespace=target.namespace, name=target.name)
        self._check_fields(target.rt, new, field_validation=field_validation,
                           warnings=warnings, in_body=True, options_kind="UpdateOptions")
        with self.storage.lock:
            old = self._existing(target)
            return self._update(target.rt, old, new=new, subresource=subresource,
                                dry_run=dry_run, field_manager=field_manager,
                                warnings=warnings)

    def patch(
        self, target: Target, body: bytes, *, content_type: str,
        subresource: str | None = None, dry_run: bool = False,
        field_validation: str | None = None, warnings: Warnings | None = None,
        field_manager: str | None = None,
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
            return self._update(rt, old, new=new, subresource=subresource, dry_run=dry_run,
                                field_manager=field_manager, warnings=warnings)

    def _crd_schema(self, rt: ResourceType) -> Mapping[str, Any] | None:
        if not rt.is_custom:
            return None
        schema = getattr(self.registry.strategy(rt), "schema", None)
        return schema if isinstance(schema, Mapping) else None

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
            live = None if existing is None else self.served(existing, rt)
            merged, managed = apply_configuration(
                live, applied, manager=field_manager, force=force, api_version=rt.api_version,
                crd_schema=self._crd_schema(rt))
            if existing is None:
                obj = self._check_body(rt, merged, namespace=namespace, name=name)
                return 201, self.create(rt, obj, namespace=namespace, dry_run=dry_run,
                                        managed_fields=managed)
            new = self._check_body(rt, merged, namespace=namespace, name=name)
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
            return _scale_of(self._update(rt, old, new=new, subresource="scale",
                                          dry_run=dry_run))

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
        managed_fields: ManagedFields | None = None, field_manager: str | None = None,
        warnings: Warnings | None = None,
    ) -> dict[str, Any]:
        """An update of ``old`` to ``new``: through ``/status``, or else (the main resource,
        or ``subresource="scale"``: the same, without admission webhooks)."""
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
            given = meta.pop("managedFields", None)
            if managed_fields is not None:
                meta["managedFields"] = managed_fields
            elif "managedFields" in old_meta:
                meta["managedFields"] = copy_json(old_meta["managedFields"])
            if "status" in rt.subresources:
                if "status" in old:
                    new["status"] = copy_json(old["status"])
                else:
                    new.pop("status", None)
            _check_no_new_finalizers(rt, name, old_meta=old_meta, meta=meta)
            admitted = None if subresource else self.admission.request(
                rt, "UPDATE", namespace=str(old_meta.get("namespace") or ""), name=name,
                obj=new, old=old, dry_run=dry_run, options={"fieldManager": field_manager})
            if admitted is not None:
                new = self.admission.mutate(admitted, new, warnings=warnings)
                meta = _meta(new)
            try:
                strategy.prepare_update(old, new, self.context)
                strategy.validate_update(old, new)
            except Invalid as exc:
                raise self._invalid(rt, exc, obj=new) from exc
            self.admission.validate(admitted, obj=new, warnings=warnings)
            if managed_fields is None and (field_manager or given is not None):
                tracked = managed_after_update(
                    old, new, manager=field_manager, api_version=rt.api_version, given=given,
                    crd_schema=self._crd_schema(rt))
                if tracked:
                    meta["managedFields"] = tracked
                else:
                    meta.pop("managedFields", None)
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


def _check_no_new_finalizers(rt: ResourceType, name: str, *, old_meta: Mapping[str, Any],
                             meta: Mapping[str, Any]) -> None:
    """An object being deleted may lose finalizers, never gain one (422 as the real server)."""
    if not old_meta.get("deletionTimestamp"):
        return
    added = [f for f in meta.get("finalizers") or () if f not in (old_meta.get("finalizers") or ())]
    if added:
        quoted = ", ".join(json.dumps(f) for f in added)
        raise invalid(rt, name, causes=[{
            "reason": "FieldValueForbidden",
            "message": "Forbidden: no new finalizers can be added if the object is being "
                       f"deleted, found new finalizers []string{{{quoted}}}",
            "field": "metadata.finalizers",
        }])


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
