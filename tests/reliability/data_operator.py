"""A small operator for the bad-input tests: ``Blob`` parents build a ConfigMap and a Secret.

The Thanos example builds neither, so this module (public names only) gives the suite children
that carry data: ``spec.size`` characters of incompressible text in a ConfigMap (to approach the
1 MiB object limit; ``spec.encoding`` other than ``text`` is refused by the builder) and a
Secret whose value is derived from the parent's uid (so it appears nowhere else legitimately
and any copy in logs, Events, status or annotations is a leak). Run it as
``python -m reconciler run tests.reliability.data_operator:operator``.
"""

from __future__ import annotations

import hashlib
import random
import string
from collections.abc import Mapping
from typing import Any

import builders as b
from builders import objects
from reconciler import Operator

GROUP = "reliability.optk.dev"
API_VERSION = f"{GROUP}/v1"
KIND = "Blob"
MANAGED_BY = "blob-operator"

BLOB_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"blobs.{GROUP}"},
    "spec": {
        "group": GROUP, "scope": "Namespaced",
        "names": {"kind": KIND, "plural": "blobs", "singular": "blob", "listKind": "BlobList"},
        "versions": [{
            "name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {
                    "size": {"type": "integer", "minimum": 0, "maximum": 2_000_000},
                    "encoding": {"type": "string"},
                }},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            }}},
        }],
    },
}
"""The ``Blob`` CRD, installed by the operator at start."""


def secret_value(parent: Mapping[str, Any]) -> str:
    """The Secret value of ``parent``: a digest of its uid (what a generated password is)."""
    uid = str(parent["metadata"].get("uid", ""))
    return "s3cr3t-" + hashlib.sha256(uid.encode()).hexdigest()[:32]


def _text(parent: Mapping[str, Any], size: int) -> str:
    rng = random.Random(str(parent["metadata"].get("uid", "")))
    alphabet = string.ascii_letters + string.digits
    return "".join(rng.choice(alphabet) for _ in range(size))


def _meta(parent: Mapping[str, Any], suffix: str) -> dict[str, Any]:
    return b.child_meta(parent, component=suffix, managed_by=MANAGED_BY,
                        name=f"{parent['metadata']['name']}-{suffix}")


@b.resource_builder
def payload(parent: Mapping[str, Any]) -> dict[str, Any]:
    """The ConfigMap with ``spec.size`` characters of data."""
    spec = parent.get("spec") or {}
    size = int(spec.get("size", 16))
    encoding = spec.get("encoding", "text")
    if encoding != "text":  # the schema lets any string through; the builder knows better
        raise b.InvalidSpecError(field="spec.encoding", value=encoding,
                                 reason="only 'text' is supported")
    return objects.config_map(metadata=_meta(parent, "payload"),
                              data={"blob": _text(parent, size)})


@b.resource_builder
def credentials(parent: Mapping[str, Any]) -> dict[str, Any]:
    """The Secret holding ``secret_value(parent)``."""
    return objects.secret(metadata=_meta(parent, "credentials"),
                          data={"password": secret_value(parent)})


def build(parent: Mapping[str, Any]) -> list[b.ResourceBuilder]:
    """A Blob's two children."""
    return [payload(parent), credentials(parent)]


operator = Operator(api_version=API_VERSION, kind=KIND, build=build, name=MANAGED_BY,
                    install=[BLOB_CRD])
"""The Blob operator."""
