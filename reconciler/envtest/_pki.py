"""The temporary PKI of a real control plane: a CA, the API server's serving certificate, the
service-account signing key and client certificates for users.

The certificates come from ``reconciler._base.tls``, the one generator the control plane shares
with the embedded API server; this module keeps what is the control plane's own: the RSA
service-account key pair the API server signs tokens with, the file layout the binaries are given,
and the CA kept (in memory) to sign a user's client certificate when a test asks for one.
Every file is written into the control plane's private directory (keys mode 0600) and removed
with it.
"""

from __future__ import annotations

from pathlib import Path

import attrs
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from reconciler._base.tls import (
    CertifiedKey,
    distinguished_name,
    generate_serving_pki,
    issue_client_certificate,
    private_key_pem,
    write_private,
)

__all__ = ["Pki", "generate_pki"]


@attrs.frozen(kw_only=True)
class Pki:
    """Paths of the generated files, and the CA (to sign client certificates later)."""

    directory: Path
    ca_cert_path: Path
    ca_pem: bytes
    serving_cert_path: Path
    serving_key_path: Path
    service_account_key_path: Path
    service_account_pub_path: Path
    _ca_key_pem: bytes = attrs.field(repr=False, alias="ca_key_pem")

    def client_certificate(self, *, user: str, groups: tuple[str, ...]) -> tuple[bytes, bytes]:
        """A client certificate (PEM cert, PEM key) for ``user`` in ``groups``: the API server
        takes the user from the common name and the groups from the organizations."""
        issued = issue_client_certificate(
            CertifiedKey(cert_pem=self.ca_pem, key_pem=self._ca_key_pem),
            distinguished_name(user, organizations=groups),
        )
        return issued.cert_pem, issued.key_pem


def generate_pki(directory: Path) -> Pki:
    """A fresh CA, a serving certificate for 127.0.0.1/localhost and an RSA service-account key
    pair, written into ``directory``."""
    serving = generate_serving_pki(
        ca_name=distinguished_name("optk-envtest-ca"),
        serving_name=distinguished_name("kube-apiserver"),
        hosts=("127.0.0.1", "localhost"),
    )
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pki = Pki(
        directory=directory,
        ca_cert_path=directory / "ca.crt",
        ca_pem=serving.ca.cert_pem,
        serving_cert_path=directory / "apiserver.crt",
        serving_key_path=directory / "apiserver.key",
        service_account_key_path=directory / "sa.key",
        service_account_pub_path=directory / "sa.pub",
        ca_key_pem=serving.ca.key_pem,
    )
    pki.ca_cert_path.write_bytes(serving.ca.cert_pem)
    pki.serving_cert_path.write_bytes(serving.serving.cert_pem)
    write_private(pki.serving_key_path, serving.serving.key_pem)
    write_private(pki.service_account_key_path, private_key_pem(sa_key))
    pki.service_account_pub_path.write_bytes(sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo,
    ))
    return pki
