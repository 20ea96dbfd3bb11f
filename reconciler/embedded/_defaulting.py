"""The fields a kube-apiserver 1.25 fills in when it stores an object, kind by kind.

These are the ``SetDefaults_*`` functions of ``k8s.io/kubernetes/pkg/apis/*/v1`` plus what the
default admission plugins and ``PrepareForCreate`` add (a PVC's protection finalizer, a Service's
ClusterIP, a Namespace's ``kubernetes.io/metadata.name`` label, the status a new object starts
with), checked against the recordings in ``fixtures/real-apiserver``. Every function changes the
object it is given in place: the server passes its own deep copy. Nothing here validates; an
object the defaults cannot make sense of is left for ``objectmatcher._validation`` to reject.

It is over 500 lines because it is a table of small per-kind functions mirroring Kubernetes'
``defaults.go`` files, one concept with no shared state between kinds: split by API group, a
reader comparing against the recordings would only search more files.
"""

from __future__ import annotations

import base64
import copy
import functools
import ipaddress
import random
from collections.abc import Mapping
from typing import Any

from objectmatcher import (
    DEFAULT_KUBERNETES_VERSION,
    InvalidQuantityError,
    canonical_quantity,
    schema_definitions,
)
from objectmatcher._validation import json_type_matches, json_type_name, type_invalid
from reconciler.embedded._kinds import Invalid, ServerContext

__all__ = [
    "QUANTITY_PATTERN",
    "canonical_quantities",
    "decode_builtin",
    "decode_metadata",
    "default_core_event",
    "default_daemonset",
    "default_daemonset_template_generation",
    "default_deployment",
    "default_events_event",
    "default_hpa",
    "default_hpa_status",
    "default_job",
    "default_namespace",
    "default_pod",
    "default_pod_spec",
    "default_pod_template",
    "default_pvc",
    "default_replicaset",
    "default_role_binding",
    "default_secret",
    "default_service",
    "default_statefulset",
    "drop_unknown_fields",
    "initial_status",
    "keep_all_but_status",
    "keep_allocated_service_values",
    "keep_creation_timestamp",
    "keep_server_fields",
    "keep_status",
    "mount_service_account_token",
    "wrong_types",
]

RBAC_GROUP = "rbac.authorization.k8s.io"
DEFAULT_FILE_MODE = 420  # 0644, the defaultMode of secret/configMap/projected volumes
DAEMONSET_TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"


# --- unknown fields ----------------------------------------------------------------------------
# A real server decodes a body into its Go types, so fields they do not have are dropped (with a
# warning, or a 400 under fieldValidation=Strict). The types are those of the schemas of
# objectmatcher's DEFAULT_KUBERNETES_VERSION (1.25, the version of the recordings), loaded by
# objectmatcher, the one owner of schema files.


@functools.cache
def _builtin_schemas() -> tuple[Mapping[str, Any], dict[tuple[str, str], str]]:
    definitions: Mapping[str, Any] = schema_definitions(DEFAULT_KUBERNETES_VERSION)["$defs"]
    by_kind: dict[tuple[str, str], str] = {}
    for name, definition in definitions.items():
        for gvk in definition.get("x-kubernetes-group-version-kind") or ():
            group, version = gvk.get("group", ""), gvk.get("version", "")
            by_kind[(f"{group}/{version}" if group else version, gvk.get("kind", ""))] = name
    return definitions, by_kind


def _resolve(schema: Mapping[str, Any], definitions: Mapping[str, Any]) -> Mapping[str, Any]:
    while "$ref" in schema:
        schema = definitions[str(schema["$ref"]).rsplit("/", 1)[1]]
    return schema


def _schema_types(schema: Mapping[str, Any]) -> list[str] | None:
    """The JSON types a (resolved) schema allows, ``None`` when free-form."""
    if "oneOf" in schema:
        allowed: list[str] = []
        for branch in schema["oneOf"]:
            types = _schema_types(branch) if isinstance(branch, Mapping) else None
            if types is None:
                return None
            allowed.extend(types)
        return allowed
    declared = schema.get("type")
    if declared is None:
        return None
    return [declared] if isinstance(declared, str) else [str(t) for t in declared]


class _Findings:
    def __init__(self, *, drop: bool) -> None:
        self.drop = drop
        self.unknown: list[str] = []
        self.wrong_types: list[dict[str, str]] = []


