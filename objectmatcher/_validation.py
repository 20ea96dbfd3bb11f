"""Field validation of a kube-apiserver 1.25 for the built-in kinds, with its 422 causes.

Why it is here: the embedded API server refuses what a real server refuses with these rules, and
the builders' testing kit (``check_builders``) must refuse the same before any server sees the
object (``replicas: -2``, a Service port 0). Both may import ``objectmatcher`` (``builders``
through the facade's ``field_causes``, ``reconciler.embedded`` this module directly); neither may
import the other. The boundary: pure rules over JSON-shaped objects, no storage, no defaulting
(the server defaults before it validates; the kit validates what the builders produced, so each
rule reads an absent defaulted field as its default).

Each function returns the ``details.causes`` entries (``reason``, ``message``, ``field``) a real
server sends, in its order: required fields, selector/template agreement, container basics,
and the immutable fields of ``immutable-fields.json`` (Deployment/StatefulSet selector, the
StatefulSet fields other than replicas/template/updateStrategy/minReadySeconds, Service
``clusterIPs``, Job ``template``, ``immutable: true`` ConfigMaps and Secrets, ``metadata.uid``).
Messages quote values the way Go's ``%#v`` prints them where the recordings show it. Only the
rules a client is likely to meet are implemented; this is not the whole of Kubernetes validation.
``kind_causes`` is the one table of which rule checks a new object of which (group, kind).

It is over 500 lines because it is one table of per-kind validation functions sharing the cause
builders and the pod-spec checks that every workload kind calls; split, those helpers would be
imported back by each part.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

__all__ = [
    "Cause",
    "FieldCause",
    "field_causes",
    "forbidden",
    "go_labels",
    "go_quote",
    "go_selector",
    "go_string_list",
    "invalid",
    "json_type_matches",
    "json_type_name",
    "kind_causes",
    "not_supported",
    "required",
    "selector_matches",
    "type_invalid",
    "validate_configmap",
    "validate_configmap_update",
    "validate_core_event",
    "validate_events_event",
    "validate_hpa",
    "validate_ingress",
    "validate_job",
    "validate_job_update",
    "validate_pdb",
    "validate_pod",
    "validate_pod_update",
    "validate_pvc",
    "validate_pvc_update",
    "validate_role_binding",
    "validate_role_binding_update",
    "validate_secret",
    "validate_secret_update",
    "validate_service",
    "validate_service_update",
    "validate_statefulset_update",
    "validate_uid_update",
    "validate_workload",
    "validate_workload_selector_update",
]

Cause = dict[str, str]


def go_quote(value: str) -> str:
    """A string as Go's ``%q`` prints it (the form inside ``Invalid value: "..."``)."""
    return json.dumps(value, ensure_ascii=False)


def required(field: str, detail: str = "") -> Cause:
    """A ``FieldValueRequired`` cause."""
    message = f"Required value: {detail}" if detail else "Required value"
    return {"reason": "FieldValueRequired", "message": message, "field": field}


def invalid(field: str, value_repr: str, detail: str) -> Cause:
    """A ``FieldValueInvalid`` cause; ``value_repr`` is already formatted as Go prints it."""
    return {
        "reason": "FieldValueInvalid",
        "message": f"Invalid value: {value_repr}: {detail}",
        "field": field,
    }


def forbidden(field: str, detail: str) -> Cause:
    """A ``FieldValueForbidden`` cause."""
    return {"reason": "FieldValueForbidden", "message": f"Forbidden: {detail}", "field": field}


def not_supported(field: str, value: str, supported: Sequence[str]) -> Cause:
    """A ``FieldValueNotSupported`` cause."""
    values = ", ".join(go_quote(s) for s in supported)
    return {
        "reason": "FieldValueNotSupported",
        "message": f"Unsupported value: {go_quote(value)}: supported values: {values}",
        "field": field,
    }


def _duplicate(field: str, value: str) -> Cause:
    return {
        "reason": "FieldValueDuplicate",
        "message": f"Duplicate value: {go_quote(value)}",
        "field": field,
    }


# --- Go value formatting ---------------------------------------------------------------------


