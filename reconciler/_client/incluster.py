"""Running inside a cluster: the service account's credentials.

``InClusterConfig.from_environment()`` finds the API server from ``KUBERNETES_SERVICE_HOST``
and ``KUBERNETES_SERVICE_PORT`` and the service account's token, CA and namespace files (by
default under ``/var/run/secrets/kubernetes.io/serviceaccount``). ``incluster_api_client``
makes an official ``ApiClient`` whose bearer token is re-read from the file whenever the file
changes (projected tokens are rotated by the kubelet, about hourly; client-go re-reads too), so a
long-running operator never sends an expired token. Choosing between a kubeconfig, this and the
default kubeconfig is ``reconciler._client.connect.load_client``'s.

What ``optk run --leader-elect`` changes of the operator is ``reconciler._driver.deployed``'s.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from reconciler._base.errors import InClusterConfigError

__all__ = [
    "SERVICE_ACCOUNT_DIR",
    "InClusterConfig",
    "InClusterConfigError",
    "TokenFile",
    "incluster_api_client",
    "pod_namespace",
]

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where the kubelet mounts the service account's ``token``, ``ca.crt`` and ``namespace``."""


@attrs.frozen(kw_only=True)
class InClusterConfig:
    """Where the API server is and where the service account's files are."""

    host: str
    port: str
    token_path: Path
    ca_path: Path
    namespace_path: Path

    @classmethod
    def from_environment(
        cls, environ: Mapping[str, str] | None = None, *,
        directory: str | os.PathLike[str] = SERVICE_ACCOUNT_DIR,
    ) -> InClusterConfig:
        """Read ``KUBERNETES_SERVICE_HOST``/``_PORT`` and check the token and CA files exist;
        raises ``InClusterConfigError`` naming what is missing."""
        env = os.environ if environ is None else environ
        base = Path(directory)
        config = cls(host=env.get("KUBERNETES_SERVICE_HOST", ""),
                     port=env.get("KUBERNETES_SERVICE_PORT", ""),
                     token_path=base / "token", ca_path=base / "ca.crt",
                     namespace_path=base / "namespace")
        missing = tuple(
            [name for name, value in (("KUBERNETES_SERVICE_HOST", config.host),
                                      ("KUBERNETES_SERVICE_PORT", config.port)) if not value]
            + [str(p) for p in (config.token_path, config.ca_path) if not p.is_file()]
        )
        if missing:
            raise InClusterConfigError(missing)
        return config

    @property
    def url(self) -> str:
        """``https://host:port`` (an IPv6 host in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}"


class TokenFile:
    """A token file read again whenever it changes (inode, size or modification time)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._token = ""
        self.reads = 0

    def read(self) -> str:
        """The current token (one ``stat`` per call; the file is read only when it changed)."""
        info = self.path.stat()
        stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
        with self._lock:
            if stamp != self._stamp:
                self._token = self.path.read_text(encoding="utf-8").strip()
                self._stamp = stamp
                self.reads += 1
            return self._token


def incluster_api_client(config: InClusterConfig | None = None) -> Any:
    """An official ``ApiClient`` for the in-cluster API server; the token follows the file."""
    from kubernetes import client as kube_client

    config = config or InClusterConfig.from_environment()
    token = TokenFile(config.token_path)
    configuration = kube_client.Configuration()
    configuration.host = config.url
    configuration.ssl_ca_cert = str(config.ca_path)
    configuration.api_key_prefix = {"authorization": "Bearer"}
    configuration.api_key = {"authorization": token.read()}

    def refresh(conf: Any) -> None:
        conf.api_key["authorization"] = token.read()

    configuration.refresh_api_key_hook = refresh  # type: ignore[assignment]
    return kube_client.ApiClient(configuration)


def pod_namespace(
    config: InClusterConfig | None = None, environ: Mapping[str, str] | None = None
) -> str | None:
    """The namespace the pod runs in: ``POD_NAMESPACE``, else the service account's file."""
    env = os.environ if environ is None else environ
    if env.get("POD_NAMESPACE"):
        return env["POD_NAMESPACE"]
    path = config.namespace_path if config else Path(SERVICE_ACCOUNT_DIR) / "namespace"
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