def _walk(
    value: Any,
    schema: Mapping[str, Any],
    definitions: Mapping[str, Any],
    path: str,
    findings: _Findings,
) -> None:
    schema = _resolve(schema, definitions)
    if value is None:
        return  # null decodes to the zero value
    types = _schema_types(schema)
    if types is not None and not any(
        json_type_matches(value, t) for t in types if t != "null"
    ):
        expected = ",".join(t for t in types if t != "null")
        findings.wrong_types.append(type_invalid(path, json_type_name(value), expected))
        return
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        if isinstance(properties, Mapping):
            for key in [k for k in value if k not in properties]:
                findings.unknown.append(f"{path}.{key}" if path else str(key))
                if findings.drop:
                    del value[key]
            if findings.drop:  # a null field decodes to its zero value: left out
                for key in [k for k, v in value.items() if v is None]:
                    del value[key]
            for key, item in value.items():
                if key in properties:
                    child = f"{path}.{key}" if path else str(key)
                    _walk(item, properties[key], definitions, child, findings)
        elif isinstance(additional, Mapping):
            for key, item in value.items():
                if item is None and findings.drop:
                    value[key] = _zero(additional, definitions)
                _walk(value[key], additional, definitions, f"{path}.{key}", findings)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index, item in enumerate(value):
                if item is None and findings.drop:
                    value[index] = _zero(items, definitions)
                _walk(value[index], items, definitions, f"{path}[{index}]", findings)


_ZEROS: dict[str, Any] = {"string": "", "integer": 0, "number": 0, "boolean": False}


def _zero(schema: Mapping[str, Any], definitions: Mapping[str, Any]) -> Any:
    # What Go decodes a null map value or list item into: "" for a string, {} for a struct.
    types = _schema_types(_resolve(schema, definitions)) or ["object"]
    kind = next((t for t in types if t != "null"), "object")
    if kind == "array":
        return []
    return {} if kind == "object" else _ZEROS.get(kind)


def _check_builtin(
    obj: dict[str, Any], *, drop: bool, api_version: str, kind: str
) -> _Findings:
    definitions, by_kind = _builtin_schemas()
    name = by_kind.get((
        api_version or str(obj.get("apiVersion", "")), kind or str(obj.get("kind", ""))
    ))
    findings = _Findings(drop=drop)
    if name is not None:
        _walk(obj, definitions[name], definitions, "", findings)
    return findings


def drop_unknown_fields(
    obj: dict[str, Any], *, drop: bool = True, api_version: str = "", kind: str = ""
) -> list[str]:
    """The paths (``spec.replica``, ``spec.template.spec.containers[0].imagePolicy``) of fields
    the object's built-in type does not have; with ``drop`` they are also removed, in place.

    The type is ``api_version``/``kind`` when given, else the object's own. Kinds without a
    built-in schema (custom resources) report nothing.
    """
    return _check_builtin(obj, drop=drop, api_version=api_version, kind=kind).unknown


def wrong_types(
    obj: Mapping[str, Any], *, api_version: str = "", kind: str = ""
) -> list[dict[str, str]]:
    """``FieldValueTypeInvalid`` causes for values of the wrong JSON type (``spec.replicas:
    "three"``), which a real server cannot decode into its Go types."""
    return _check_builtin(
        dict(obj), drop=False, api_version=api_version, kind=kind
    ).wrong_types


# --- quantities --------------------------------------------------------------------------------
# A real server decodes every ``resource.Quantity`` and encodes it back in canonical form
# (``0.5`` -> ``500m``, ``1024Mi`` -> ``1Gi``). The fields are found from the schemas: every
# reference to the Quantity definition (resources, PVC sizes, emptyDir sizeLimit, HPA targets).

_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"


def _ref_name(schema: Mapping[str, Any]) -> str | None:
    ref = schema.get("$ref")
    return str(ref).rsplit("/", 1)[1] if ref else None