def go_labels(labels: Any) -> str:
    """``map[string]string{"a":"b", "c":"d"}`` (keys sorted), or ``map[string]string(nil)``."""
    if not isinstance(labels, Mapping):
        return "map[string]string(nil)"
    body = ", ".join(f"{go_quote(str(k))}:{go_quote(str(labels[k]))}" for k in sorted(labels))
    return f"map[string]string{{{body}}}"


def go_string_list(values: Any) -> str:
    """``[]string{"a", "b"}``, or ``[]string(nil)``."""
    if not isinstance(values, list):
        return "[]string(nil)"
    return "[]string{" + ", ".join(go_quote(str(v)) for v in values) + "}"


def go_selector(selector: Any) -> str:
    """A ``metav1.LabelSelector`` as ``%#v`` prints it in immutable-field messages."""
    if not isinstance(selector, Mapping):
        return "(*v1.LabelSelector)(nil)"
    requirements = selector.get("matchExpressions")
    if isinstance(requirements, list):
        items = ", ".join(
            "v1.LabelSelectorRequirement{"
            f"Key:{go_quote(str(r.get('key', '')))}, "
            f"Operator:{go_quote(str(r.get('operator', '')))}, "
            f"Values:{go_string_list(r.get('values'))}}}"
            for r in requirements
            if isinstance(r, Mapping)
        )
        expressions = f"[]v1.LabelSelectorRequirement{{{items}}}"
    else:
        expressions = "[]v1.LabelSelectorRequirement(nil)"
    return (
        f"v1.LabelSelector{{MatchLabels:{go_labels(selector.get('matchLabels'))}, "
        f"MatchExpressions:{expressions}}}"
    )


def _json_repr(value: Any) -> str:
    # Where the real message is a Go struct dump too long to mimic, the value as compact JSON.
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


_JSON_TYPES = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def json_type_name(value: Any) -> str:
    """The JSON type of a decoded value: ``null``, ``boolean``, ``integer``, ``number``, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def json_type_matches(value: Any, expected: str) -> bool:
    """Whether a decoded value has the JSON-schema type ``expected`` (``1.0`` is an integer)."""
    if isinstance(value, bool) and expected in ("integer", "number"):
        return False
    if expected == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _JSON_TYPES.get(expected, (object,)))


def type_invalid(path: str, actual: str, expected: str) -> Cause:
    """A ``FieldValueTypeInvalid`` cause in kube-openapi's wording."""
    name = path or "<root>"
    return {
        "reason": "FieldValueTypeInvalid",
        "message": (
            f"Invalid value: {go_quote(actual)}: {name} in body must be of type {expected}: "
            f"{go_quote(actual)}"
        ),
        "field": path,
    }


# --- selectors -------------------------------------------------------------------------------


