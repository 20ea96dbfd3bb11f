"""The stored objects of the embedded server and the checks every API verb shares.

``StoredObjects`` holds one ``Storage`` and one ``KindRegistry`` and answers the reads (get, list
with snapshots at a version and continue tokens); it also holds what the writes share: namespace
lifecycle checks (404/403), body and field validation (``fieldValidation``), allocations given
back on a refusal and the commit to storage with its watch event. The writes are built on it:
``_deleting.Deletions`` (delete, finalizers, propagation, deletecollection), then
``_operations.Operations`` (create, update, patch, apply, scale). No HTTP here: inputs are
decoded bodies and query values, failures are ``ApiStatusError``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

import attrs

from reconciler.embedded._admission import Admission
from reconciler.embedded._calling import StaleWrite, released_for_a_call
from reconciler.embedded._conversion import Conversions
from reconciler.embedded._kinds import Invalid, KindRegistry, ResourceType, ServerContext
from reconciler.embedded._selectors import FieldSelector, LabelSelector
from reconciler.embedded._statuses import (
    ApiStatusError,
    bad_request,
    conflict,
    expired,
    invalid,
    invalid_options,
    namespace_terminating,
    not_found,
)
from reconciler.embedded._storage import Bucket, Storage, TooOld

__all__ = [
    "CRDS",
    "FIELD_VALIDATION_DIRECTIVES",
    "FOREGROUND_FINALIZER",
    "NAMESPACES",
    "ORPHAN_FINALIZER",
    "ListQuery",
    "StoredObjects",
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


class StoredObjects:
    """Reads and the shared write checks over one ``Storage`` and one ``KindRegistry``."""

    def __init__(
        self, storage: Storage, registry: KindRegistry, context: ServerContext
    ) -> None:
        self.storage = storage
        self.registry = registry
        self.context = context
        self.conversions = Conversions()
        self.admission = Admission(storage=storage, registry=registry, convert=self.served)

    # -- helpers --------------------------------------------------------------------------

    @staticmethod
    def bucket(rt: ResourceType) -> Bucket:
        """Where objects of ``rt`` are stored."""
        return (rt.group, rt.plural)

    def served(self, obj: Mapping[str, Any], rt: ResourceType) -> Mapping[str, Any]:
        """``obj`` with the ``apiVersion``/``kind`` of the endpoint it is served from (a custom
        resource of another version through its CRD's conversion webhook, if it has one)."""
        if rt.is_custom and obj.get("apiVersion") != rt.api_version:
            crd = self.storage.get(CRDS, namespace="", name=f"{rt.plural}.{rt.group}")
            converted = self.conversions.convert(obj, rt, crd)
            if converted is not None:
                return converted
        return _served(obj, rt)

    def _existing(self, target: Target) -> Mapping[str, Any]:
        obj = self.storage.get(
            self.bucket(target.rt), namespace=target.storage_namespace, name=target.name
        )
        if obj is None:
            raise not_found(target.rt, target.name)
        if target.rt.is_custom:  # a write sees the old object at its own version, converted
            return self.served(obj, target.rt)
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
            if old is not None and released_for_a_call():
                self._check_fresh(rt, old)
            _meta(obj)["resourceVersion"] = str(self.storage.next_resource_version())
            self.storage.commit(self.bucket(rt), obj, event_type=event_type, old=old)
        return obj

    def _check_fresh(self, rt: ResourceType, old: Mapping[str, Any]) -> None:
        """After the lock was released for a webhook call: ``StaleWrite`` (the request runs
        again, as kube-apiserver's ``GuaranteedUpdate`` retries) when ``old`` is no longer the
        stored object."""
        namespace, name = _key_parts(old)
        stored = self.storage.get(self.bucket(rt), namespace=namespace if rt.namespaced else "",
                                  name=name)
        version = _meta(old).get("resourceVersion")
        if stored is None or _meta(stored).get("resourceVersion") != version:
            raise StaleWrite(conflict(rt, name))

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
            "items": [self.served(obj, rt) if rt.is_custom else _strip_for_list(obj, rt)
                      for obj in selected],
        }


def _key_parts(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = _meta(obj)
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _list_key(obj: Mapping[str, Any]) -> str:
    meta = _meta(obj)
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}\x00"
