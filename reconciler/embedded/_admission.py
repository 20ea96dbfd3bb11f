"""Admission webhooks: the embedded server calls them on writes, as kube-apiserver does.

Why: an operator's validation and defaulting webhooks (``reconciler.webhooks``) must behave the
same on the embedded server as on a real one, so that tests of them run on both. The boundary:
this module finds the webhooks of the stored ``MutatingWebhookConfiguration`` and
``ValidatingWebhookConfiguration`` objects (``admissionregistration.k8s.io/v1``) whose rules
match a request, posts each an ``AdmissionReview`` (v1) through ``_calling`` (the whole call
bounded by the webhook's ``timeoutSeconds``, default 10, at most 30; the answer by 3 MiB), and
turns the answers into a mutated object, warnings, or the ``Status`` kube-apiserver answers.
The verbs (``_operations``, ``_deleting``) decide when to call: mutating webhooks before the
kind's defaulting and validation, validating ones after, on create, update (the main resource:
not ``/status`` nor ``/scale``) and delete (each object of a deletecollection too, and the
garbage collector's writes, as on a real server).

As kube-apiserver: configurations in name order, webhooks in their order, mutating ones first
(a ``JSONPatch`` answer applied to the object), then validating ones (one after the other here,
in parallel there); ``matchPolicy: Equivalent`` (the default) calls a webhook whose rules name
another served version of the same custom resource with the object converted to that version
(through the CRD's conversion) and converts a mutated object back; ``namespaceSelector`` and
``objectSelector`` select; ``failurePolicy: Ignore`` skips a webhook that cannot be called,
``Fail`` (the default) answers 500; a denial answers the webhook's ``status.code`` (400 when
under 400) with ``admission webhook "<name>" denied the request: <message>``; warnings go back
in the ``Warning`` header; the messages are kube-apiserver's word for word
(tests/embedded/test_admission_webhooks.py runs on both servers). Not done:
``clientConfig.service`` (the embedded server has no Service network: such a webhook is
unreachable, and its ``failurePolicy`` decides), reinvocation (``reinvocationPolicy: IfNeeded``
is called once), ``matchConditions``, the validation of the configurations beyond
``sideEffects``.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from reconciler.embedded._calling import WebhookCallError, post_review
from reconciler.embedded._kinds import (
    Invalid,
    KindRegistry,
    KindStrategy,
    ResourceType,
    ServerContext,
)
from reconciler.embedded._patching import JSON_PATCH, apply_patch
from reconciler.embedded._selectors import label_selector_of
from reconciler.embedded._statuses import ApiStatusError, status_body
from reconciler.embedded._storage import Bucket, Storage

__all__ = [
    "ADMISSION_GROUP",
    "Admission",
    "AdmissionRequest",
    "WebhookConfigurationStrategy",
    "matching_version",
]

log = logging.getLogger("reconciler.embedded")

ADMISSION_GROUP = "admissionregistration.k8s.io"
MUTATING: Bucket = (ADMISSION_GROUP, "mutatingwebhookconfigurations")
VALIDATING: Bucket = (ADMISSION_GROUP, "validatingwebhookconfigurations")
_DEFAULT_TIMEOUT = 10
_MAX_TIMEOUT = 30
_USER = {"username": "optk", "groups": ["system:masters", "system:authenticated"]}

Converter = Callable[[Mapping[str, Any], ResourceType], Mapping[str, Any]]
"""``obj`` served at a type's version (through the CRD's conversion for another version)."""


def _defaulted(hook: Mapping[str, Any], *, mutating: bool) -> dict[str, Any]:
    """A webhook with the defaults kube-apiserver's ``admissionregistration/v1`` fills."""
    out = dict(hook)
    out.setdefault("failurePolicy", "Fail")
    out.setdefault("matchPolicy", "Equivalent")
    out.setdefault("namespaceSelector", {})
    out.setdefault("objectSelector", {})
    out.setdefault("timeoutSeconds", _DEFAULT_TIMEOUT)
    if mutating:
        out.setdefault("reinvocationPolicy", "Never")
    out["rules"] = [{**rule, "scope": rule.get("scope") or "*"}
                    for rule in hook.get("rules") or () if isinstance(rule, Mapping)]
    return out


