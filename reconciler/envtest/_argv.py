"""The command lines and configuration files of the control plane's components (pure).

``ControlPlane`` decides ports, paths and tokens once, at start; these functions turn them into
argv lists and file contents, so a component restarted later (``restart_apiserver``,
``restart_controller_manager``) gets exactly the flags it had. No I/O happens here.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from reconciler.envtest._pki import Pki

__all__ = [
    "ADMIN_USER",
    "AUDIT_POLICY",
    "CONTROLLERS",
    "CONTROLLER_MANAGER_USER",
    "MARKER_USER",
    "SERVICE_ACCOUNT_ISSUER",
    "Layout",
    "apiserver_argv",
    "csv_field",
    "etcd_argv",
    "kubeconfig",
    "manager_argv",
    "token_file",
]

ADMIN_USER = "optk-admin"
"""The user of ``token`` and ``kubeconfig_path`` (group ``system:masters``)."""
CONTROLLER_MANAGER_USER = "optk-controller-manager"
MARKER_USER = "optk-audit-marker"
CONTROLLERS = ("garbagecollector", "namespace", "serviceaccount", "serviceaccount-token")
"""The controllers kube-controller-manager runs (all there are without it: none)."""
_ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_ACCOUNT_ISSUER = _ISSUER
"""The issuer of ServiceAccount tokens, also the API server's one audience."""
AUDIT_POLICY: Mapping[str, Any] = {
    "apiVersion": "audit.k8s.io/v1", "kind": "Policy",
    "rules": [{"level": "Metadata", "omitStages": ["RequestReceived"]}],
}
"""One rule: every request at level Metadata, from the ``ResponseStarted`` stage on."""


@attrs.frozen(kw_only=True)
class Layout:
    """Where a control plane's pieces are: its private directory and ports (fixed at start)."""

    workdir: Path
    etcd_port: int
    peer_port: int
    apiserver_port: int

    @property
    def etcd_url(self) -> str:
        """etcd's client URL."""
        return f"http://127.0.0.1:{self.etcd_port}"

    @property
    def peer_url(self) -> str:
        """etcd's peer URL (one member)."""
        return f"http://127.0.0.1:{self.peer_port}"

    @property
    def apiserver_url(self) -> str:
        """kube-apiserver's URL."""
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def audit_log(self) -> Path:
        """kube-apiserver's audit log (JSON lines; appended to across restarts)."""
        return self.workdir / "audit.log"


def csv_field(value: str) -> str:
    """``value`` if it can stand in the token file's CSV unquoted; ValueError naming it if not."""
    if any(ch in value for ch in ',"\n'):
        raise ValueError(f"user or group {value!r} may not contain a comma, quote or newline")
    return value


def token_file(*, admin: str, controller_manager: str, marker: str,
               users: Mapping[str, tuple[str, tuple[str, ...]]]) -> str:
    """The static token file (``token,user,uid,"groups"`` lines) for the given tokens."""
    lines = [f'{admin},{ADMIN_USER},{ADMIN_USER},"system:masters"',
             f'{controller_manager},{CONTROLLER_MANAGER_USER},{CONTROLLER_MANAGER_USER},'
             '"system:masters"',
             f"{marker},{MARKER_USER},{MARKER_USER}"]
    lines += [f'{token},{user},{user},"{",".join(groups)}"'
              for user, (token, groups) in users.items()]
    return "\n".join(lines) + "\n"


def kubeconfig(*, url: str, ca_pem: bytes, user: str,
               credentials: Mapping[str, str]) -> dict[str, Any]:
    """A kubeconfig document for ``user`` with ``credentials`` (token or client certificate)."""
    return {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "optk-envtest", "cluster": {
            "server": url, "certificate-authority-data": base64.b64encode(ca_pem).decode(),
        }}],
        "users": [{"name": user, "user": dict(credentials)}],
        "contexts": [{"name": "optk-envtest", "context": {
            "cluster": "optk-envtest", "user": user, "namespace": "default",
        }}],
        "current-context": "optk-envtest", "preferences": {},
    }


def etcd_argv(etcd: Path, layout: Layout) -> list[str]:
    """etcd: one member on loopback, data in the private directory, no fsync (tests only)."""
    return [
        str(etcd), "--data-dir", str(layout.workdir / "etcd"), "--name", "optk",
        "--listen-client-urls", layout.etcd_url, "--advertise-client-urls", layout.etcd_url,
        "--listen-peer-urls", layout.peer_url, "--initial-advertise-peer-urls", layout.peer_url,
        "--initial-cluster", f"optk={layout.peer_url}", "--log-level", "warn",
        "--unsafe-no-fsync",
    ]


def apiserver_argv(kube_apiserver: Path, layout: Layout, pki: Pki, *,
                   service_account_admission: bool = True) -> list[str]:
    """kube-apiserver on ``layout``'s port over its etcd, with the PKI, token file and audit log
    of the private directory (the same on every start, so a restart changes nothing).

    Without ``service_account_admission`` the ServiceAccount admission plugin is disabled: with
    no serviceaccount controller no namespace gets its ``default`` ServiceAccount, and the
    plugin would refuse every Pod (Kubernetes' own integration tests disable it for the same
    reason)."""
    workdir = layout.workdir
    admission = [] if service_account_admission else ["--disable-admission-plugins=ServiceAccount"]
    return [
        str(kube_apiserver), "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1", f"--secure-port={layout.apiserver_port}",
        f"--etcd-servers={layout.etcd_url}", f"--cert-dir={workdir / 'certs'}",
        f"--tls-cert-file={pki.serving_cert_path}",
        f"--tls-private-key-file={pki.serving_key_path}",
        f"--client-ca-file={pki.ca_cert_path}",
        f"--token-auth-file={workdir / 'tokens.csv'}", "--authorization-mode=Node,RBAC",
        f"--service-account-key-file={pki.service_account_pub_path}",
        f"--service-account-signing-key-file={pki.service_account_key_path}",
        f"--service-account-issuer={_ISSUER}", f"--api-audiences={_ISSUER}",
        "--service-cluster-ip-range=10.0.0.0/16", "--endpoint-reconciler-type=none",
        "--profiling=false", "--allow-privileged=true",
        f"--audit-policy-file={workdir / 'audit-policy.yaml'}",
        f"--audit-log-path={layout.audit_log}", "--audit-log-format=json",
        # blocking: each event is written before the request's handler returns, so a
        # marker request (``_flush_audit``) reliably follows everything sent before it
        "--audit-log-mode=blocking", "--audit-log-maxsize=0",
        # CEL rules of CRDs (x-kubernetes-validations): beta and on by default from 1.25.0, but
        # still alpha (off) in the v1.25.0-alpha.2 build of the kube assets
        "--feature-gates=CustomResourceValidationExpressions=true", *admission,
    ]


def manager_argv(kube_controller_manager: Path, *, kubeconfig_path: Path, pki: Pki) -> list[str]:
    """kube-controller-manager with the garbage collector, namespace and service-account
    controllers, no leader election and no serving port."""
    return [
        str(kube_controller_manager), f"--kubeconfig={kubeconfig_path}",
        "--leader-elect=false", "--secure-port=0", f"--controllers={','.join(CONTROLLERS)}",
        f"--service-account-private-key-file={pki.service_account_key_path}",
        f"--root-ca-file={pki.ca_cert_path}", "--use-service-account-credentials=false",
    ]
