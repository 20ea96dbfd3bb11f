"""Decoding of Kubernetes protobuf request bodies for the few kinds kubectl sends that way.

kubectl's typed generators (``kubectl create configmap|secret|namespace|serviceaccount|
deployment|service|job|role|rolebinding|clusterrole|clusterrolebinding|ingress|
poddisruptionbudget``) send
``application/vnd.kubernetes.protobuf``: the ``k8s\\x00`` magic, then a ``runtime.Unknown``
envelope (type meta and the raw message). This module decodes those kinds' messages into the
JSON shape (field numbers from ``k8s.io/api`` ``generated.proto``); any other kind raises
``UnsupportedProtobuf`` and the server answers 415, as it does for other unknown formats.
Responses are always JSON.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from reconciler.embedded._errors import EmbeddedServerError
from reconciler.embedded._times import format_time

__all__ = ["MAGIC", "PROTOBUF", "UnsupportedProtobuf", "decode_object"]

PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"


class UnsupportedProtobuf(EmbeddedServerError, ValueError):
    """The body is not protobuf this server can decode."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise UnsupportedProtobuf("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise UnsupportedProtobuf("varint too long")


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs: ints for varints, bytes for length-delimited fields."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise UnsupportedProtobuf("truncated field")
            out.append((number, data[pos:pos + length]))
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise UnsupportedProtobuf(f"unsupported wire type {wire}")
    return out


Decoder = Callable[[int | bytes], Any]


