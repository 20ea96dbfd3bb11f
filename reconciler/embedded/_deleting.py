"""DELETE and deletecollection on the embedded server's stored objects.

``Deletions`` adds to ``StoredObjects`` what removing an object means: preconditions (uid,
resourceVersion), finalizers and ``deletionTimestamp``, propagation policies (the ``orphan`` and
``foregroundDeletion`` finalizers the garbage collector honours), what a DELETE answers (the
object or a Status), dry run, and the removal of a CRD's custom resources with the CRD.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.embedded._kinds import ResourceType
from reconciler.embedded._statuses import (
    ApiStatusError,
    conflict,
    invalid,
    success_status,
)
from reconciler.embedded._stored_objects import (
    _RETURNS_DELETED_OBJECT,
    CRDS,
    FOREGROUND_FINALIZER,
    NAMESPACES,
    ORPHAN_FINALIZER,
    ListQuery,
    StoredObjects,
    Target,
    _key_parts,
    _meta,
    copy_json,
)
from reconciler.embedded._times import now_timestamp

__all__ = ["Deletions"]


class Deletions(StoredObjects):
    """The delete verbs over the stored objects."""

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
            self.admission.validate(self.admission.request(
                rt, "DELETE", namespace=target.namespace, name=name, obj=None, old=old,
                dry_run=dry_run, options=options), obj=None, warnings=None)
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
