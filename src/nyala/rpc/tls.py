"""TLS and mutual TLS contexts from the standard ``ssl`` module.

A server with ``ca_file`` and ``require_client_cert=True`` accepts only clients whose
certificate that CA signed (mutual TLS); a client with ``cert_file`` presents its own
certificate.  TLS 1.2 is the minimum, as in Kudu.
"""

from __future__ import annotations

import ssl
from pathlib import Path

__all__ = ["client_context", "server_context"]


def server_context(
    cert_file: str | Path,
    key_file: str | Path,
    *,
    ca_file: str | Path | None = None,
    require_client_cert: bool = False,
) -> ssl.SSLContext:
    """Context for a server presenting ``cert_file``; with ``require_client_cert``, mutual TLS."""
    if require_client_cert and ca_file is None:
        raise ValueError("mutual TLS needs ca_file to verify client certificates")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert_file), str(key_file))
    if ca_file is not None:
        ctx.load_verify_locations(str(ca_file))
        ctx.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_OPTIONAL
    return ctx


def client_context(
    ca_file: str | Path | None = None,
    *,
    cert_file: str | Path | None = None,
    key_file: str | Path | None = None,
    check_hostname: bool = True,
) -> ssl.SSLContext:
    """Context for callers trusting ``ca_file`` (or the system CAs), optionally with a client cert."""
    ctx = ssl.create_default_context(cafile=str(ca_file) if ca_file is not None else None)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = check_hostname
    if cert_file is not None:
        ctx.load_cert_chain(str(cert_file), str(key_file) if key_file is not None else None)
    return ctx
