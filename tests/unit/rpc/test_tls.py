"""TLS and mutual TLS with a throwaway certificate authority."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from nyala import errors
from nyala.proto import rpc_pb2
from nyala.rpc import PING, Messenger, RpcServer
from nyala.rpc.tls import client_context, server_context
from tests.unit.rpc.conftest import Runner


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> tuple[Path, Path]:
    cert_file, key_file = path.with_suffix(".crt"), path.with_suffix(".key")
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


def _issue(
    ca_cert: x509.Certificate | None, ca_key: ec.EllipticCurvePrivateKey | None, common_name: str
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject if ca_cert else _name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if ca_cert is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    else:
        san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
        builder = builder.add_extension(san, critical=False)
    return builder.sign(ca_key or key, hashes.SHA256()), key


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files."""
    root = tmp_path_factory.mktemp("pki")
    ca_cert, ca_key = _issue(None, None, "nyala-test-ca")
    ca_file, _ = _write(root / "ca", ca_cert, ca_key)
    server_cert, server_key = _write(root / "server", *_issue(ca_cert, ca_key, "tserver-1"))
    client_cert, client_key = _write(root / "client", *_issue(ca_cert, ca_key, "client-1"))
    return {
        "ca": ca_file,
        "server_cert": server_cert,
        "server_key": server_key,
        "client_cert": client_cert,
        "client_key": client_key,
    }


def test_tls_round_trip(run: Runner, pki: dict[str, Path]) -> None:
    async def main() -> None:
        server = RpcServer(ssl_context=server_context(pki["server_cert"], pki["server_key"]))
        address = await server.start("127.0.0.1:0")
        messenger = Messenger(ssl_context=client_context(pki["ca"]))
        try:
            response = await messenger.call(address, PING, rpc_pb2.PingRequest(payload=b"secret"), timeout=10)
            assert response.payload == b"secret"
        finally:
            await messenger.close()
            await server.stop()

    run(main())


def test_mutual_tls_accepts_a_client_certificate_and_refuses_its_absence(run: Runner, pki: dict[str, Path]) -> None:
    async def main() -> None:
        ctx = server_context(pki["server_cert"], pki["server_key"], ca_file=pki["ca"], require_client_cert=True)
        server = RpcServer(ssl_context=ctx)
        address = await server.start("127.0.0.1:0")
        with_cert = Messenger(
            ssl_context=client_context(pki["ca"], cert_file=pki["client_cert"], key_file=pki["client_key"])
        )
        without_cert = Messenger(ssl_context=client_context(pki["ca"]))
        try:
            ok = await with_cert.call(address, PING, rpc_pb2.PingRequest(payload=b"mtls"), timeout=10)
            assert ok.payload == b"mtls"
            # TLS 1.3 reports the refusal at the handshake or as the connection dropping.
            with pytest.raises(errors.NetworkError):
                await without_cert.call(address, PING, rpc_pb2.PingRequest(), timeout=5)
            ok = await with_cert.call(address, PING, rpc_pb2.PingRequest(payload=b"again"), timeout=10)
            assert ok.payload == b"again"
        finally:
            await with_cert.close()
            await without_cert.close()
            await server.stop()

    run(main())


def test_a_plaintext_client_cannot_talk_to_a_tls_server(run: Runner, pki: dict[str, Path]) -> None:
    async def main() -> None:
        server = RpcServer(ssl_context=server_context(pki["server_cert"], pki["server_key"]))
        address = await server.start("127.0.0.1:0")
        plain = Messenger()
        secure = Messenger(ssl_context=client_context(pki["ca"]))
        try:
            with pytest.raises(errors.NetworkError):
                await plain.call(address, PING, rpc_pb2.PingRequest(), timeout=3)
            ok = await secure.call(address, PING, rpc_pb2.PingRequest(payload=b"ok"), timeout=10)
            assert ok.payload == b"ok"
        finally:
            await plain.close()
            await secure.close()
            await server.stop()

    run(main())


def test_mutual_tls_needs_a_ca() -> None:
    with pytest.raises(ValueError, match="mutual TLS needs ca_file"):
        server_context("cert.pem", "key.pem", require_client_cert=True)
