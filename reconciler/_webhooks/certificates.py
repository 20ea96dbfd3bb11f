"""The webhook server's TLS material: made by the toolkit and kept in a Secret, or read from files.

Two sources, as controller-runtime and kopf offer: the toolkit generates a CA and a serving
certificate (``reconciler._base.tls``, the one generator) and keeps them in a Secret of type
``kubernetes.io/tls`` with ``ca.crt`` beside ``tls.crt``/``tls.key`` (cert-manager's layout), so
every replica and every restart serves the same certificate; or an outside issuer (cert-manager)
mounts that layout as files. :func:`ensure_secret` makes the Secret when missing and rotates it
when a third of its validity is left (the CA is re-injected by whoever calls it). Key material
never appears in a ``repr``, a log line or an error message.
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from reconciler._base.errors import AlreadyExistsError, NotFoundError, WebhookCertificateError
from reconciler._client.protocol import ClusterClient

__all__ = ["FILES", "WebhookCertificates", "ensure_secret"]

FILES = ("tls.crt", "tls.key", "ca.crt")
"""The file and Secret keys: certificate, its key, the CA that signed it (cert-manager's)."""


@attrs.frozen(kw_only=True, repr=False)
class WebhookCertificates:
    """A serving certificate and key (PEM) and the CA bundle clients verify it with."""

    cert_pem: bytes
    key_pem: bytes
    ca_pem: bytes

    def __repr__(self) -> str:
        return f"WebhookCertificates(not_after={self.not_after().isoformat()}, key_pem=<private>)"

    @classmethod
    def generate(cls, hosts: Sequence[str]) -> WebhookCertificates:
        """A new CA and a serving certificate for ``hosts`` (IP addresses or DNS names; a
        Service's are ``name.namespace.svc``). Needs ``cryptography`` (the ``webhooks`` extra)."""
        from reconciler._base.tls import distinguished_name, generate_serving_pki

        pki = generate_serving_pki(
            ca_name=distinguished_name("optk webhook CA"),
            serving_name=distinguished_name(hosts[0] if hosts else "optk webhook"),
            hosts=hosts,
        )
        return cls(cert_pem=pki.serving.cert_pem, key_pem=pki.serving.key_pem,
                   ca_pem=pki.ca.cert_pem)

    @classmethod
    def from_directory(cls, path: Path) -> WebhookCertificates:
        """The files ``tls.crt``, ``tls.key`` and ``ca.crt`` of ``path`` (a mounted Secret)."""
        missing = [name for name in FILES if not (path / name).is_file()]
        if missing:
            raise WebhookCertificateError(
                f"webhook certificates in {path}: missing {', '.join(missing)}", source=str(path))
        cert, key, ca = ((path / name).read_bytes() for name in FILES)
        return cls(cert_pem=cert, key_pem=key, ca_pem=ca)

    @classmethod
    def from_secret(cls, secret: Mapping[str, Any]) -> WebhookCertificates:
        """The Secret's ``tls.crt``, ``tls.key`` and ``ca.crt``."""
        data = secret.get("data") or {}
        meta = secret.get("metadata") or {}
        source = f"Secret {meta.get('namespace')}/{meta.get('name')}"
        missing = [name for name in FILES if not data.get(name)]
        if missing:
            raise WebhookCertificateError(f"{source}: missing {', '.join(missing)}",
                                          source=source)
        try:
            cert, key, ca = (base64.b64decode(data[name], validate=True) for name in FILES)
        except ValueError:
            raise WebhookCertificateError(f"{source}: a key is not base64", source=source) from None
        return cls(cert_pem=cert, key_pem=key, ca_pem=ca)

    def to_secret(self, *, name: str, namespace: str) -> dict[str, Any]:
        """The ``kubernetes.io/tls`` Secret holding these (with ``ca.crt``)."""
        values = (self.cert_pem, self.key_pem, self.ca_pem)
        return {
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": name, "namespace": namespace},
            "data": {k: base64.b64encode(v).decode() for k, v in zip(FILES, values, strict=True)},
        }

    def write(self, path: Path) -> Path:
        """Write the three files into directory ``path`` (the key mode 0600); returns ``path``."""
        from reconciler._base.tls import write_private

        path.mkdir(parents=True, exist_ok=True)
        (path / "tls.crt").write_bytes(self.cert_pem)
        write_private(path / "tls.key", self.key_pem)
        (path / "ca.crt").write_bytes(self.ca_pem)
        return path

    def not_before(self) -> datetime.datetime:
        """When the serving certificate becomes valid."""
        return _validity(self.cert_pem)[0]

    def not_after(self) -> datetime.datetime:
        """When the serving certificate expires."""
        return _validity(self.cert_pem)[1]

    def due_for_rotation(self, now: datetime.datetime) -> bool:
        """Whether a third or less of the certificate's validity is left at ``now``."""
        start, end = _validity(self.cert_pem)
        return now >= end - (end - start) / 3


def _validity(cert_pem: bytes) -> tuple[datetime.datetime, datetime.datetime]:
    try:
        from cryptography import x509

        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        raise WebhookCertificateError("tls.crt is not a PEM certificate",
                                      source="tls.crt") from None
    return cert.not_valid_before_utc, cert.not_valid_after_utc


def ensure_secret(
    client: ClusterClient, *, name: str, namespace: str, hosts: Sequence[str],
    now: datetime.datetime,
) -> WebhookCertificates:
    """The certificates kept in Secret ``namespace/name``: made when the Secret is missing (or
    unreadable), replaced when due for rotation, else read. A replica that loses the race to
    create it reads the winner's."""
    try:
        secret = client.get("v1", "Secret", name, namespace=namespace)
    except NotFoundError:
        secret = None
    if secret is not None:
        try:
            current = WebhookCertificates.from_secret(secret)
            if not current.due_for_rotation(now):
                return current
        except WebhookCertificateError:
            pass  # replaced below
        fresh = WebhookCertificates.generate(hosts)
        body = fresh.to_secret(name=name, namespace=namespace)
        body["metadata"]["resourceVersion"] = secret["metadata"]["resourceVersion"]
        client.replace(body)
        return fresh
    fresh = WebhookCertificates.generate(hosts)
    try:
        client.create(fresh.to_secret(name=name, namespace=namespace))
    except AlreadyExistsError:
        return WebhookCertificates.from_secret(
            client.get("v1", "Secret", name, namespace=namespace))
    return fresh