def _string(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise UnsupportedProtobuf("expected a string")
    return value.decode()


def _bytes(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise UnsupportedProtobuf("expected bytes")
    return base64.b64encode(value).decode()


def _bool(value: int | bytes) -> bool:
    """A pointer bool (``*bool``): false is a value."""
    return bool(value)


def _flag(value: int | bytes) -> bool:
    """A plain bool: Go writes false too, its JSON omits it (dropped as a zero value)."""
    return bool(value)


def _int(value: int | bytes) -> int:
    """A plain integer: zero is dropped, as Go's JSON omits it."""
    if not isinstance(value, int):
        raise UnsupportedProtobuf("expected an integer")
    return value


def _count(value: int | bytes) -> int:
    """A pointer integer (``*int32``, e.g. ``replicas``): zero is a value."""
    return _int(value)


def _quantity(value: int | bytes) -> str:
    return next((_string(v) for n, v in _fields(_raw(value)) if n == 1), "")


def _int_or_string(value: int | bytes) -> int | str:
    fields = dict(_fields(_raw(value)))
    if fields.get(1) == 1:
        return _string(fields.get(3, b""))
    number = fields.get(2, 0)
    return number if isinstance(number, int) else 0


def _pointer_int_or_string(value: int | bytes) -> int | str:
    """An ``*intstr.IntOrString`` (e.g. a PDB's ``minAvailable``): zero is a value."""
    return _int_or_string(value)


def _inline_http(value: int | bytes) -> Any:
    """An ``IngressRuleValue``, inlined in JSON: its ``http`` member, or "" (dropped) if unset."""
    for number, member in _fields(_raw(value)):
        if number == 1:
            return _decode(_raw(member), _SCHEMAS["HTTPIngressRuleValue"])
    return ""


def _time(value: int | bytes) -> str:
    seconds = next((v for n, v in _fields(_raw(value)) if n == 1 and isinstance(v, int)), 0)
    if not seconds:
        return ""  # the zero time: JSON null, dropped like other zero values
    return format_time(seconds)


def _raw(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise UnsupportedProtobuf("expected a message")
    return value


# message name -> field number -> (JSON name, decoder, kind: "one" | "list" | "map")
Schema = dict[int, tuple[str, Decoder, str]]


def _message(schema_name: str) -> Decoder:
    return lambda value: _decode(_raw(value), _SCHEMAS[schema_name])


_SCHEMAS: dict[str, Schema] = {
    "ObjectMeta": {
        1: ("name", _string, "one"), 2: ("generateName", _string, "one"),
        3: ("namespace", _string, "one"), 5: ("uid", _string, "one"),
        6: ("resourceVersion", _string, "one"), 7: ("generation", _int, "one"),
        8: ("creationTimestamp", _time, "one"), 11: ("labels", _string, "map"),
        12: ("annotations", _string, "map"),
        13: ("ownerReferences", _message("OwnerReference"), "list"),
        14: ("finalizers", _string, "list"),
    },
    "OwnerReference": {
        1: ("kind", _string, "one"), 3: ("name", _string, "one"), 4: ("uid", _string, "one"),
        5: ("apiVersion", _string, "one"), 6: ("controller", _bool, "one"),
        7: ("blockOwnerDeletion", _bool, "one"),
    },
    "LocalObjectReference": {1: ("name", _string, "one")},
    "ObjectReference": {
        1: ("kind", _string, "one"), 2: ("namespace", _string, "one"),
        3: ("name", _string, "one"), 4: ("uid", _string, "one"),
        5: ("apiVersion", _string, "one"),
    },
    "NamespaceSpec": {1: ("finalizers", _string, "list")},
    "LabelSelector": {
        1: ("matchLabels", _string, "map"),
        2: ("matchExpressions", _message("LabelSelectorRequirement"), "list"),
    },
    "LabelSelectorRequirement": {
        1: ("key", _string, "one"), 2: ("operator", _string, "one"),
        3: ("values", _string, "list"),
    },
    "PodTemplateSpec": {
        1: ("metadata", _message("ObjectMeta"), "one"),
        2: ("spec", _message("PodSpec"), "one"),
    },
    "PodSpec": {
        2: ("containers", _message("Container"), "list"),
        3: ("restartPolicy", _string, "one"),
        4: ("terminationGracePeriodSeconds", _count, "one"),
        6: ("dnsPolicy", _string, "one"), 7: ("nodeSelector", _string, "map"),
        8: ("serviceAccountName", _string, "one"),
        20: ("initContainers", _message("Container"), "list"),
    },
    "Container": {
        1: ("name", _string, "one"), 2: ("image", _string, "one"),
        3: ("command", _string, "list"), 4: ("args", _string, "list"),
        5: ("workingDir", _string, "one"),
        6: ("ports", _message("ContainerPort"), "list"),
        8: ("resources", _message("ResourceRequirements"), "one"),
        14: ("imagePullPolicy", _string, "one"), 16: ("stdin", _flag, "one"),
        17: ("stdinOnce", _flag, "one"), 18: ("tty", _flag, "one"),
    },
    "ContainerPort": {
        1: ("name", _string, "one"), 2: ("hostPort", _int, "one"),
        3: ("containerPort", _int, "one"), 4: ("protocol", _string, "one"),
    },
    "ResourceRequirements": {
        1: ("limits", _quantity, "map"), 2: ("requests", _quantity, "map"),
    },
    "DeploymentSpec": {
        1: ("replicas", _count, "one"),
        2: ("selector", _message("LabelSelector"), "one"),
        3: ("template", _message("PodTemplateSpec"), "one"),
        4: ("strategy", _message("DeploymentStrategy"), "one"),
        5: ("minReadySeconds", _int, "one"), 6: ("revisionHistoryLimit", _count, "one"),
        7: ("paused", _flag, "one"), 9: ("progressDeadlineSeconds", _count, "one"),
    },
    "DeploymentStrategy": {
        1: ("type", _string, "one"),
        2: ("rollingUpdate", _message("RollingUpdateDeployment"), "one"),
    },
    "RollingUpdateDeployment": {
        1: ("maxUnavailable", _int_or_string, "one"), 2: ("maxSurge", _int_or_string, "one"),
    },
    "ServiceSpec": {
        1: ("ports", _message("ServicePort"), "list"), 2: ("selector", _string, "map"),
        3: ("clusterIP", _string, "one"), 4: ("type", _string, "one"),
        5: ("externalIPs", _string, "list"), 7: ("sessionAffinity", _string, "one"),
        10: ("externalName", _string, "one"), 18: ("clusterIPs", _string, "list"),
    },
    "ServicePort": {
        1: ("name", _string, "one"), 2: ("protocol", _string, "one"),
        3: ("port", _int, "one"), 4: ("targetPort", _int_or_string, "one"),
        5: ("nodePort", _int, "one"),
    },
    "ConfigMap": {
        1: ("metadata", _message("ObjectMeta"), "one"), 2: ("data", _string, "map"),
        3: ("binaryData", _bytes, "map"), 4: ("immutable", _bool, "one"),
    },
    "Secret": {
        1: ("metadata", _message("ObjectMeta"), "one"), 2: ("data", _bytes, "map"),
        3: ("type", _string, "one"), 4: ("stringData", _string, "map"),
        5: ("immutable", _bool, "one"),
    },
    "Namespace": {
        1: ("metadata", _message("ObjectMeta"), "one"),
        2: ("spec", _message("NamespaceSpec"), "one"),
    },
    "PolicyRule": {
        1: ("verbs", _string, "list"), 2: ("apiGroups", _string, "list"),
        3: ("resources", _string, "list"), 4: ("resourceNames", _string, "list"),
        5: ("nonResourceURLs", _string, "list"),
    },
    "Subject": {
        1: ("kind", _string, "one"), 2: ("apiGroup", _string, "one"),
        3: ("name", _string, "one"), 4: ("namespace", _string, "one"),
    },
    "RoleRef": {
        1: ("apiGroup", _string, "one"), 2: ("kind", _string, "one"),
        3: ("name", _string, "one"),
    },
    "Role": {
        1: ("metadata", _message("ObjectMeta"), "one"),
        2: ("rules", _message("PolicyRule"), "list"),
    },
    "ClusterRole": {
        1: ("metadata", _message("ObjectMeta"), "one"),
        2: ("rules", _message("PolicyRule"), "list"),
    },
    "RoleBinding": {
        1: ("metadata", _message("ObjectMeta"), "one"),
        2: ("subjects", _message("Subject"), "list"),
        3: ("roleRef", _message("RoleRef"), "one"),
    },
    "ClusterRoleBinding": {
        1: ("metadata", _message("ObjectMeta"), "one"),
        2: ("subjects", _message("Subject"), "list"),
        3: ("roleRef", _message("RoleRef"), "one"),
    },
    "JobSpec": {
        1: ("parallelism", _count, "one"), 2: ("completions", _count, "one"),
        3: ("activeDeadlineSeconds", _count, "one"),
        4: ("selector", _message("LabelSelector"), "one"),
        5: ("manualSelector", _bool, "one"),
        6: ("template", _message("PodTemplateSpec"), "one"),
        7: ("backoffLimit", _count, "one"), 8: ("ttlSecondsAfterFinished", _count, "one"),
        9: ("completionMode", _string, "one"), 10: ("suspend", _bool, "one"),
    },
    "Job": {
        1: ("metadata", _message("ObjectMeta"), "one"),
        2: ("spec", _message("JobSpec"), "one"),
    },
    "Deployment": {
        1: ("metadata", _message("ObjectMeta"), "one"),
        2: ("spec", _message("DeploymentSpec"), "one"),
    },
    "Service": {
        1: ("metadata", _message("ObjectMeta"), "one"),
        2: ("spec", _message("ServiceSpec"), "one"),
    },
    "TypedLocalObjectReference": {
        1: ("apiGroup", _string, "one"), 2: ("kind", _string, "one"),
        3: ("name", _string, "one"),
    },
    "ServiceBackendPort": {1: ("name", _string, "one"), 2: ("number", _int, "one")},
    "IngressServiceBackend": {
        1: ("name", _string, "one"), 2: ("port", _message("ServiceBackendPort"), "one"),
    },
    "IngressBackend": {
        3: ("resource", _message("TypedLocalObjectReference"), "one"),
        4: ("service", _message("IngressServiceBackend"), "one"),
    },
    "HTTPIngressPath": {
        1: ("path", _string, "one"), 2: ("backend", _message("IngressBackend"), "one"),
        3: ("pathType", _string, "one"),
    },
    "HTTPIngressRuleValue": {1: ("paths", _message("HTTPIngressPath"), "list")},
    "IngressRule": {1: ("host", _string, "one"), 2: ("http", _inline_http, "one")},
    "IngressTLS": {1: ("hosts", _string, "list"), 2: ("secretName", _string, "one")},
    "IngressSpec": {
        1: ("defaultBackend", _message("IngressBackend"), "one"),
        2: ("tls", _message("IngressTLS"), "list"),
        3: ("rules", _message("IngressRule"), "list"),
        4: ("ingressClassName", _string, "one"),
    },
    "Ingress": {
        1: ("metadata", _message("ObjectMeta"), "one"),
        2: ("spec", _message("IngressSpec"), "one"),
    },
    "PodDisruptionBudgetSpec": {
        1: ("minAvailable", _pointer_int_or_string, "one"),
        2: ("selector", _message("LabelSelector"), "one"),
        3: ("maxUnavailable", _pointer_int_or_string, "one"),
        4: ("unhealthyPodEvictionPolicy", _string, "one"),
    },
    "PodDisruptionBudget": {
        1: ("metadata", _message("ObjectMeta"), "one"),
        2: ("spec", _message("PodDisruptionBudgetSpec"), "one"),
    },
    "ServiceAccount": {
        1: ("metadata", _message("ObjectMeta"), "one"),
        2: ("secrets", _message("ObjectReference"), "list"),
        3: ("imagePullSecrets", _message("LocalObjectReference"), "list"),
        4: ("automountServiceAccountToken", _bool, "one"),
    },
}


# The kinds whose protobuf bodies are decoded, by apiVersion (what kubectl's generators send).
_TOP_LEVEL = frozenset({
    ("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "Namespace"), ("v1", "ServiceAccount"),
    ("v1", "Service"), ("apps/v1", "Deployment"), ("batch/v1", "Job"),
    ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("networking.k8s.io/v1", "Ingress"), ("policy/v1", "PodDisruptionBudget"),
})


def _decode(data: bytes, schema: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, value in _fields(data):
        spec = schema.get(number)
        if spec is None:
            continue  # a field this server does not model (e.g. status): dropped
        name, decoder, kind = spec
        if kind == "one":
            decoded = decoder(value)
            # Go writes non-pointer fields even when zero; its JSON omits them (omitempty)
            if decoder not in (_bool, _count, _pointer_int_or_string) and decoded in ("", 0):
                continue
            out[name] = decoded
        elif kind == "list":
            out.setdefault(name, []).append(decoder(value))
        else:
            entry = dict(_fields(_raw(value)))
            key = _string(entry.get(1, b""))
            out.setdefault(name, {})[key] = decoder(entry.get(2, b""))
    return out


def decode_object(body: bytes, *, api_version: str, kind: str) -> dict[str, Any]:
    """The JSON-shaped object of a protobuf body sent for ``api_version``/``kind``."""
    if not body.startswith(MAGIC):
        raise UnsupportedProtobuf("missing the k8s protobuf magic")
    envelope = dict(_fields(body[len(MAGIC):]))
    type_meta = dict(_fields(_raw(envelope.get(1, b""))))
    sent_version = _string(type_meta.get(1, b"")) or api_version
    sent_kind = _string(type_meta.get(2, b"")) or kind
    schema = _SCHEMAS.get(sent_kind) if (api_version, sent_kind) in _TOP_LEVEL else None
    if schema is None or sent_kind != kind:
        raise UnsupportedProtobuf(f"protobuf bodies of {sent_kind} are not supported")
    obj = _decode(_raw(envelope.get(2, b"")), schema)
    return {"apiVersion": sent_version, "kind": sent_kind, **obj}
