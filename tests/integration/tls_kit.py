"""Test kit for clusters whose RPC is TLS (a helper module, no tests of its own).

:func:`make_pki` writes a throwaway CA, one server certificate valid for the given IP
addresses (every server of a MiniCluster presents it), a client certificate signed by the same
CA, and a second, unrelated CA (a "wrong CA" for clients): PEM files, EC P-256 keys in PKCS#8,
which Python's ``ssl`` and the JDK both load.  :func:`tls_cluster_options` gives a
MiniCluster on a chosen 127.a.b.0/24 block with that certificate on every server.
"""

from __future__ import annotations

import datetime
import ipaddress
import random
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from nyala.testing.minicluster import MiniClusterOptions

__all__ = ["Pki", "make_pki", "tls_cluster_options"]


@dataclass(frozen=True)
class Pki:
    """The PEM files of a throwaway public key infrastructure."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    #: A CA that signed none of the above, and its key (a certificate the first CA did not sign).
    other_ca: Path
    other_ca_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _issue(
    signer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None, common_name: str, ips: list[str]
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(signer[0].subject if signer else _name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if signer is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    elif ips:
        san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips])
        builder = builder.add_extension(san, critical=False)
    return builder.sign(signer[1] if signer else key, hashes.SHA256()), key


def _write(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> tuple[Path, Path]:
    cert_file, key_file = path.with_suffix(".crt"), path.with_suffix(".key")
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


def make_pki(root: Path, server_ips: list[str]) -> Pki:
    """Write a CA, a server certificate for ``server_ips``, a client certificate and another CA."""
    root.mkdir(parents=True, exist_ok=True)
    ca = _issue(None, "nyala-test-ca", [])
    ca_file, _ = _write(root / "ca", *ca)
    server_cert, server_key = _write(root / "server", *_issue(ca, "nyala-servers", server_ips))
    client_cert, client_key = _write(root / "client", *_issue(ca, "nyala-client", []))
    other_ca_file, other_ca_key = _write(root / "other-ca", *_issue(None, "another-ca", []))
    return Pki(ca_file, server_cert, server_key, client_cert, client_key, other_ca_file, other_ca_key)


def tls_cluster_options(root: Path, num_masters: int = 1, num_tservers: int = 1) -> tuple[MiniClusterOptions, Pki]:
    """A MiniCluster's options with TLS on every server, and the PKI its certificate comes from.

    The block is chosen here (as MiniCluster would) so that the certificate can name every
    server's address: 127.a.b.1.. for masters, 127.a.b.10.. for tablet servers.
    """
    a, b = random.randrange(1, 255), random.randrange(1, 255)
    ips = [f"127.{a}.{b}.{1 + i}" for i in range(num_masters)]
    ips += [f"127.{a}.{b}.{10 + i}" for i in range(num_tservers)]
    pki = make_pki(root, ips)
    options = MiniClusterOptions(
        num_masters=num_masters,
        num_tservers=num_tservers,
        ip_block=(a, b),
        webserver=False,
        rpc_certificate_file=str(pki.server_cert),
        rpc_private_key_file=str(pki.server_key),
        rpc_ca_certificate_file=str(pki.ca),
    )
    return options, pki