class WebhookConfigurationStrategy(KindStrategy):
    """``MutatingWebhookConfiguration`` and ``ValidatingWebhookConfiguration``: the defaults of
    each webhook filled on every write, as the real server stores them."""

    def _default(self, obj: dict[str, Any]) -> None:
        mutating = self.resource_type.kind.startswith("Mutating")
        hooks = obj.get("webhooks")
        if isinstance(hooks, list):
            obj["webhooks"] = [_defaulted(h, mutating=mutating) if isinstance(h, Mapping) else h
                               for h in hooks]

    def prepare_create(self, obj: dict[str, Any], ctx: ServerContext) -> None:
        """Fill each webhook's defaults."""
        self._default(obj)

    def validate_create(self, obj: dict[str, Any]) -> None:
        """``sideEffects`` must be ``None`` or ``NoneOnDryRun`` (in v1, as the real server)."""
        causes = []
        for index, hook in enumerate(obj.get("webhooks") or ()):
            effects = hook.get("sideEffects") if isinstance(hook, Mapping) else None
            field = f"webhooks[{index}].sideEffects"
            if effects is None:
                causes.append({"reason": "FieldValueRequired", "field": field,
                               "message": "Required value: must specify one of None, "
                                          "NoneOnDryRun"})
            elif effects not in ("None", "NoneOnDryRun"):
                causes.append({"reason": "FieldValueNotSupported", "field": field,
                               "message": f"Unsupported value: {json.dumps(effects)}: "
                                          'supported values: "None", "NoneOnDryRun"'})
        if causes:
            raise Invalid(causes)

    def validate_update(self, old: Mapping[str, Any], new: dict[str, Any]) -> None:
        """As on create."""
        self.validate_create(new)

    def prepare_update(
        self, old: Mapping[str, Any], new: dict[str, Any], ctx: ServerContext
    ) -> None:
        """Fill each webhook's defaults."""
        self._default(new)


@attrs.frozen(kw_only=True)
class AdmissionRequest:
    """One write as admission sees it: ``obj`` (None on delete) and ``old`` (None on create),
    both at ``rt``'s version; ``options`` the request's ``CreateOptions`` (etc.)."""

    rt: ResourceType
    operation: str  # CREATE, UPDATE, DELETE
    namespace: str
    name: str
    obj: Mapping[str, Any] | None
    old: Mapping[str, Any] | None
    dry_run: bool = False
    options: Mapping[str, Any] = attrs.field(factory=dict)


def _in(values: Any, value: str) -> bool:
    return isinstance(values, list) and ("*" in values or value in values)


def _resource_matches(resources: Any, plural: str) -> bool:
    for entry in resources if isinstance(resources, list) else ():
        resource, _, sub = str(entry).partition("/")
        if (resource in ("*", plural)) and sub in ("*", ""):
            return True
    return False


def _rule_matches(rule: Mapping[str, Any], rt: ResourceType, *, operation: str,
                  namespace: str) -> bool:
    scope = rule.get("scope") or "*"
    is_namespace = (rt.group, rt.plural) == ("", "namespaces")
    if scope == "Namespaced" and (is_namespace or not namespace):
        return False
    if scope == "Cluster" and not (is_namespace or not namespace):
        return False
    return (_in(rule.get("operations"), operation) and _in(rule.get("apiGroups"), rt.group)
            and _in(rule.get("apiVersions"), rt.version)
            and _resource_matches(rule.get("resources"), rt.plural))