def _schema_children(schema: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    children: list[Mapping[str, Any]] = []
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        children.extend(p for p in properties.values() if isinstance(p, Mapping))
    for key in ("additionalProperties", "items"):
        if isinstance(schema.get(key), Mapping):
            children.append(schema[key])
    return children


def _direct_refs(schema: Mapping[str, Any]) -> set[str]:
    """The definitions a schema refers to, not following the references."""
    refs: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        ref = _ref_name(node)
        if ref is not None:
            refs.add(ref)
        else:
            stack.extend(_schema_children(node))
    return refs


_HOLDERS: dict[int, frozenset[str]] = {}


def _quantity_holders(definitions: Mapping[str, Any]) -> frozenset[str]:
    """The definitions that can hold a Quantity somewhere below them (a fixed point over the
    reference graph, computed once per schema set)."""
    cached = _HOLDERS.get(id(definitions))
    if cached is not None:
        return cached
    refs = {name: _direct_refs(schema) for name, schema in definitions.items()
            if isinstance(schema, Mapping)}
    holders = {_QUANTITY}
    changed = True
    while changed:
        changed = False
        for name, targets in refs.items():
            if name not in holders and targets & holders:
                holders.add(name)
                changed = True
    result = frozenset(holders)
    _HOLDERS[id(definitions)] = result
    return result


QUANTITY_PATTERN = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"


def _canonicalize(
    value: Any, schema: Mapping[str, Any], definitions: Mapping[str, Any], bad: list[Any]
) -> Any:
    ref = _ref_name(schema)
    if ref == _QUANTITY:
        if value is None:
            return "0"  # null decodes to the zero Quantity
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            try:
                return canonical_quantity(value)
            except InvalidQuantityError:
                bad.append(value)
        return value
    if ref is not None:
        if ref not in _quantity_holders(definitions):
            return value
        schema = definitions.get(ref) or {}
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            child = (properties.get(key) if isinstance(properties, Mapping) else None) or (
                additional if isinstance(additional, Mapping) else None)
            if child is not None:
                value[key] = _canonicalize(item, child, definitions, bad)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            value[index] = _canonicalize(item, schema["items"], definitions, bad)
    return value


def canonical_quantities(obj: dict[str, Any], *, api_version: str, kind: str) -> list[Any]:
    """Rewrite, in place, every quantity of a built-in object in the canonical form a real
    server stores (``objectmatcher.canonical_quantity``; null is the zero quantity ``"0"``).
    Returns the strings and numbers that are no quantity (left as they are), which a real
    server cannot decode (``QUANTITY_PATTERN``); values of other types are left for
    ``decode_builtin``. Kinds without a built-in schema are left alone."""
    definitions, by_kind = _builtin_schemas()
    name = by_kind.get((api_version, kind))
    bad: list[Any] = []
    if name is not None:
        _canonicalize(obj, {"$ref": f"#/$defs/{name}"}, definitions, bad)
    return bad


_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def decode_metadata(obj: dict[str, Any]) -> None:
    """``metadata`` decoded as ``ObjectMeta`` (for custom resources, whose schema leaves it out):
    ``Invalid`` for values of the wrong type, unknown metadata fields dropped (in place)."""
    if "metadata" not in obj:
        return
    definitions, _ = _builtin_schemas()
    findings = _Findings(drop=True)
    _walk(obj["metadata"], definitions[_OBJECT_META], definitions, "metadata", findings)
    if findings.wrong_types:
        raise Invalid(findings.wrong_types)


def decode_builtin(obj: dict[str, Any], *, api_version: str, kind: str) -> None:
    """What decoding into the Go types does to a body, in one pass: ``Invalid`` for values of
    the wrong type, unknown fields dropped (in place)."""
    findings = _check_builtin(obj, drop=True, api_version=api_version, kind=kind)
    if findings.wrong_types:
        raise Invalid(findings.wrong_types)


def _child(obj: dict[str, Any], key: str) -> dict[str, Any]:
    """``obj[key]`` as a dict, created empty when absent or null."""
    value = obj.get(key)
    if not isinstance(value, dict):
        value = {}
        obj[key] = value
    return value


def _items(obj: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    value = obj.get(key)
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


# --- pods and pod templates ------------------------------------------------------------------


def _image_pull_policy(image: str) -> str:
    # Always for ":latest" or an untagged image without digest, else IfNotPresent.
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _default_probe(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    probe.setdefault("timeoutSeconds", 1)
    probe.setdefault("periodSeconds", 10)
    probe.setdefault("successThreshold", 1)
    probe.setdefault("failureThreshold", 3)
    http_get = probe.get("httpGet")
    if isinstance(http_get, dict):
        http_get.setdefault("path", "/")
        http_get.setdefault("scheme", "HTTP")
    grpc = probe.get("grpc")
    if isinstance(grpc, dict):
        grpc.setdefault("service", "")


def _default_container(container: dict[str, Any]) -> None:
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    if "image" in container and not container.get("imagePullPolicy"):
        container["imagePullPolicy"] = _image_pull_policy(str(container["image"] or ""))
    if not isinstance(container.get("resources"), dict):
        container["resources"] = {}
    for port in _items(container, "ports"):
        port.setdefault("protocol", "TCP")
    for env in _items(container, "env"):
        field_ref = (env.get("valueFrom") or {}).get("fieldRef")
        if isinstance(field_ref, dict):
            field_ref.setdefault("apiVersion", "v1")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        _default_probe(container.get(probe))


def _default_volume(volume: dict[str, Any]) -> None:
    sources = set(volume) - {"name"}
    if not sources:
        volume["emptyDir"] = {}
    for source in ("secret", "configMap", "projected", "downwardAPI"):
        if isinstance(volume.get(source), dict):
            volume[source].setdefault("defaultMode", DEFAULT_FILE_MODE)
    for item in _items(volume.get("downwardAPI") or {}, "items"):
        field_ref = item.get("fieldRef")
        if isinstance(field_ref, dict):
            field_ref.setdefault("apiVersion", "v1")
    host_path = volume.get("hostPath")
    if isinstance(host_path, dict):
        host_path.setdefault("type", "")


def default_pod_spec(spec: dict[str, Any]) -> None:
    """``SetDefaults_PodSpec`` and the container, volume and probe defaults inside it."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    if not isinstance(spec.get("securityContext"), dict):
        spec["securityContext"] = {}
    spec.setdefault("schedulerName", "default-scheduler")
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for container in _items(spec, key):
            _default_container(container)
    for volume in _items(spec, "volumes"):
        _default_volume(volume)
    if spec.get("hostNetwork"):
        for container in _items(spec, "containers") + _items(spec, "initContainers"):
            for port in _items(container, "ports"):
                port.setdefault("hostPort", port.get("containerPort"))


def default_pod_template(template: Any) -> None:
    """A workload's ``spec.template``: ``creationTimestamp: null`` and the pod-spec defaults."""
    if not isinstance(template, dict):
        return
    metadata = _child(template, "metadata")
    metadata.setdefault("creationTimestamp", None)
    default_pod_spec(_child(template, "spec"))


def default_pod(obj: dict[str, Any], ctx: ServerContext | None = None) -> None:
    """A Pod: pod-spec defaults plus what ``SetDefaults_Pod`` and the admission plugins add.

    The ServiceAccount admission plugin's token volume is ``mount_service_account_token``
    (on create only).
    """
    spec = _child(obj, "spec")
    default_pod_spec(spec)
    for container in _items(spec, "containers") + _items(spec, "initContainers"):
        resources = container.get("resources") or {}
        limits = resources.get("limits")
        if isinstance(limits, dict) and limits:
            requests = _child(resources, "requests")
            for name, quantity in limits.items():
                requests.setdefault(name, quantity)
    spec.setdefault("enableServiceLinks", True)
    account = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    spec["serviceAccountName"] = account
    spec["serviceAccount"] = account
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    if "tolerations" not in spec:
        spec["tolerations"] = [
            {
                "key": f"node.kubernetes.io/{taint}",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }
            for taint in ("not-ready", "unreachable")
        ]


SERVICE_ACCOUNT_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
_TOKEN_VOLUME_PREFIX = "kube-api-access-"
_RANDOM_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # utilrand.String's alphabet


def _token_volume_source() -> dict[str, Any]:
    # TokenVolumeSource() of plugin/pkg/admission/serviceaccount, as a 1.25 server serves it.
    return {
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt",
                           "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{
                "path": "namespace",
                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
            }]}},
        ],
        "defaultMode": DEFAULT_FILE_MODE,
    }


