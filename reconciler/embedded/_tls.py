"""A throw-away certificate authority and server certificate, generated when a server starts.

kubectl sends no bearer token over plain HTTP, so the embedded server always speaks HTTPS. Each
server gets its own CA (never reused, never written outside the server's private directory); the
kubeconfig carries the CA so clients verify the server instead of skipping TLS verification.
Only ``cryptography`` is used here; ``_server`` loads the files into an ``ssl.SSLContext``.
A server restarted with its state (``stop()`` then ``start()``) keeps its CA and certificate:
``TlsFiles.material()`` reads them back before the files are removed and ``write_tls`` writes
them into the next private directory.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from pathlib import Path

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["TlsFiles", "TlsMaterial", "generate_tls", "write_tls"]


@attrs.frozen(kw_only=True, repr=False)
class TlsMaterial:
    """The PEM bytes of a CA, a server certificate and its key (kept only in memory)."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes


@attrs.frozen(kw_only=True)
class TlsFiles:
    """Paths of the generated PEM files and the CA's PEM text (for kubeconfigs)."""

    ca_cert_path: Path
    server_cert_path: Path
    server_key_path: Path
    ca_pem: bytes

    def server_context(self) -> ssl.SSLContext:
        """An ``ssl.SSLContext`` serving the generated certificate (TLS 1.2+)."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(str(self.server_cert_path), str(self.server_key_path))
        return context

    def material(self) -> TlsMaterial:
        """The PEM bytes of these files (to write them again after a restart)."""
        return TlsMaterial(ca_pem=self.ca_pem, cert_pem=self.server_cert_path.read_bytes(),
                           key_pem=self.server_key_path.read_bytes())


def write_tls(directory: Path, material: TlsMaterial) -> TlsFiles:
    """Write ``material`` into ``directory`` (the key with mode 0600)."""
    files = TlsFiles(
        ca_cert_path=directory / "ca.crt",
        server_cert_path=directory / "server.crt",
        server_key_path=directory / "server.key",
        ca_pem=material.ca_pem,
    )
    files.ca_cert_path.write_bytes(material.ca_pem)
    files.server_cert_path.write_bytes(material.cert_pem)
    _write_private(files.server_key_path, material.key_pem)
    return files


def _name(common_name: str) -> x509.Name:
    return x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "operator-toolkit embedded apiserver"),
        x509.NameAttribute(NameOID.COMMON_NAME, common_name),
    ])


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def generate_tls(directory: Path, *, hosts: tuple[str, ...] = ("127.0.0.1",)) -> TlsFiles:
    """Create a CA and a server certificate for ``hosts`` (IPs or DNS names) in ``directory``."""
    now = datetime.datetime.now(datetime.UTC)
    start = now - datetime.timedelta(minutes=5)
    end = now + datetime.timedelta(days=7)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("optk-embedded-ca")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )

    alt_names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    for host in hosts:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt_names.append(x509.DNSName(host))
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("optk-embedded-apiserver")).issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    return write_tls(directory, TlsMaterial(
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=server_cert.public_bytes(serialization.Encoding.PEM),
        key_pem=server_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    ))
