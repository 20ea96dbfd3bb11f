"""The one TLS generator (``reconciler._base.tls``) that the embedded API server and the real
control plane share: its CA signs a serving certificate that a verifying client accepts for each
IP and name it was made for (and for no other), client certificates that chain to the same CA,
and its private keys stay private (mode 0600 on disk, never in a ``repr``).

The handshakes run between two ``ssl`` objects over memory buffers, so OpenSSL's own verification
(chain, validity, subject alternative names, key usage) decides, with no socket.
"""

from __future__ import annotations

import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from reconciler._base.tls import (
    CertifiedKey,
    ServingPki,
    distinguished_name,
    generate_serving_pki,
    issue_client_certificate,
    write_private,
)

HOSTS = ("127.0.0.1", "::1", "localhost", "api.example.test")


@pytest.fixture(scope="module")
def pki() -> ServingPki:
    return generate_serving_pki(
        ca_name=distinguished_name("test-ca", organizations=("test org",)),
        serving_name=distinguished_name("test-server"), hosts=HOSTS,
    )


def _files(directory: Path, issued: CertifiedKey, name: str) -> tuple[str, str]:
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    cert.write_bytes(issued.cert_pem)
    write_private(key, issued.key_pem)
    return str(cert), str(key)


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, server_hostname: str) -> None:
    """Complete a TLS handshake between the two contexts, or raise ``ssl.SSLError``."""
    server_in, server_out, client_in, client_out = (ssl.MemoryBIO() for _ in range(4))
    server_side = server.wrap_bio(server_in, server_out, server_side=True)
    client_side = client.wrap_bio(client_in, client_out, server_hostname=server_hostname)
    done = {"server": False, "client": False}
    for _ in range(20):
        for side, obj in (("client", client_side), ("server", server_side)):
            if not done[side]:
                try:
                    obj.do_handshake()
                    done[side] = True
                except ssl.SSLWantReadError:
                    pass
        server_in.write(client_out.read())
        client_in.write(server_out.read())
        if all(done.values()):
            return
    raise AssertionError("the handshake did not finish")


def _server_context(tmp_path: Path, pki: ServingPki) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*_files(tmp_path, pki.serving, "server"))
    return context


def _client_context(pki: ServingPki) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cadata=pki.ca.cert_pem.decode())
    return context


@pytest.mark.parametrize("host", HOSTS)
def test_the_ca_signs_a_serving_certificate_valid_for_each_given_ip_and_name(
    tmp_path: Path, pki: ServingPki, host: str,
) -> None:
    _handshake(_server_context(tmp_path, pki), _client_context(pki), host)


@pytest.mark.parametrize("host", ["127.0.0.2", "other.example.test"])
def test_the_serving_certificate_is_refused_for_other_names(
    tmp_path: Path, pki: ServingPki, host: str,
) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(_server_context(tmp_path, pki), _client_context(pki), host)


def test_another_ca_does_not_vouch_for_the_server(tmp_path: Path, pki: ServingPki) -> None:
    other = generate_serving_pki(ca_name=distinguished_name("other-ca"),
                                 serving_name=distinguished_name("x"), hosts=HOSTS)
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(_server_context(tmp_path, pki), _client_context(other), "localhost")


def test_the_certificates_say_what_they_are(pki: ServingPki) -> None:
    ca = x509.load_pem_x509_certificate(pki.ca.cert_pem)
    serving = x509.load_pem_x509_certificate(pki.serving.cert_pem)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not serving.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    usages = serving.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert serving.issuer == ca.subject
    assert ca.subject.rfc4514_string() == "CN=test-ca,O=test org"
    # The order of the subject alternative names is the order of the hosts given.
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(n.value) for n in names] == list(HOSTS)


def test_a_client_certificate_names_the_user_and_groups_and_is_accepted(
    tmp_path: Path, pki: ServingPki,
) -> None:
    issued = issue_client_certificate(
        pki.ca, distinguished_name("alice", organizations=("dev", "ops")))
    cert = x509.load_pem_x509_certificate(issued.cert_pem)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    groups = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert groups == ["dev", "ops"]
    server = _server_context(tmp_path, pki)
    server.verify_mode = ssl.CERT_REQUIRED
    server.load_verify_locations(cadata=pki.ca.cert_pem.decode())
    client = _client_context(pki)
    client.load_cert_chain(*_files(tmp_path, issued, "client"))
    _handshake(server, client, "localhost")


def test_private_keys_are_written_owner_only_and_never_shown(
    tmp_path: Path, pki: ServingPki,
) -> None:
    path = tmp_path / "key.pem"
    write_private(path, pki.serving.key_pem)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes() == pki.serving.key_pem
    assert pki.serving.key_pem.startswith(b"-----BEGIN PRIVATE KEY-----")
    for shown in (repr(pki), repr(pki.serving), str(pki.ca)):
        assert "PRIVATE KEY" not in shown
        assert "<private>" in shown