def matching_version(
    hook: Mapping[str, Any], rt: ResourceType, *, operation: str, namespace: str,
    equivalents: list[ResourceType],
) -> ResourceType | None:
    """The type a webhook is called at for a request on ``rt``: ``rt`` when a rule names it;
    else, under ``matchPolicy: Equivalent``, the first of ``equivalents`` (the other served
    versions of the same resource) a rule names; else None (not called)."""
    rules = [r for r in hook.get("rules") or () if isinstance(r, Mapping)]
    if any(_rule_matches(r, rt, operation=operation, namespace=namespace) for r in rules):
        return rt
    if (hook.get("matchPolicy") or "Equivalent") != "Equivalent":
        return None
    for other in equivalents:
        if any(_rule_matches(r, other, operation=operation, namespace=namespace)
               for r in rules):
            return other
    return None


def _url(config: Any, seconds: int) -> str:
    """The URL posted to, with the ``timeout`` query kube-apiserver's client adds; a Service
    reference raises the error of an unreachable webhook."""
    config = config if isinstance(config, Mapping) else {}
    service = config.get("service") if isinstance(config.get("service"), Mapping) else {}
    url = str(config.get("url") or (
        f"https://{service.get('name')}.{service.get('namespace')}.svc:"
        f"{service.get('port') or 443}{service.get('path') or ''}"))
    url = f"{url}{'&' if '?' in url else '?'}timeout={seconds}s"
    if not config.get("url"):
        raise WebhookCallError(
            f"Post {json.dumps(url)}: service {json.dumps(str(service.get('name')))} not found "
            "(the embedded server has no Service network: give clientConfig.url)")
    return url


def _gvk(rt: ResourceType) -> dict[str, str]:
    return {"group": rt.group, "version": rt.version, "kind": rt.kind}


def _gvr(rt: ResourceType) -> dict[str, str]:
    return {"group": rt.group, "version": rt.version, "resource": rt.plural}


def _internal_error(message: str) -> ApiStatusError:
    """kube-apiserver's ``apierrors.NewInternalError``."""
    return ApiStatusError(500, status_body(
        500, "InternalError", message=f"Internal error occurred: {message}",
        details={"causes": [{"message": message}]}))


def _calling_error(name: str, err: WebhookCallError) -> ApiStatusError:
    """kube-apiserver's ``ErrCallingWebhook`` (under ``failurePolicy: Fail``)."""
    what = "received invalid webhook response" if err.invalid else "failed to call webhook"
    return _internal_error(f'failed calling webhook "{name}": {what}: {err}')


def _gvk_text(api_version: Any, kind: Any) -> str:
    group, _, version = str(api_version or "").rpartition("/")
    return f"{group}/{version}, Kind={kind or ''}"


