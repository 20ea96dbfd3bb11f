"""A throw-away certificate authority and server certificate, generated when a server starts.

kubectl sends no bearer token over plain HTTP, so the embedded server always speaks HTTPS. Each
server gets its own CA (never reused, never written outside the server's private directory); the
kubeconfig carries the CA so clients verify the server instead of skipping TLS verification.
The certificates come from ``reconciler._base.tls``, the one generator the embedded server shares
with the real control plane (``reconciler.envtest``); this module keeps what is the server's own:
where the files go, and the ``ssl.SSLContext`` that ``_server`` serves them with.
A server restarted with its state (``stop()`` then ``start()``) keeps its CA and certificate:
``TlsFiles.material()`` reads them back before the files are removed and ``write_tls`` writes
them into the next private directory.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import attrs

from reconciler._base.tls import distinguished_name, generate_serving_pki, write_private

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
    write_private(files.server_key_path, material.key_pem)
    return files


def generate_tls(directory: Path, *, hosts: tuple[str, ...] = ("127.0.0.1",)) -> TlsFiles:
    """Create a CA and a server certificate for ``hosts`` (IPs or DNS names) in ``directory``."""
    organization = ("operator-toolkit embedded apiserver",)
    pki = generate_serving_pki(
        ca_name=distinguished_name("optk-embedded-ca", organizations=organization),
        serving_name=distinguished_name("optk-embedded-apiserver", organizations=organization),
        hosts=("localhost", *hosts),
    )
    return write_tls(directory, TlsMaterial(
        ca_pem=pki.ca.cert_pem, cert_pem=pki.serving.cert_pem, key_pem=pki.serving.key_pem,
    ))
