"""Clusters named by Secrets: what ``ClusterSecrets`` selects, and one Secret read as a cluster.

Why it exists: an operator that places children in other clusters (issue 41,
``builders.placed``) needs to know those clusters. Like Argo CD and multicluster-runtime, the
toolkit reads them from Secrets in one namespace of the operator's own cluster: each Secret
there (matching an optional label selector) with a ``kubeconfig`` key is a cluster named after
the Secret, and the Secret's labels are the cluster's labels (what builders select clusters by).

Boundary: pure values and parsing, no client and no I/O (``reconciler._client.clusters`` reads
the Secrets and keeps one client per cluster). The kubeconfig is a credential: it is kept out of
every ``repr``, and an error about it names the Secret and what is wrong with it, never a byte of
its content (a YAML parser's message quotes the text it failed on, so it is never passed on).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

import attrs

from reconciler._base.errors import ClusterSecretError, ReconcilerUsageError

__all__ = [
    "KUBECONFIG_KEY",
    "ClusterRecord",
    "ClusterSecretError",
    "ClusterSecrets",
    "parse_cluster_secret",
]

KUBECONFIG_KEY = "kubeconfig"
"""The Secret key that makes a Secret a cluster (its value: a kubeconfig, YAML or JSON)."""


def _selector(value: str | Mapping[str, str] | None) -> str | None:
    if value is None or isinstance(value, str):
        return value or None
    if not isinstance(value, Mapping):
        raise ReconcilerUsageError(
            f"ClusterSecrets: selector must be a label selector string or a mapping of labels, "
            f"got {value!r}")
    return ",".join(f"{key}={val}" for key, val in sorted(value.items())) or None


@attrs.frozen(kw_only=True)
class ClusterSecrets:
    """Where the clusters children may be placed in are declared: every Secret in ``namespace``
    matching ``selector`` (a label selector, ``"a=b,c"``, or a mapping of labels; None: every
    Secret there) with a ``kubeconfig`` key is a cluster named after the Secret, its labels the
    cluster's labels. ``request_timeout`` (seconds) bounds each request to such a cluster: a
    cluster that does not answer delays only its own children (docs/clusters.md); such a
    cluster's children are tried again after ``retry_after`` seconds, doubled at each failure
    up to ``retry_max`` (a bounded backoff, never a hot loop)."""

    namespace: str
    selector: str | None = attrs.field(default=None, converter=_selector)
    request_timeout: float = 10.0
    retry_after: float = 5.0
    retry_max: float = 300.0

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.namespace, str) or not self.namespace:
            raise ReconcilerUsageError(
                f"ClusterSecrets: namespace must be a namespace name, got {self.namespace!r}")
        for name in ("request_timeout", "retry_after", "retry_max"):
            if getattr(self, name) <= 0:
                raise ReconcilerUsageError(
                    f"ClusterSecrets: {name} must be > 0, got {getattr(self, name)}")


@attrs.frozen(kw_only=True)
class ClusterRecord:
    """One cluster as its Secret declares it: ``name`` (the Secret's), ``labels`` (the
    Secret's), ``resource_version`` (the Secret's: a change means new credentials, so a new
    connection) and ``kubeconfig`` (the parsed mapping; never in ``repr``)."""

    name: str
    labels: Mapping[str, str] = attrs.field(factory=dict)
    resource_version: str = ""
    kubeconfig: Mapping[str, Any] = attrs.field(factory=dict, repr=False, eq=False)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def parse_cluster_secret(secret: Mapping[str, Any]) -> ClusterRecord | None:
    """The cluster ``secret`` declares, or None when it has no ``kubeconfig`` key (a Secret
    of the namespace that is not a cluster). ``data`` (base64, as the API serves it) is read,
    else ``stringData`` (a Secret not yet stored). Raises ``ClusterSecretError`` naming the
    Secret when the key is there but not a usable kubeconfig."""
    meta = secret.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = str(meta.get("name") or "")
    where = f"Secret {meta.get('namespace') or ''}/{name}"
    data = _mapping(secret.get("data"))
    strings = _mapping(secret.get("stringData"))
    if KUBECONFIG_KEY in data:
        try:
            text = base64.b64decode(str(data[KUBECONFIG_KEY]), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise ClusterSecretError(
                f"{where}: key {KUBECONFIG_KEY!r} is not base64-encoded UTF-8") from None
    elif KUBECONFIG_KEY in strings:
        text = str(strings[KUBECONFIG_KEY])
    else:
        return None
    import yaml  # a parser only an operator with clusters needs: loaded on first use

    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError:  # its message quotes the text: never passed on
        raise ClusterSecretError(f"{where}: key {KUBECONFIG_KEY!r} is not YAML") from None
    if not isinstance(config, Mapping) or not config.get("clusters"):
        raise ClusterSecretError(
            f"{where}: key {KUBECONFIG_KEY!r} is not a kubeconfig (no clusters)")
    labels = _mapping(meta.get("labels"))
    return ClusterRecord(name=name, labels={str(k): str(v) for k, v in labels.items()},
                         resource_version=str(meta.get("resourceVersion") or ""),
                         kubeconfig=dict(config))
