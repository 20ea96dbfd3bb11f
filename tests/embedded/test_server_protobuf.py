"""Protobuf request bodies: the envelope and the kinds kubectl's generators send."""

from __future__ import annotations

import pytest

from reconciler.embedded._protobuf import MAGIC, UnsupportedProtobuf, decode_object
from tests.embedded.helpers import RawClient


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, value: bytes | int | str) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _entry(number: int, key: str, value: bytes | str) -> bytes:
    return _field(number, _field(1, key) + _field(2, value))


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return MAGIC + _field(1, _field(1, api_version) + _field(2, kind)) + _field(2, raw)


def _configmap(name: str) -> bytes:
    meta = _field(1, name) + _field(2, "") + _entry(11, "app", "web") + _field(7, 0)
    return _envelope("v1", "ConfigMap", _field(1, meta) + _entry(2, "k", "v")
                     + _entry(3, "bin", b"\x00\x01") + _field(4, 1))


def test_decodes_a_configmap() -> None:
    assert decode_object(_configmap("pb"), api_version="v1", kind="ConfigMap") == {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "pb", "labels": {"app": "web"}},
        "data": {"k": "v"}, "binaryData": {"bin": "AAE="}, "immutable": True,
    }


def test_decodes_a_deployment_with_pointer_and_plain_fields() -> None:
    container = (_field(1, "c") + _field(2, "busybox") + _field(16, 0)
                 + _field(6, _field(3, 80) + _field(4, "TCP") + _field(2, 0)))
    template = _field(1, _entry(11, "app", "d")) + _field(2, _field(2, container))
    selector = _entry(1, "app", "d")
    strategy = _field(1, "RollingUpdate") + _field(2, _field(1, _field(1, 1) + _field(3, "25%"))
                                                   + _field(2, _field(2, 2)))
    spec = (_field(1, 0) + _field(2, selector) + _field(3, template) + _field(4, strategy)
            + _field(5, 0) + _field(7, 0))
    body = _envelope("apps/v1", "Deployment", _field(1, _field(1, "d")) + _field(2, spec))
    assert decode_object(body, api_version="apps/v1", kind="Deployment") == {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [
                {"name": "c", "image": "busybox",
                 "ports": [{"containerPort": 80, "protocol": "TCP"}]},
            ]}},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 2}},
        },
    }


@pytest.mark.parametrize("body", [
    b"not protobuf",
    MAGIC + b"\xff",
    _envelope("networking.k8s.io/v1", "Ingress", b""),
    _envelope("apps/v1", "Deployment", b""),
])
def test_refuses_what_it_cannot_decode(body: bytes) -> None:
    with pytest.raises(UnsupportedProtobuf):
        decode_object(body, api_version="v1", kind="ConfigMap")


def test_server_accepts_protobuf_creates(raw: RawClient, kube_namespace: str) -> None:
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps"
    code, body = raw.json("POST", path, raw=_configmap("from-proto"),
                          content_type="application/vnd.kubernetes.protobuf")
    assert code == 201
    assert body["data"] == {"k": "v"}
    # A kind no kubectl generator sends as protobuf is not decoded: 415, never a guess.
    code, body = raw.json("POST",
                          f"/apis/apps/v1/namespaces/{kube_namespace}/statefulsets",
                          raw=_envelope("apps/v1", "StatefulSet", b""),
                          content_type="application/vnd.kubernetes.protobuf")
    assert code == 415
    assert body["reason"] == "UnsupportedMediaType"