def mount_service_account_token(obj: dict[str, Any], *, suffix: str | None = None) -> None:
    """The ServiceAccount admission plugin on a new Pod: a projected ``kube-api-access-<5
    random>`` volume (token, ``kube-root-ca.crt``, namespace) mounted read-only at
    ``/var/run/secrets/kubernetes.io/serviceaccount`` in every init and regular container that
    does not mount something there already.

    Nothing is added when ``spec.automountServiceAccountToken`` is false, to a mirror pod, or
    when the pod already has a ``kube-api-access-*`` volume (its name is reused). A
    ServiceAccount's own ``automountServiceAccountToken`` is not consulted (see
    docs/embedded-kinds.md). ``suffix`` replaces the random part (tests).
    """
    metadata = obj.get("metadata") or {}
    if "kubernetes.io/config.mirror" in (metadata.get("annotations") or {}):
        return
    spec = _child(obj, "spec")
    if spec.get("automountServiceAccountToken") is False:
        return
    volumes = _items(spec, "volumes")
    existing = next((str(v.get("name")) for v in volumes
                     if str(v.get("name") or "").startswith(_TOKEN_VOLUME_PREFIX)), None)
    name = existing or _TOKEN_VOLUME_PREFIX + (
        suffix if suffix is not None
        else "".join(random.choice(_RANDOM_CHARS) for _ in range(5))
    )
    needs_volume = False
    for container in _items(spec, "initContainers") + _items(spec, "containers"):
        mounts = container.get("volumeMounts")
        if not isinstance(mounts, list):
            mounts = container["volumeMounts"] = []
        if any(isinstance(m, dict) and m.get("mountPath") == SERVICE_ACCOUNT_MOUNT_PATH
               for m in mounts):
            continue
        mounts.append({"name": name, "readOnly": True, "mountPath": SERVICE_ACCOUNT_MOUNT_PATH})
        needs_volume = True
    if existing is None and needs_volume:
        if not isinstance(spec.get("volumes"), list):
            spec["volumes"] = []
        spec["volumes"].append({"name": name, "projected": _token_volume_source()})


# --- workloads -------------------------------------------------------------------------------


def default_deployment(obj: dict[str, Any]) -> None:
    """``SetDefaults_Deployment`` (apps/v1) and the pod-template defaults."""
    spec = _child(obj, "spec")
    spec.setdefault("replicas", 1)
    strategy = _child(spec, "strategy")
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = _child(strategy, "rollingUpdate")
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    default_pod_template(spec.get("template"))