def selector_matches(selector: Any, labels: Any) -> bool:
    """Whether a ``LabelSelector`` (matchLabels/matchExpressions) selects ``labels``.

    A missing selector selects nothing, as ``metav1.LabelSelectorAsSelector(nil)`` does.
    """
    if not isinstance(selector, Mapping):
        return False
    labels = labels if isinstance(labels, Mapping) else {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for requirement in selector.get("matchExpressions") or ():
        key = requirement.get("key")
        operator = requirement.get("operator")
        values = requirement.get("values") or ()
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def _selector_is_empty(selector: Mapping[str, Any]) -> bool:
    return not selector.get("matchLabels") and not selector.get("matchExpressions")


# --- pods ------------------------------------------------------------------------------------


def _validate_containers(containers: Any, path: str, *, required_list: bool) -> list[Cause]:
    if not isinstance(containers, list) or not containers:
        return [required(path)] if required_list else []
    causes: list[Cause] = []
    seen: set[str] = set()
    for index, container in enumerate(containers):
        at = f"{path}[{index}]"
        if not isinstance(container, Mapping):
            causes.append(required(at))
            continue
        name = container.get("name")
        if not name:
            causes.append(required(f"{at}.name"))
        elif name in seen:
            causes.append(_duplicate(f"{at}.name", str(name)))
        else:
            seen.add(str(name))
        if not container.get("image"):
            causes.append(required(f"{at}.image"))
    return causes


def validate_pod_spec(spec: Any, path: str) -> list[Cause]:
    """Containers present, each with a unique name and an image."""
    spec = spec if isinstance(spec, Mapping) else {}
    causes = _validate_containers(spec.get("containers"), f"{path}.containers", required_list=True)
    causes += _validate_containers(
        spec.get("initContainers"), f"{path}.initContainers", required_list=False
    )
    return causes


def validate_pod(obj: Mapping[str, Any]) -> list[Cause]:
    """A Pod: its pod spec."""
    return validate_pod_spec(obj.get("spec"), "spec")


# --- workloads -------------------------------------------------------------------------------


def validate_workload(obj: Mapping[str, Any], *, kind_name: str) -> list[Cause]:
    """Deployment, StatefulSet, DaemonSet, ReplicaSet: selector, template labels, pod spec.

    ``kind_name`` is the word in "empty selector is invalid for <kind_name>".
    """
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    causes: list[Cause] = []
    replicas = spec.get("replicas")
    if isinstance(replicas, int) and replicas < 0:
        causes.append(invalid("spec.replicas", str(replicas),
                              "must be greater than or equal to 0"))
    selector = spec.get("selector")
    if not isinstance(selector, Mapping):
        causes.append(required("spec.selector"))
    elif _selector_is_empty(selector):
        causes.append(invalid("spec.selector", go_selector(selector),
                              f"empty selector is invalid for {kind_name}"))
    template = spec.get("template")
    if not isinstance(template, Mapping):
        causes.append(required("spec.template"))
        return causes
    labels = (template.get("metadata") or {}).get("labels")
    if not (isinstance(selector, Mapping) and _selector_is_empty(selector)) and (
        not selector_matches(selector, labels)
    ):
        causes.append(invalid("spec.template.metadata.labels", go_labels(labels),
                              "`selector` does not match template `labels`"))
    causes += validate_pod_spec(template.get("spec"), "spec.template.spec")
    restart = (template.get("spec") or {}).get("restartPolicy", "Always")
    if restart != "Always":
        causes.append(not_supported("spec.template.spec.restartPolicy", str(restart), ["Always"]))
    return causes


def validate_workload_selector_update(
    old: Mapping[str, Any], new: Mapping[str, Any]
) -> list[Cause]:
    """``spec.selector`` may not change (apps/v1 Deployment, DaemonSet, ReplicaSet)."""
    new_selector = (new.get("spec") or {}).get("selector")
    if new_selector != (old.get("spec") or {}).get("selector"):
        return [invalid("spec.selector", go_selector(new_selector), "field is immutable")]
    return []


_STATEFULSET_MUTABLE = (
    "replicas", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
)


def validate_statefulset_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
    """Only replicas, template, updateStrategy, minReadySeconds, PVC retention may change."""
    old_spec = {k: v for k, v in (old.get("spec") or {}).items() if k not in _STATEFULSET_MUTABLE}
    new_spec = {k: v for k, v in (new.get("spec") or {}).items() if k not in _STATEFULSET_MUTABLE}
    if old_spec == new_spec:
        return []
    return [forbidden(
        "spec",
        "updates to statefulset spec for fields other than 'replicas', 'template', "
        "'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are "
        "forbidden",
    )]


def validate_job(obj: Mapping[str, Any]) -> list[Cause]:
    """A Job: template present, restartPolicy OnFailure or Never, the pod spec."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    template = spec.get("template")
    if not isinstance(template, Mapping):
        return [required("spec.template")]
    causes = validate_pod_spec(template.get("spec"), "spec.template.spec")
    restart = (template.get("spec") or {}).get("restartPolicy", "Always")
    if restart not in ("OnFailure", "Never"):
        causes.append(not_supported("spec.template.spec.restartPolicy", str(restart),
                                    ["OnFailure", "Never"]))
    return causes


def validate_job_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
    """A Job's ``selector``, ``completions`` (when not elastic) and ``template`` are immutable."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    causes: list[Cause] = []
    if new_spec.get("selector") != old_spec.get("selector"):
        causes.append(invalid("spec.selector", go_selector(new_spec.get("selector")),
                              "field is immutable"))
    if new_spec.get("template") != old_spec.get("template"):
        causes.append(invalid("spec.template", _json_repr(new_spec.get("template")),
                              "field is immutable"))
    return causes


# --- core kinds ------------------------------------------------------------------------------


def validate_service(obj: Mapping[str, Any]) -> list[Cause]:
    """A Service: ports required (except ExternalName and headless), each port and numeric
    target port 1-65535."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    service_type = spec.get("type", "ClusterIP")
    supported = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
    if service_type not in supported:
        return [not_supported("spec.type", str(service_type), supported)]
    ports = spec.get("ports")
    causes: list[Cause] = []
    if service_type == "ExternalName":
        if not spec.get("externalName"):
            causes.append(required("spec.externalName"))
        return causes
    if not ports and spec.get("clusterIP") != "None":
        causes.append(required("spec.ports"))
    names: set[str] = set()
    port_list = ports if isinstance(ports, list) else []
    for index, port in enumerate(port_list):
        at = f"spec.ports[{index}]"
        if len(port_list) > 1 and not port.get("name"):
            causes.append(required(f"{at}.name"))
        elif port.get("name"):
            if port["name"] in names:
                causes.append(_duplicate(f"{at}.name", str(port["name"])))
            names.add(str(port["name"]))
        number = port.get("port")
        if not isinstance(number, int) or not 1 <= number <= 65535:
            causes.append(invalid(f"{at}.port", str(number),
                                  "must be between 1 and 65535, inclusive"))
        target = port.get("targetPort")  # the server defaults it to ``port`` before this
        if isinstance(target, int) and not isinstance(target, bool) and not 1 <= target <= 65535:
            causes.append(invalid(f"{at}.targetPort", str(target),
                                  "must be between 1 and 65535, inclusive"))
    return causes


def validate_service_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
    """``spec.clusterIPs`` must start with ``spec.clusterIP``, and may not change once set
    (moving to or from headless included)."""
    old_ips = (old.get("spec") or {}).get("clusterIPs") or []
    new_ips = (new.get("spec") or {}).get("clusterIPs") or []
    new_ip = (new.get("spec") or {}).get("clusterIP")
    if new_ips and new_ip and new_ip != new_ips[0]:
        return [invalid("spec.clusterIPs", go_string_list(new_ips),
                        "first value must match `clusterIP`")]
    if old_ips and new_ips and old_ips[0] != new_ips[0]:
        return [invalid("spec.clusterIPs[0]", go_string_list(new_ips), "may not change once set")]
    return []


_IMMUTABLE_DETAIL = "field is immutable when `immutable` is set"
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_CONFIG_KEY_MSG = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
    "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
)
MAX_DATA_SIZE = 1024 * 1024  # ConfigMap and Secret payloads


def _config_key_causes(data: Any, field: str) -> list[Cause]:
    causes = []
    for key in sorted(data) if isinstance(data, Mapping) else ():
        at = f"{field}[{key}]"
        if len(key) > 253:
            causes.append(invalid(at, go_quote(key), "must be no more than 253 characters"))
        if not _CONFIG_KEY.fullmatch(key):
            causes.append(invalid(at, go_quote(key), _CONFIG_KEY_MSG))
        if key in (".", ".."):
            causes.append(invalid(at, go_quote(key), f"must not be '{key}'"))
    return causes


def _size(data: Any) -> int:
    if not isinstance(data, Mapping):
        return 0
    return sum(len(str(k)) + len(str(v or "")) for k, v in data.items())


def _too_long(field: str) -> Cause:
    return {
        "reason": "FieldValueTooLong",
        "message": f"Too long: must have at most {MAX_DATA_SIZE} bytes",
        "field": field,
    }


def validate_configmap(obj: Mapping[str, Any]) -> list[Cause]:
    """ConfigMap keys are config keys, not both in ``data`` and ``binaryData``; 1 MiB in all."""
    data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
    causes = _config_key_causes(data, "data") + _config_key_causes(binary, "binaryData")
    for key in sorted(set(data) & set(binary)):
        causes.append(invalid(f"data[{key}]", go_quote(key),
                              "duplicate of key present in binaryData"))
    if _size(data) + _size(binary) > MAX_DATA_SIZE:
        causes.append(_too_long(""))
    return causes


_SECRET_REQUIRED_KEYS = {
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
}


def validate_secret(obj: Mapping[str, Any]) -> list[Cause]:
    """Secret keys are config keys, 1 MiB in all, and typed Secrets carry their keys."""
    data = obj.get("data") or {}
    causes = _config_key_causes(data, "data")
    if _size(data) > MAX_DATA_SIZE:
        causes.append(_too_long("data"))
    secret_type = obj.get("type")
    for key in _SECRET_REQUIRED_KEYS.get(str(secret_type), ()):
        if key not in data:
            causes.append(required(f"data[{key}]"))
    if secret_type == "kubernetes.io/basic-auth" and not (
        "username" in data or "password" in data
    ):
        causes += [required("data[username]"), required("data[password]")]
    return causes


def validate_configmap_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
    """An ``immutable: true`` ConfigMap keeps ``immutable``, ``data`` and ``binaryData``."""
    if not old.get("immutable"):
        return []
    causes = []
    if not new.get("immutable"):
        causes.append(forbidden("immutable", _IMMUTABLE_DETAIL))
    for key in ("data", "binaryData"):
        if (new.get(key) or {}) != (old.get(key) or {}):
            causes.append(forbidden(key, _IMMUTABLE_DETAIL))
    return causes


def validate_secret_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
    """A Secret's ``type`` never changes; an ``immutable: true`` one keeps its data too."""
    causes = []
    if new.get("type") != old.get("type"):
        causes.append(invalid("type", go_quote(str(new.get("type", ""))), "field is immutable"))
    if old.get("immutable"):
        if not new.get("immutable"):
            causes.append(forbidden("immutable", _IMMUTABLE_DETAIL))
        if (new.get("data") or {}) != (old.get("data") or {}):
            causes.append(forbidden("data", _IMMUTABLE_DETAIL))
    return causes


def validate_pvc(obj: Mapping[str, Any]) -> list[Cause]:
    """A PVC: at least one access mode and a storage request."""
    spec = obj.get("spec") or {}
    causes = []
    if not spec.get("accessModes"):
        causes.append(required("spec.accessModes", "at least 1 access mode is required"))
    if "storage" not in ((spec.get("resources") or {}).get("requests") or {}):
        causes.append(required("spec.resources[storage]"))
    return causes


def validate_role_binding(obj: Mapping[str, Any], *, cluster: bool) -> list[Cause]:
    """A (Cluster)RoleBinding: ``roleRef`` names a Role or ClusterRole; subjects have a kind."""
    role_ref = obj.get("roleRef") or {}
    causes: list[Cause] = []
    kinds = ["ClusterRole"] if cluster else ["Role", "ClusterRole"]
    if role_ref.get("kind") not in kinds:
        causes.append(not_supported("roleRef.kind", str(role_ref.get("kind", "")), kinds))
    if not role_ref.get("name"):
        causes.append(required("roleRef.name"))
    for index, subject in enumerate(obj.get("subjects") or ()):
        if subject.get("kind") not in ("ServiceAccount", "User", "Group"):
            causes.append(not_supported(f"subjects[{index}].kind", str(subject.get("kind", "")),
                                        ["ServiceAccount", "User", "Group"]))
        if not subject.get("name"):
            causes.append(required(f"subjects[{index}].name"))
    return causes


_PATH_TYPES = ["Exact", "ImplementationSpecific", "Prefix"]


def validate_ingress(obj: Mapping[str, Any]) -> list[Cause]:
    """Ingress paths: ``pathType`` given and supported; Exact/Prefix paths absolute."""
    causes: list[Cause] = []
    for r_index, rule in enumerate((obj.get("spec") or {}).get("rules") or ()):
        for p_index, path in enumerate((rule.get("http") or {}).get("paths") or ()):
            at = f"spec.rules[{r_index}].http.paths[{p_index}]"
            path_type = path.get("pathType")
            if not path_type:
                causes.append(required(f"{at}.pathType", "pathType must be specified"))
            elif path_type not in _PATH_TYPES:
                causes.append(not_supported(f"{at}.pathType", str(path_type), _PATH_TYPES))
            elif path_type != "ImplementationSpecific" and not str(
                path.get("path", "")
            ).startswith("/"):
                causes.append(invalid(f"{at}.path", go_quote(str(path.get("path", ""))),
                                      "must be an absolute path"))
    return causes


def validate_hpa(obj: Mapping[str, Any]) -> list[Cause]:
    """An HPA: a scale target, ``1 <= minReplicas <= maxReplicas``."""
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    target = spec.get("scaleTargetRef") or {}
    for key in ("kind", "name"):
        if not target.get(key):
            causes.append(required(f"spec.scaleTargetRef.{key}"))
    minimum = spec.get("minReplicas")
    maximum = spec.get("maxReplicas")
    if isinstance(minimum, int) and minimum < 1:
        causes.append(invalid("spec.minReplicas", str(minimum),
                              "must be greater than or equal to 1"))
    if not isinstance(maximum, int) or maximum < 1:
        causes.append(invalid("spec.maxReplicas", str(maximum or 0),
                              "must be greater than or equal to 1"))
    elif isinstance(minimum, int) and minimum > maximum:
        causes.append(invalid("spec.minReplicas", str(minimum),
                              "must be less than or equal to maxReplicas"))
    return causes


def validate_role_binding_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
    """A (Cluster)RoleBinding's ``roleRef`` never changes (delete and recreate instead)."""
    role_ref = new.get("roleRef") or {}
    if role_ref == (old.get("roleRef") or {}):
        return []
    value = (
        f"rbac.RoleRef{{APIGroup:{go_quote(str(role_ref.get('apiGroup', '')))}, "
        f"Kind:{go_quote(str(role_ref.get('kind', '')))}, "
        f"Name:{go_quote(str(role_ref.get('name', '')))}}}"
    )
    return [invalid("roleRef", value, "cannot change roleRef")]


_POD_MUTABLE_DETAIL = (
    "pod updates may not change fields other than `spec.containers[*].image`, "
    "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only "
    "additions to existing tolerations) or `spec.terminationGracePeriodSeconds` (allow it to be "
    "set to 1 if it was previously negative)"
)


def _pod_spec_without_mutable(spec: Mapping[str, Any]) -> dict[str, Any]:
    masked = {k: v for k, v in spec.items()
              if k not in ("activeDeadlineSeconds", "tolerations")}
    for key in ("containers", "initContainers"):
        if isinstance(spec.get(key), list):
            masked[key] = [{k: v for k, v in c.items() if k != "image"}
                           for c in spec[key] if isinstance(c, Mapping)]
    return masked


def validate_pod_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
    """A Pod's spec is fixed but for images, ``activeDeadlineSeconds`` and added tolerations.

    The real message continues with a diff of the two specs, which is left out here.
    """
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    causes = []
    if _pod_spec_without_mutable(old_spec) != _pod_spec_without_mutable(new_spec):
        causes.append(forbidden("spec", _POD_MUTABLE_DETAIL))
    new_tolerations = new_spec.get("tolerations") or []
    if any(t not in new_tolerations for t in old_spec.get("tolerations") or ()):
        causes.append(forbidden("spec.tolerations", "existing toleration can not be modified "
                                "except its tolerationSeconds"))
    return causes


def validate_pvc_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
    """A claim's spec is fixed once created (a bound claim may grow its storage request).

    The real message continues with a diff of the two specs, which is left out here.
    """
    old_spec = dict(old.get("spec") or {})
    new_spec = dict(new.get("spec") or {})
    if (old.get("status") or {}).get("phase") == "Bound":
        old_spec.pop("resources", None)
        new_spec.pop("resources", None)
        old_spec.pop("volumeName", None)  # set by the binder
        new_spec.pop("volumeName", None)
    if old_spec == new_spec:
        return []
    return [forbidden(
        "spec", "spec is immutable after creation except resources.requests for bound claims"
    )]


def validate_core_event(obj: Mapping[str, Any]) -> list[Cause]:
    """A ``v1`` Event: ``involvedObject.namespace`` agrees with the Event's namespace."""
    involved = str((obj.get("involvedObject") or {}).get("namespace") or "")
    namespace = str((obj.get("metadata") or {}).get("namespace") or "")
    agrees = namespace in ("", "default") if not involved else namespace == involved
    if agrees:
        return []
    return [invalid("involvedObject.namespace", go_quote(involved),
                    "does not match event.namespace")]


def validate_events_event(obj: Mapping[str, Any]) -> list[Cause]:
    """An ``events.k8s.io/v1`` Event: the fields that API requires of a new event."""
    causes: list[Cause] = []
    if not obj.get("eventTime"):
        causes.append(required("eventTime"))
    event_type = str(obj.get("type") or "")
    if event_type not in ("Normal", "Warning"):
        causes.append(invalid("type", '""', f"has invalid value: {event_type}"))
    for key in ("reportingController", "reportingInstance", "action", "reason"):
        if not obj.get(key):
            causes.append(required(key))
    return causes


def validate_pdb(obj: Mapping[str, Any]) -> list[Cause]:
    """A PodDisruptionBudget sets at most one of ``minAvailable`` and ``maxUnavailable``."""
    spec = obj.get("spec") or {}
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        return [invalid("spec", _json_repr(spec),
                        "minAvailable and maxUnavailable cannot be both set")]
    return []


def validate_uid_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
    """``metadata.uid`` may not change; a real server reports it twice (two validation passes)."""
    old_uid = (old.get("metadata") or {}).get("uid")
    new_uid = (new.get("metadata") or {}).get("uid")
    if new_uid and old_uid and new_uid != old_uid:
        cause = invalid("metadata.uid", go_quote(str(new_uid)), "field is immutable")
        return [cause, dict(cause)]
    return []


# --- which rule checks which kind ------------------------------------------------------------

_RBAC = "rbac.authorization.k8s.io"

_KIND_RULES: dict[tuple[str, str], Callable[[Mapping[str, Any]], list[Cause]]] = {
    ("", "Service"): validate_service,
    ("", "Pod"): validate_pod,
    ("", "Secret"): validate_secret,
    ("", "ConfigMap"): validate_configmap,
    ("", "PersistentVolumeClaim"): validate_pvc,
    ("", "Event"): validate_core_event,
    ("apps", "Deployment"): lambda obj: validate_workload(obj, kind_name="deployment"),
    ("apps", "StatefulSet"): lambda obj: validate_workload(obj, kind_name="statefulset"),
    ("apps", "DaemonSet"): lambda obj: validate_workload(obj, kind_name="daemonset"),
    ("apps", "ReplicaSet"): lambda obj: validate_workload(obj, kind_name="replicaset"),
    ("batch", "Job"): validate_job,
    ("networking.k8s.io", "Ingress"): validate_ingress,
    ("policy", "PodDisruptionBudget"): validate_pdb,
    ("autoscaling", "HorizontalPodAutoscaler"): validate_hpa,
    (_RBAC, "RoleBinding"): lambda obj: validate_role_binding(obj, cluster=False),
    (_RBAC, "ClusterRoleBinding"): lambda obj: validate_role_binding(obj, cluster=True),
}


def kind_causes(group: str, kind: str, obj: Mapping[str, Any]) -> list[Cause]:
    """The causes that make ``obj``, an object of (group, kind), invalid on its own (create and
    update alike); empty for a kind without rules here. The server's and the kit's one table."""
    rule = _KIND_RULES.get((group, kind))
    return rule(obj) if rule is not None else []


@attrs.frozen(kw_only=True)
class FieldCause:
    """Why a kube-apiserver would refuse an object: one ``Status.details.causes`` entry.

    ``field`` is the path as the server prints it (``spec.ports[0].port``), ``reason`` its
    ``FieldValue*`` reason, ``message`` its words (``Invalid value: 0: must be between 1 and
    65535, inclusive``).
    """

    field: str
    reason: str
    message: str


def _as_sent(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    # A Secret's stringData is merged into data before the server validates (keys and sizes).
    string_data = obj.get("stringData") if obj.get("kind") == "Secret" else None
    if not isinstance(string_data, Mapping) or not string_data:
        return obj
    data = dict(obj.get("data") or {})
    for key, value in string_data.items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    return {**obj, "data": data}


def field_causes(obj: Mapping[str, Any]) -> tuple[FieldCause, ...]:
    """What a kube-apiserver 1.25 would refuse in a new built-in object beyond its schema.

    The per-kind rules the embedded API server applies (one table, ``kind_causes``): workload
    ``replicas`` not negative, selectors matching the pod template, containers with names and
    images, Service ports 1-65535, Job restart policies, config keys, typed Secrets' keys, ...
    Empty for a valid object and for kinds without rules (custom resources among them). Pure:
    ``builders.testing.check_builders`` calls it on every built child.
    """
    api_version = str(obj.get("apiVersion", ""))
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    causes = kind_causes(group, str(obj.get("kind", "")), _as_sent(obj))
    return tuple(
        FieldCause(field=c.get("field", ""), reason=c.get("reason", ""),
                   message=c.get("message", ""))
        for c in causes
    )
