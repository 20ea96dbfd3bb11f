"""The answers of the webhooks: a ConversionReview or an AdmissionReview in, its response out.

Pure functions of the review body and the operator's :class:`builders.specs.Versions`: conversion
through the hub (``Versions.convert``), validation (warnings, or a refusal whose
``status.message`` names the object and the field) and defaulting (a JSON patch that writes only
what the registered defaulting changed, never the class defaults the object leaves out). No
HTTP here: ``reconciler._webhooks.server`` carries the bodies; this module decides them.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

import jsonpatch

from builders.specs import (
    SpecFieldError,
    UnsupportedSpecTypeError,
    Versions,
    from_spec_dict,
    to_spec_dict,
)

__all__ = ["VersionsIndex", "admission_response", "conversion_response"]

_REVIEW_VERSION = "v1"


class VersionsIndex:
    """The operator's versioned kinds by ``(group, kind)``."""

    def __init__(self, versions: Sequence[Versions]) -> None:
        self._by_kind = {(v.group, v.kind): v for v in versions}

    def find(self, api_version: object, kind: object) -> Versions | None:
        """The kind's versions, or None when it is not one of the operator's."""
        group = str(api_version or "").rpartition("/")[0]
        return self._by_kind.get((group, str(kind or "")))

    def __iter__(self) -> Any:
        return iter(self._by_kind.values())


def _describe(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    name = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name") or
                                     meta.get("generateName")) if p)
    return f"{obj.get('kind') or 'object'} {name or '<unnamed>'}"


def _message(obj: Mapping[str, Any], err: SpecFieldError) -> str:
    return str(err) if err.parent else f"{_describe(obj)}: {err}"


def conversion_response(review: Mapping[str, Any], index: VersionsIndex) -> dict[str, Any]:
    """The ConversionReview answering ``review``: every object converted to the desired version,
    or a Failure naming the object and field that could not be."""
    request = review.get("request") or {}
    desired = str(request.get("desiredAPIVersion") or "")
    converted: list[dict[str, Any]] = []
    result: dict[str, Any] = {"status": "Success"}
    for obj in request.get("objects") or ():
        versions = index.find(obj.get("apiVersion"), obj.get("kind"))
        try:
            if versions is None:
                raise SpecFieldError(parent=_describe(obj), field="apiVersion",
                                     value=obj.get("apiVersion"), reason="not a kind this "
                                     "webhook converts")
            converted.append(versions.convert(obj, desired))
        except SpecFieldError as err:
            converted, result = [], {"status": "Failure", "message": _message(obj, err)}
            break
        except UnsupportedSpecTypeError as err:  # a version this kind does not have
            converted, result = [], {"status": "Failure", "message": f"{_describe(obj)}: {err}"}
            break
    return {
        "apiVersion": f"apiextensions.k8s.io/{_REVIEW_VERSION}",
        "kind": "ConversionReview",
        "response": {"uid": request.get("uid", ""), "result": result,
                     "convertedObjects": converted},
    }


def _review(uid: object, body: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"admission.k8s.io/{_REVIEW_VERSION}", "kind": "AdmissionReview",
            "response": {"uid": uid or "", **body}}


def _hub_spec(versions: Versions, obj: Mapping[str, Any]) -> Any:
    hub = versions.convert(obj, versions.api_version(versions.hub))
    try:
        return from_spec_dict(versions.hub_version.spec, hub.get("spec") or {})
    except SpecFieldError as err:
        raise SpecFieldError(parent=_describe(obj), field=err.field, value=err.value,
                             reason=err.reason) from None


def admission_response(
    review: Mapping[str, Any], index: VersionsIndex, *, mutate: bool,
) -> dict[str, Any]:
    """The AdmissionReview answering ``review``: for ``mutate``, the defaulting patch; else the
    validation's verdict and warnings. Objects of kinds the operator does not know, and
    deletions, are allowed unchanged."""
    request = review.get("request") or {}
    uid = request.get("uid")
    obj = request.get("object") or {}
    versions = index.find(obj.get("apiVersion"), obj.get("kind"))
    if versions is None or request.get("operation") not in ("CREATE", "UPDATE"):
        return _review(uid, {"allowed": True})
    try:
        spec = _hub_spec(versions, obj)
        if mutate:
            return _review(uid, {"allowed": True, **_defaulting_patch(versions, obj, spec)})
        old_obj = request.get("oldObject")
        old = _hub_spec(versions, old_obj) if old_obj else None
        warnings = versions.validate_spec(spec, old)
    except SpecFieldError as err:
        return _review(uid, {"allowed": False, "status": {
            "code": 403, "reason": "Forbidden", "message": _message(obj, err)}})
    except UnsupportedSpecTypeError as err:
        return _review(uid, {"allowed": False, "status": {
            "code": 400, "reason": "BadRequest", "message": f"{_describe(obj)}: {err}"}})
    return _review(uid, {"allowed": True, **({"warnings": warnings} if warnings else {})})


def _defaulting_patch(versions: Versions, obj: Mapping[str, Any], spec: Any) -> dict[str, Any]:
    """The JSON patch (as the response's ``patch``) writing what ``default`` changed, at the
    object's own version; empty when it changed nothing."""
    defaulted = versions.default_spec(spec)
    if defaulted == spec:
        return {}
    hub_version = versions.api_version(versions.hub)
    own_version = str(obj.get("apiVersion"))
    as_hub = versions.convert(obj, hub_version)
    changes = jsonpatch.make_patch(to_spec_dict(spec), to_spec_dict(defaulted))
    new_spec = _apply_leniently(as_hub.get("spec") or {}, list(changes))
    # Both sides through the same conversions: their difference is the defaulting's alone, at
    # the object's version, and is applied to the object's own spec as sent.
    before = versions.convert(as_hub, own_version).get("spec") or {}
    after = versions.convert({**as_hub, "spec": new_spec}, own_version).get("spec") or {}
    own = obj.get("spec") or {}
    result = _apply_leniently(own, list(jsonpatch.make_patch(before, after)))
    ops = list(jsonpatch.make_patch({"spec": own}, {"spec": result}))
    if ops and not isinstance(obj.get("spec"), Mapping):
        ops = [{"op": "add", "path": "/spec", "value": result}]  # no spec sent: add it whole
    if not ops:
        return {}
    return {"patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(ops).encode()).decode()}


def _apply_leniently(spec: Mapping[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """``ops`` (computed between typed dicts with every class default) applied to the object's
    own spec, which may leave out defaulted fields: missing parents are created, removals of
    what is absent are skipped."""
    out = copy.deepcopy(dict(spec))
    for op in ops:
        parts = jsonpatch.JsonPointer(op["path"]).parts
        node: Any = out
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        last = parts[-1] if parts else None
        if op["op"] == "remove":
            if isinstance(node, dict):
                node.pop(last, None)
            elif isinstance(node, list) and last is not None and int(last) < len(node):
                node.pop(int(last))
        elif op["op"] in ("add", "replace"):
            if isinstance(node, list) and last is not None:
                index = len(node) if last == "-" else int(last)
                if op["op"] == "add":
                    node.insert(index, copy.deepcopy(op["value"]))
                else:
                    node[index] = copy.deepcopy(op["value"])
            elif last is not None:
                node[last] = copy.deepcopy(op["value"])
    return out