def _checked(review: Mapping[str, Any], answer: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``response`` of an AdmissionReview answer, checked as kube-apiserver's
    ``VerifyAdmissionResponse`` does."""
    if (answer.get("apiVersion"), answer.get("kind")) != ("admission.k8s.io/v1",
                                                          "AdmissionReview"):
        raise WebhookCallError(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got "
            f"{_gvk_text(answer.get('apiVersion'), answer.get('kind'))}", invalid=True)
    response = answer.get("response")
    if not isinstance(response, Mapping):
        raise WebhookCallError("webhook response was absent", invalid=True)
    uid = review["request"]["uid"]
    if response.get("uid") != uid:
        raise WebhookCallError(f"expected response.uid={json.dumps(uid)}, got "
                               f"{json.dumps(response.get('uid'))}", invalid=True)
    if response.get("patch") and not response.get("patchType"):
        raise WebhookCallError("webhook returned response.patch but not response.patchType",
                               invalid=True)
    if response.get("patchType") not in (None, "JSONPatch"):
        raise WebhookCallError(
            f"unsupported patch type {json.dumps(response.get('patchType'))}")
    return response


def _denied(name: str, status: Any) -> ApiStatusError:
    """kube-apiserver's ``webhookerrors.ToStatusErr``: the webhook's status, code at least
    400, the message prefixed with who denied."""
    result = dict(status) if isinstance(status, Mapping) else {}
    code = result.get("code")
    code = code if isinstance(code, int) and code >= 400 else 400
    denied_by = f'admission webhook "{name}" denied the request'
    if result.get("message"):
        message = f"{denied_by}: {result['message']}"
    elif result.get("reason"):
        message = f"{denied_by}: {result['reason']}"
    else:
        message = f"{denied_by} without explanation"
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "code": code}
    for field in ("reason", "details"):
        if result.get(field):
            body[field] = result[field]
    return ApiStatusError(code, body)


class Admission:
    """The admission webhooks of one server's stored configurations."""

    def __init__(self, *, storage: Storage, registry: KindRegistry, convert: Converter) -> None:
        self._storage = storage
        self._registry = registry
        self._convert = convert

    def request(
        self, rt: ResourceType, operation: str, *, namespace: str, name: str,
        obj: dict[str, Any] | None, old: Mapping[str, Any] | None, dry_run: bool,
        options: Mapping[str, Any],
    ) -> AdmissionRequest | None:
        """The request of a write, or None when no webhook configuration is stored (then a
        write pays this check alone). ``options``: the request's ``fieldManager`` (the
        options' ``kind`` comes from ``operation``) or its ``DeleteOptions``."""
        if not self.configured():
            return None
        full: dict[str, Any] = {"kind": f"{operation.capitalize()}Options",
                                "apiVersion": "meta.k8s.io/v1"}
        if dry_run:
            full["dryRun"] = ["All"]
        full.update((k, v) for k, v in options.items() if v is not None)
        return AdmissionRequest(rt=rt, operation=operation, name=name, obj=obj, old=old,
                                namespace=namespace if rt.namespaced else "",
                                dry_run=dry_run, options=full)

    def configured(self) -> bool:
        """Whether any webhook configuration is stored (then writes may call webhooks)."""
        return bool(self._storage.size(MUTATING) or self._storage.size(VALIDATING))

    def mutate(self, request: AdmissionRequest, obj: dict[str, Any], *,
               warnings: list[str] | None) -> dict[str, Any]:
        """``obj`` after every matching mutating webhook: ``obj`` itself when none changed it,
        else a new object; raises ApiStatusError on a denial or a failure under
        ``failurePolicy: Fail``."""
        for hook, at in self._matching(MUTATING, request, mutating=True):
            answer = self._call(hook, at, attrs.evolve(request, obj=obj), warnings=warnings)
            if answer is not None and answer.get("patch"):
                obj = self._patched(at, request, obj, answer)
        return obj

    def validate(self, request: AdmissionRequest | None, *, obj: Mapping[str, Any] | None,
                 warnings: list[str] | None) -> None:
        """Call every validating webhook matching ``request`` (None: nothing configured) with
        ``obj``; raises ApiStatusError on a denial or a failure under ``failurePolicy: Fail``.
        On delete, the mutating webhooks are called here too (there is nothing to patch)."""
        if request is None:
            return
        request = attrs.evolve(request, obj=obj)
        buckets = (MUTATING, VALIDATING) if request.operation == "DELETE" else (VALIDATING,)
        for bucket in buckets:
            for hook, at in self._matching(bucket, request, mutating=bucket == MUTATING):
                self._call(hook, at, request, warnings=warnings)

    def _matching(self, bucket: Bucket, request: AdmissionRequest, *,
                  mutating: bool) -> list[tuple[dict[str, Any], ResourceType]]:
        rt = request.rt
        if rt.group == ADMISSION_GROUP:  # webhook configurations are never admitted by webhooks
            return []
        configurations = self._storage.items(bucket)
        if not configurations:
            return []
        equivalents = [t for t in self._registry.all_types()
                       if t.is_custom and rt.is_custom and t != rt
                       and (t.group, t.plural) == (rt.group, rt.plural)]
        found = []
        for config in sorted(configurations,
                             key=lambda c: str((c.get("metadata") or {}).get("name"))):
            for raw in config.get("webhooks") or ():
                if not isinstance(raw, Mapping):
                    continue
                hook = _defaulted(raw, mutating=mutating)
                at = matching_version(hook, rt, operation=request.operation,
                                      namespace=request.namespace, equivalents=equivalents)
                if at is not None and self._selected(hook, request):
                    found.append((hook, at))
        return found

    def _selected(self, hook: Mapping[str, Any], request: AdmissionRequest) -> bool:
        objects = [o for o in (request.obj, request.old) if o is not None]
        chosen = label_selector_of(hook.get("objectSelector"))
        if chosen is None or not any(chosen.matches(o) for o in objects):
            return False
        namespaces = label_selector_of(hook.get("namespaceSelector"))
        if namespaces is None:
            return False
        if namespaces.empty:
            return True
        if (request.rt.group, request.rt.plural) == ("", "namespaces"):
            return any(namespaces.matches(o) for o in objects)
        if not request.namespace:  # a cluster-scoped object: never exempted
            return True
        namespace = self._storage.get(("", "namespaces"), namespace="", name=request.namespace)
        return namespace is not None and namespaces.matches(namespace)

    def _review(self, at: ResourceType, request: AdmissionRequest) -> dict[str, Any]:
        rt = request.rt
        body: dict[str, Any] = {
            "uid": str(uuid.uuid4()), "kind": _gvk(at), "resource": _gvr(at),
            "requestKind": _gvk(rt), "requestResource": _gvr(rt), "name": request.name,
            "operation": request.operation, "userInfo": _USER,
            "object": None if request.obj is None else self._at(request.obj, at),
            "oldObject": None if request.old is None else self._at(request.old, at),
            "dryRun": request.dry_run, "options": dict(request.options),
        }
        if request.namespace:
            body["namespace"] = request.namespace
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": body}

    def _at(self, obj: Mapping[str, Any], rt: ResourceType) -> Mapping[str, Any]:
        return obj if obj.get("apiVersion") == rt.api_version else self._convert(obj, rt)

    def _call(self, hook: Mapping[str, Any], at: ResourceType, request: AdmissionRequest, *,
              warnings: list[str] | None) -> Mapping[str, Any] | None:
        """The webhook's ``response`` (allowed), or None when it failed and is ignored."""
        name = str(hook.get("name") or "")
        review = self._review(at, request)
        config = hook.get("clientConfig") or {}
        timeout = hook.get("timeoutSeconds")
        seconds = min(max(timeout if isinstance(timeout, int) else _DEFAULT_TIMEOUT, 1),
                      _MAX_TIMEOUT)
        try:
            answer = post_review(_url(config, seconds), review, ca_bundle=config.get("caBundle"),
                                 timeout=float(seconds))
            response = _checked(review, answer)
        except WebhookCallError as err:
            if hook.get("failurePolicy") == "Ignore":
                log.warning('admission webhook "%s" failed and is ignored: %s', name, err)
                return None
            raise _calling_error(name, err) from None
        texts = [str(w) for w in response.get("warnings") or () if w]
        if warnings is not None:
            warnings.extend(texts)
        if response.get("allowed") is not True:
            denial = _denied(name, response.get("status"))
            if texts:
                denial.headers["Warning"] = ", ".join(f"299 - {json.dumps(t)}" for t in texts)
            raise denial
        if response.get("patch") and request.obj is None:
            raise _internal_error(f'admission webhook "{name}" attempted to modify the object, '
                                  "which is not supported for this operation")
        return response

    def _patched(self, at: ResourceType, request: AdmissionRequest,
                 obj: Mapping[str, Any], answer: Mapping[str, Any]) -> dict[str, Any]:
        try:
            patch = base64.b64decode(str(answer["patch"]), validate=True)
            patched = apply_patch(self._at(obj, at), patch, content_type=JSON_PATCH, rt=at)
        except (binascii.Error, ValueError, ApiStatusError) as err:
            raise _internal_error(f"JSONPatch: {err}") from None
        back = patched if at == request.rt else self._convert(patched, request.rt)
        mutated: dict[str, Any] = json.loads(json.dumps({  # a copy, the caller's to change
            **back, "apiVersion": request.rt.api_version, "kind": request.rt.kind}))
        return mutated