def _default_pvc_template(template: dict[str, Any]) -> None:
    template.setdefault("kind", "PersistentVolumeClaim")
    template.setdefault("apiVersion", "v1")
    _child(template, "metadata").setdefault("creationTimestamp", None)
    _child(template, "spec").setdefault("volumeMode", "Filesystem")
    _child(template, "status").setdefault("phase", "Pending")


def default_statefulset(obj: dict[str, Any]) -> None:
    """``SetDefaults_StatefulSet`` (apps/v1), pod-template and ``volumeClaimTemplates`` defaults."""
    spec = _child(obj, "spec")
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = _child(spec, "updateStrategy")
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        _child(strategy, "rollingUpdate").setdefault("partition", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    for template in _items(spec, "volumeClaimTemplates"):
        _default_pvc_template(template)
    default_pod_template(spec.get("template"))


def default_daemonset(obj: dict[str, Any]) -> None:
    """``SetDefaults_DaemonSet`` (apps/v1) and the pod-template defaults."""
    spec = _child(obj, "spec")
    strategy = _child(spec, "updateStrategy")
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = _child(strategy, "rollingUpdate")
        rolling.setdefault("maxUnavailable", 1)
        rolling.setdefault("maxSurge", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    default_pod_template(spec.get("template"))


def default_replicaset(obj: dict[str, Any]) -> None:
    """``SetDefaults_ReplicaSet`` (apps/v1) and the pod-template defaults."""
    spec = _child(obj, "spec")
    spec.setdefault("replicas", 1)
    default_pod_template(spec.get("template"))


def default_job(obj: dict[str, Any]) -> None:
    """``SetDefaults_Job`` (batch/v1), the generated selector and the pod-template defaults.

    The selector and template labels use ``metadata.uid``, so the server must have set it.
    """
    spec = _child(obj, "spec")
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    metadata = _child(obj, "metadata")
    uid = metadata.get("uid")
    if uid and not spec.get("manualSelector"):
        labels = _child(_child(_child(spec, "template"), "metadata"), "labels")
        labels.setdefault("job-name", metadata.get("name", ""))
        labels.setdefault("controller-uid", uid)
        match_labels = _child(_child(spec, "selector"), "matchLabels")
        match_labels.setdefault("controller-uid", uid)
    # SetDefaults_Job: ``obj.Labels = obj.Spec.Template.Labels`` when the Job has none. It runs
    # on the decoded request and again on the object read back from storage, after
    # generateSelector filled the template's labels: so a Job sent with no labels at all (nor
    # its template) gets ``controller-uid`` and ``job-name`` too, as kube-apiserver 1.25 answers.
    template = spec.get("template")
    template_meta = template.get("metadata") if isinstance(template, dict) else None
    template_labels = template_meta.get("labels") if isinstance(template_meta, dict) else None
    if isinstance(template_labels, dict) and template_labels and not metadata.get("labels"):
        metadata["labels"] = dict(template_labels)
    default_pod_template(spec.get("template"))


def default_daemonset_template_generation(
    obj: dict[str, Any], old: Mapping[str, Any] | None = None
) -> None:
    """The ``deprecated.daemonset.template.generation`` annotation: apps/v1's view of the
    internal ``spec.templateGeneration``, 1 on create and one more for each template change.

    ``old`` is the stored DaemonSet on update (its value is kept whatever the client sent);
    call after defaulting, so that only real template changes count.
    """
    annotations = _child(_child(obj, "metadata"), "annotations")
    if old is None:
        sent = annotations.get(DAEMONSET_TEMPLATE_GENERATION, "")
        generation = int(sent) if str(sent).isdigit() and int(sent) >= 1 else 1
    else:
        stored = ((old.get("metadata") or {}).get("annotations") or {}).get(
            DAEMONSET_TEMPLATE_GENERATION, "1"
        )
        generation = int(stored) if str(stored).isdigit() else 1
        old_template = (old.get("spec") or {}).get("template")
        if old_template != (obj.get("spec") or {}).get("template"):
            generation += 1
    annotations[DAEMONSET_TEMPLATE_GENERATION] = str(generation)


# --- core kinds ------------------------------------------------------------------------------


def default_service(obj: dict[str, Any], ctx: ServerContext, *, creating: bool = False) -> None:
    """``SetDefaults_Service`` and the ClusterIP/NodePort allocation of ``PrepareForCreate``.

    On create, a requested ClusterIP or nodePort is reserved (``Invalid`` when taken or out of
    range); on update only missing values are allocated, a change being a validation error.
    """
    spec = _child(obj, "spec")
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["sessionAffinity"] == "ClientIP":
        config = _child(_child(spec, "sessionAffinityConfig"), "clientIP")
        config.setdefault("timeoutSeconds", 10800)
    for port in _items(spec, "ports"):
        port.setdefault("protocol", "TCP")
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port")
    if spec["type"] in ("ClusterIP", "NodePort", "LoadBalancer"):
        spec.setdefault("internalTrafficPolicy", "Cluster")
    if spec["type"] in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if spec["type"] == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    if spec["type"] == "ExternalName":
        return
    ips_before = set(ctx.allocated_cluster_ips)
    ports_before = set(ctx.allocated_node_ports)
    try:
        _allocate_cluster_ip(spec, ctx, creating=creating)
        if _needs_node_ports(spec):
            _allocate_node_ports(spec, ctx, creating=creating)
    except Invalid:
        # Nothing of a rejected Service stays allocated.
        ctx.restore_cluster_ips(ips_before)
        ctx.allocated_node_ports.intersection_update(ports_before)
        raise
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")


def _in_network(text: str, network: ipaddress.IPv4Network) -> bool:
    try:
        return ipaddress.IPv4Address(text) in network
    except ValueError:
        return False


def _allocate_cluster_ip(spec: dict[str, Any], ctx: ServerContext, *, creating: bool) -> None:
    cluster_ip = spec.get("clusterIP") or (spec.get("clusterIPs") or [None])[0]
    if not cluster_ip:
        cluster_ip = ctx.allocate_cluster_ip()
    elif creating and cluster_ip != "None":
        problem = ""
        if not _in_network(str(cluster_ip), ctx.service_network):
            problem = (
                f"the provided IP ({cluster_ip}) is not in the valid range. The range of valid "
                f"IPs is {ctx.service_cidr}"
            )
        elif cluster_ip in ctx.allocated_cluster_ips:
            problem = "provided IP is already allocated"
        if problem:
            raise Invalid([invalid_cause(
                "spec.clusterIPs", f'[]string{{"{cluster_ip}"}}',
                f"failed to allocate IP {cluster_ip}: {problem}",
            )])
        ctx.allocated_cluster_ips.add(str(cluster_ip))
    spec["clusterIP"] = cluster_ip
    spec.setdefault("clusterIPs", [cluster_ip])


def _allocate_node_ports(spec: dict[str, Any], ctx: ServerContext, *, creating: bool) -> None:
    for index, port in enumerate(_items(spec, "ports")):
        requested = port.get("nodePort")
        if not requested:
            port["nodePort"] = ctx.allocate_node_port()
        elif creating:
            if int(requested) in ctx.allocated_node_ports:
                raise Invalid([invalid_cause(
                    f"spec.ports[{index}].nodePort", str(requested),
                    "provided port is already allocated",
                )])
            ctx.allocated_node_ports.add(int(requested))


def invalid_cause(field: str, value_repr: str, detail: str) -> dict[str, str]:
    """A ``FieldValueInvalid`` cause for an allocation that cannot be honoured."""
    return {
        "reason": "FieldValueInvalid",
        "message": f"Invalid value: {value_repr}: {detail}",
        "field": field,
    }


def _needs_cluster_ip(spec: Mapping[str, Any]) -> bool:
    return bool(spec.get("type", "ClusterIP") != "ExternalName")


def _needs_node_ports(spec: Mapping[str, Any]) -> bool:
    service_type = spec.get("type", "ClusterIP")
    return service_type == "NodePort" or (
        service_type == "LoadBalancer" and bool(spec.get("allocateLoadBalancerNodePorts", True))
    )


def _normalize_cluster_ips(old_spec: Mapping[str, Any], new_spec: dict[str, Any]) -> None:
    """``normalizeClusterIPs`` of an update: a client that changed only ``clusterIP`` (the
    singular field of older clients) changed ``clusterIPs`` with it, so that validation sees the
    change (moving to or from headless included) and refuses it."""
    old_ip, new_ip = old_spec.get("clusterIP") or "", new_spec.get("clusterIP") or ""
    if old_ip == new_ip or not new_ip:
        return
    if (old_spec.get("clusterIPs") or []) == (new_spec.get("clusterIPs") or []):
        new_spec["clusterIPs"] = [new_ip]


def keep_allocated_service_values(old: Mapping[str, Any], new: dict[str, Any]) -> None:
    """An update that leaves out ``clusterIP``/``clusterIPs`` or a port's ``nodePort`` keeps
    the allocated values (node ports matched by port name), as ``patchAllocatedValues`` does
    (then ``clusterIPs`` follows a changed ``clusterIP``, as ``normalizeClusterIPs`` does);
    a type change that no longer uses them clears the ones left as they were, as
    ``dropTypeDependentFields`` does (the values are not returned to the pools)."""
    old_spec = old.get("spec") or {}
    new_spec = _child(new, "spec")
    if _needs_cluster_ip(old_spec) and not _needs_cluster_ip(new_spec):
        if new_spec.get("clusterIPs") in (None, old_spec.get("clusterIPs")):
            for key in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
                new_spec.pop(key, None)
    else:  # each one left out keeps its allocated value (a client may send only the other)
        for key in ("clusterIP", "clusterIPs"):
            if not new_spec.get(key) and key in old_spec:
                new_spec[key] = copy.deepcopy(old_spec[key])
        _normalize_cluster_ips(old_spec, new_spec)
    old_ports = {p.get("name", ""): p.get("nodePort") for p in _items(old_spec, "ports")}
    if _needs_node_ports(old_spec) and not _needs_node_ports(new_spec):
        for port in _items(new_spec, "ports"):
            if port.get("nodePort") is not None and port.get("nodePort") == old_ports.get(
                port.get("name", "")
            ):
                del port["nodePort"]
        return
    used = {p.get("nodePort") for p in _items(new_spec, "ports") if p.get("nodePort")}
    for port in _items(new_spec, "ports"):
        kept = old_ports.get(port.get("name", ""))
        if not port.get("nodePort") and kept and kept not in used:
            port["nodePort"] = kept
            used.add(kept)


def default_secret(obj: dict[str, Any]) -> None:
    """``stringData`` folded into base64 ``data`` (it is never stored) and ``type: Opaque``."""
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = _child(obj, "data")
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
    obj.setdefault("type", "Opaque")


def default_pvc(obj: dict[str, Any]) -> None:
    """``volumeMode: Filesystem``, the pvc-protection finalizer, ``status.phase: Pending``."""
    _child(obj, "spec").setdefault("volumeMode", "Filesystem")
    finalizers = _child_list(_child(obj, "metadata"), "finalizers")
    if "kubernetes.io/pvc-protection" not in finalizers:
        finalizers.append("kubernetes.io/pvc-protection")
    _child(obj, "status").setdefault("phase", "Pending")


def _child_list(obj: dict[str, Any], key: str) -> list[Any]:
    value = obj.get(key)
    if not isinstance(value, list):
        value = []
        obj[key] = value
    return value


def default_namespace(obj: dict[str, Any]) -> None:
    """``spec.finalizers: [kubernetes]``, ``status.phase: Active`` and the name label."""
    metadata = _child(obj, "metadata")
    if metadata.get("name"):
        _child(metadata, "labels")["kubernetes.io/metadata.name"] = metadata["name"]
    spec = _child(obj, "spec")
    if not spec.get("finalizers"):
        spec["finalizers"] = ["kubernetes"]
    _child(obj, "status").setdefault("phase", "Active")


def _default_subjects(obj: dict[str, Any]) -> None:
    for subject in _items(obj, "subjects"):
        if not subject.get("apiGroup") and subject.get("kind") in ("User", "Group"):
            subject["apiGroup"] = RBAC_GROUP
    role_ref = obj.get("roleRef")
    if isinstance(role_ref, dict) and not role_ref.get("apiGroup"):
        role_ref["apiGroup"] = RBAC_GROUP


def default_role_binding(obj: dict[str, Any]) -> None:
    """``SetDefaults_(Cluster)RoleBinding``: the RBAC API group on ``roleRef`` and on User and
    Group subjects."""
    _default_subjects(obj)


def _scaling_rules(rules: Any, defaults: dict[str, Any]) -> dict[str, Any]:
    # GenerateHPAScale{Up,Down}Rules: the defaults, overridden by each field that is set.
    result = copy.deepcopy(defaults)
    if isinstance(rules, dict):
        for key in ("selectPolicy", "stabilizationWindowSeconds", "policies"):
            if rules.get(key) is not None:
                result[key] = copy.deepcopy(rules[key])
    return result


def default_hpa(obj: dict[str, Any]) -> None:
    """``SetDefaults_HorizontalPodAutoscaler`` (autoscaling/v2): ``minReplicas: 1``, a CPU
    utilisation target of 80 % when no metric is given, and complete scaling rules when
    ``behavior`` is set."""
    spec = _child(obj, "spec")
    spec.setdefault("minReplicas", 1)
    if not spec.get("metrics"):
        spec["metrics"] = [{
            "type": "Resource",
            "resource": {"name": "cpu",
                         "target": {"type": "Utilization", "averageUtilization": 80}},
        }]
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        behavior["scaleUp"] = _scaling_rules(behavior.get("scaleUp"), {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                         {"type": "Percent", "value": 100, "periodSeconds": 15}],
        })
        behavior["scaleDown"] = _scaling_rules(behavior.get("scaleDown"), {
            "selectPolicy": "Max",
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
        })


# --- events --------------------------------------------------------------------------------
# Go serialises a zero ``metav1.Time``/``MicroTime`` as null and a struct or a string without
# ``omitempty`` as ``{}``/``""``: the fields every Event read from a 1.25 server carries.

_CORE_EVENT_ZEROS: dict[str, Any] = {
    "source": {}, "firstTimestamp": None, "lastTimestamp": None, "eventTime": None,
    "reportingComponent": "", "reportingInstance": "",
}
_EVENTS_EVENT_ZEROS: dict[str, Any] = {
    "eventTime": None, "regarding": {}, "deprecatedSource": {},
    "deprecatedFirstTimestamp": None, "deprecatedLastTimestamp": None,
}


def default_core_event(obj: dict[str, Any]) -> None:
    """A core/v1 Event as 1.25 returns it: ``eventTime``, ``firstTimestamp`` and
    ``lastTimestamp`` null when unset, ``reportingComponent``/``reportingInstance`` "",
    ``source`` {}."""
    for key, zero in _CORE_EVENT_ZEROS.items():
        if obj.get(key) is None:
            obj[key] = copy.deepcopy(zero)
    _child(obj, "involvedObject")


def default_events_event(obj: dict[str, Any]) -> None:
    """An events.k8s.io/v1 Event as 1.25 returns it: ``regarding`` and ``deprecatedSource``
    {}, the deprecated timestamps null when unset."""
    for key, zero in _EVENTS_EVENT_ZEROS.items():
        if obj.get(key) is None:
            obj[key] = copy.deepcopy(zero)


def default_hpa_status(obj: dict[str, Any]) -> None:
    """autoscaling/v2 status fields without ``omitempty``: ``desiredReplicas`` (0) and
    ``currentMetrics`` (null until the controller reports some)."""
    status = obj.get("status")
    if isinstance(status, dict):
        status.setdefault("desiredReplicas", 0)
        status.setdefault("currentMetrics", None)


# The status each kind starts with: what a reset Go status struct serialises to (fields without
# ``omitempty`` appear as zero), as the recordings show.
_INITIAL_STATUS: dict[tuple[str, str], dict[str, Any]] = {
    ("apps", "Deployment"): {},
    ("apps", "StatefulSet"): {"replicas": 0, "availableReplicas": 0},
    ("apps", "DaemonSet"): {
        "currentNumberScheduled": 0,
        "numberMisscheduled": 0,
        "desiredNumberScheduled": 0,
        "numberReady": 0,
    },
    ("apps", "ReplicaSet"): {"replicas": 0},
    ("batch", "Job"): {},
    ("", "Service"): {"loadBalancer": {}},
    ("", "PersistentVolumeClaim"): {"phase": "Pending"},
    ("", "Pod"): {"phase": "Pending", "qosClass": "BestEffort"},
    ("networking.k8s.io", "Ingress"): {"loadBalancer": {}},
    ("policy", "PodDisruptionBudget"): {
        "disruptionsAllowed": 0,
        "currentHealthy": 0,
        "desiredHealthy": 0,
        "expectedPods": 0,
    },
    ("autoscaling", "HorizontalPodAutoscaler"): {"currentMetrics": None, "desiredReplicas": 0},
}


def initial_status(group: str, kind: str) -> dict[str, Any] | None:
    """The status a new object of this kind is stored with, or None to keep what was sent."""
    status = _INITIAL_STATUS.get((group, kind))
    return None if status is None else {**status}


def keep_status(old: Mapping[str, Any], new: dict[str, Any]) -> None:
    """A main-resource update of a kind with a status subresource: status stays as stored."""
    if "status" in old:
        new["status"] = copy.deepcopy(old["status"])
    else:
        new.pop("status", None)


def keep_all_but_status(old: Mapping[str, Any], new: dict[str, Any]) -> None:
    """A ``/status`` update: everything but ``status`` stays as stored, metadata included."""
    status = new.get("status")
    metadata = new.get("metadata")
    new.clear()
    new.update(copy.deepcopy({k: v for k, v in old.items() if k != "status"}))
    if isinstance(metadata, dict):  # the same dict, which the caller may hold on to
        metadata.clear()
        metadata.update(new.get("metadata") or {})
        new["metadata"] = metadata
    if status is not None:
        new["status"] = status


def keep_creation_timestamp(old: Mapping[str, Any], new: dict[str, Any]) -> None:
    """An update cannot change ``creationTimestamp``: the stored one is silently kept.

    A ``uid`` left out of the update is kept too (a different one is rejected by validation).
    """
    old_meta = old.get("metadata") or {}
    new_meta = _child(new, "metadata")
    if old_meta.get("creationTimestamp") is not None:
        new_meta["creationTimestamp"] = old_meta["creationTimestamp"]
    if old_meta.get("uid") and not new_meta.get("uid"):
        new_meta["uid"] = old_meta["uid"]


def keep_server_fields(
    old: Mapping[str, Any], new: dict[str, Any], *, status_subresource: bool
) -> None:
    """A main-resource update: the stored ``creationTimestamp`` and, with a status subresource,
    the stored status are kept whatever the client sent."""
    if status_subresource:
        keep_status(old, new)
    keep_creation_timestamp(old, new)
