"""Pinned connections over HTTPS: TCP goes to the checked IP, TLS speaks and verifies the name.

The server is a real TLS server on 127.0.0.1 with a certificate for ``article.test`` issued by a
CA made for this test; neither name resolves, so a request can only arrive through a pin.
"""

from __future__ import annotations

import datetime
import ssl
from pathlib import Path

import httpx
import pytest
from loopback_pages import Page, StartServer

from ask_another.articles._fetch import _PinnedBackend, connect_failure_reason, open_pinned_client

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_ca_and_server_cert(tmp_path: Path, host: str) -> tuple[bytes, Path, Path]:
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("read_article test CA"))
        .issuer_name(_name("read_article test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(host))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.OID_SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert_path = tmp_path / "server.pem"
    key_path = tmp_path / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return ca_cert.public_bytes(serialization.Encoding.PEM), cert_path, key_path


async def test_https_connects_to_pinned_ip_and_verifies_the_host_name(
    tmp_path: Path, start_page_server: StartServer
) -> None:
    ca_pem, cert_path, key_path = make_ca_and_server_cert(tmp_path, "article.test")
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert_path, key_path)
    server = await start_page_server(server_context)
    server.add("/story", Page(b"over tls", content_type="text/plain"))
    client_context = ssl.create_default_context(cadata=ca_pem.decode())

    backend = _PinnedBackend()
    backend.pin("article.test", server.port, ["127.0.0.1"])
    backend.pin("impostor.test", server.port, ["127.0.0.1"])
    async with open_pinned_client(backend, 5, client_context) as client:
        response = await client.get(f"https://article.test:{server.port}/story")
        # Same IP, other name: the certificate is checked against the name, so this fails.
        with pytest.raises(httpx.ConnectError) as caught:
            await client.get(f"https://impostor.test:{server.port}/story")

    assert connect_failure_reason(caught.value, "impostor.test") == (
        "the TLS certificate of impostor.test could not be verified "
        "(Hostname mismatch, certificate is not valid for 'impostor.test'.)"
    )

    assert response.text == "over tls"
    assert [(r.target, r.headers["host"]) for r in server.requests] == [
        ("/story", f"article.test:{server.port}")
    ]
