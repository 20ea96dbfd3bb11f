"""The temporary PKI of a real control plane: a CA, the API server's serving certificate, the
service-account signing key and client certificates for users (``cryptography`` only).

Every file is written mode 0600 into the control plane's private directory and removed with it.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Pki", "generate_pki"]

_VALIDITY = datetime.timedelta(days=7)


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


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
        ca_key = serialization.load_pem_private_key(self._ca_key_pem, password=None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        ca_cert = x509.load_pem_x509_certificate(self.ca_pem)
        key = ec.generate_private_key(ec.SECP256R1())
        attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attributes)).issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def generate_pki(directory: Path) -> Pki:
    """A fresh CA, a serving certificate for 127.0.0.1/localhost and an RSA service-account key
    pair, written into ``directory``."""
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + _VALIDITY
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "optk-envtest-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True,
            crl_sign=True, encipher_only=False, decipher_only=False,
        ), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(serving_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName([
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost"),
        ]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    pki = Pki(
        directory=directory,
        ca_cert_path=directory / "ca.crt",
        ca_pem=ca_pem,
        serving_cert_path=directory / "apiserver.crt",
        serving_key_path=directory / "apiserver.key",
        service_account_key_path=directory / "sa.key",
        service_account_pub_path=directory / "sa.pub",
        ca_key_pem=_key_pem(ca_key),
    )
    pki.ca_cert_path.write_bytes(ca_pem)
    pki.serving_cert_path.write_bytes(serving.public_bytes(serialization.Encoding.PEM))
    _write_private(pki.serving_key_path, _key_pem(serving_key))
    _write_private(pki.service_account_key_path, _key_pem(sa_key))
    pki.service_account_pub_path.write_bytes(sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo,
    ))
    return pki
