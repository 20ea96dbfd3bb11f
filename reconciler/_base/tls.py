"""The one generator of throw-away TLS material: a CA, a serving certificate, client certificates.

Both test servers serve HTTPS with a CA made when they start (kubectl sends no bearer token over
plain HTTP, and clients verify the server against the CA in their kubeconfig): the embedded API
server (``reconciler.embedded._tls``) and the real control plane (``reconciler.envtest._pki``),
which also signs client certificates for users. The certificate profile (EC P-256 keys, SHA-256,
valid from five minutes ago for seven days, a CA limited to path length 0, serving and client
extended key usages) is written once, here. Only the standard library and ``cryptography`` are
imported, so both servers may use it without depending on each other or on the driver; private
keys leave this module as PKCS#8 PEM bytes, are never shown in a ``repr`` and are written to disk
mode 0600 only.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import os
import warnings
from collections.abc import Iterable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "CertifiedKey",
    "ServingPki",
    "distinguished_name",
    "generate_serving_pki",
    "issue_client_certificate",
    "private_key_pem",
    "write_private",
]

VALIDITY = datetime.timedelta(days=7)
# Backdated so that a peer whose clock is a little behind still accepts a certificate at once.
BACKDATE = datetime.timedelta(minutes=5)


@dataclasses.dataclass(frozen=True, repr=False)
class CertifiedKey:
    """A certificate and its private key, both PEM (the key PKCS#8, unencrypted: in memory only,
    or on disk through ``write_private``)."""

    cert_pem: bytes
    key_pem: bytes

    def __repr__(self) -> str:
        subject = x509.load_pem_x509_certificate(self.cert_pem).subject.rfc4514_string()
        return f"CertifiedKey(subject={subject!r}, key_pem=<private>)"


@dataclasses.dataclass(frozen=True, repr=False)
class ServingPki:
    """A fresh CA (with its key, to sign more certificates) and a serving certificate it signed."""

    ca: CertifiedKey
    serving: CertifiedKey

    def __repr__(self) -> str:
        return f"ServingPki(ca={self.ca!r}, serving={self.serving!r})"


_COMMON_NAME_BOUND = 64


def distinguished_name(common_name: str, *, organizations: Iterable[str] = ()) -> x509.Name:
    """A subject: the organizations (for client certificates, the user's groups), then the common
    name (the user)."""
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    # X.509's upper bound of a common name is 64 characters (RFC 5280, a SHOULD that
    # cryptography enforces, else warns); kube-apiserver reads a longer user name as it is
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        attributes.append(x509.NameAttribute(
            NameOID.COMMON_NAME, common_name, _validate=len(common_name) <= _COMMON_NAME_BOUND))
    return x509.Name(attributes)


def private_key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    """``key`` as unencrypted PKCS#8 PEM."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` readable by its owner only (mode 0600 from the moment it is
    created, never wider)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _alt_names(hosts: Iterable[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _window() -> tuple[datetime.datetime, datetime.datetime]:
    now = datetime.datetime.now(datetime.UTC)
    return now - BACKDATE, now + VALIDITY


def _leaf(
    subject: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
    window: tuple[datetime.datetime, datetime.datetime],
) -> x509.CertificateBuilder:
    """A certificate that is not a CA, for ``key``, before its usage and signature."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject).issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(window[0]).not_valid_after(window[1])
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    )


def generate_serving_pki(
    *, ca_name: x509.Name, serving_name: x509.Name, hosts: Iterable[str],
) -> ServingPki:
    """A new CA named ``ca_name`` and a serving certificate for ``hosts`` (each an IP address or
    a DNS name, in this order in the subject alternative names), both valid for the same window."""
    window = _window()
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(window[0]).not_valid_after(window[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True,
            crl_sign=True, encipher_only=False, decipher_only=False,
        ), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving_cert = (
        _leaf(serving_name, serving_key, ca_name, window)
        .add_extension(x509.SubjectAlternativeName(_alt_names(hosts)), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return ServingPki(
        ca=CertifiedKey(cert_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
                        key_pem=private_key_pem(ca_key)),
        serving=CertifiedKey(cert_pem=serving_cert.public_bytes(serialization.Encoding.PEM),
                             key_pem=private_key_pem(serving_key)),
    )


def issue_client_certificate(ca: CertifiedKey, subject: x509.Name) -> CertifiedKey:
    """A client certificate for ``subject``, signed by ``ca``, valid from now (a Kubernetes API
    server takes the user from the common name and the groups from the organizations)."""
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)  # generate_serving_pki made it
    issuer = x509.load_pem_x509_certificate(ca.cert_pem).subject
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _leaf(subject, key, issuer, _window())
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return CertifiedKey(cert_pem=cert.public_bytes(serialization.Encoding.PEM),
                        key_pem=private_key_pem(key))
