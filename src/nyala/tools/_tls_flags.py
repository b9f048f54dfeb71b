"""The RPC TLS flags (Kudu's names): ``--rpc-certificate-file`` and friends, for servers and tools.

:func:`rpc_tls_options` adds the three flags to a click command that starts servers; the command
passes them on as ``rpc_certificate_file``, ``rpc_private_key_file`` and
``rpc_ca_certificate_file`` of :class:`nyala.server.ServerOptions` (None, a flag not given, as
""), and ``--rpc-authentication`` as ``rpc_authentication``, which checks that they go
together.  A given file must exist.

:func:`webserver_tls_options` adds ``--webserver-certificate-file`` and
``--webserver-private-key-file`` (HTTPS for the web server, Kudu's names) the same way.

:func:`client_tls_options` adds the client's side of them to the root ``nyala`` group (also
read from ``NYALA_RPC_CA_CERTIFICATE_FILE``, ``NYALA_RPC_CERTIFICATE_FILE`` and
``NYALA_RPC_PRIVATE_KEY_FILE``), so every admin command can reach a cluster whose RPC is TLS;
:func:`cli_ssl_context` gives a command the context they make (None: plain TCP).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any, TypeVar

import click

from nyala.rpc.tls import client_context
from nyala.server.base import RPC_AUTHENTICATION

__all__ = ["cli_ssl_context", "client_tls_options", "rpc_tls_options", "store_client_tls", "webserver_tls_options"]

F = TypeVar("F", bound=Callable[..., Any])

_FILE = click.Path(exists=True, dir_okay=False)


def rpc_tls_options(command: F) -> F:
    """Add ``--rpc-certificate-file``, ``--rpc-private-key-file`` and ``--rpc-ca-certificate-file``."""
    for flag in reversed(
        [
            click.option(
                "--rpc-certificate-file",
                default=None,
                type=_FILE,
                help="PEM certificate for TLS on every RPC connection in and out of this server (plain TCP is "
                "then refused); empty: no TLS.",
            ),
            click.option(
                "--rpc-private-key-file", default=None, type=_FILE, help="PEM private key of the certificate."
            ),
            click.option(
                "--rpc-ca-certificate-file",
                default=None,
                type=_FILE,
                help="PEM certificates of the CAs that signed the other servers' (and clients') certificates; "
                "empty: the system CAs.",
            ),
            click.option(
                "--rpc-authentication",
                type=click.Choice(RPC_AUTHENTICATION),
                default="optional",
                show_default=True,
                help="'required': refuse RPC connections whose peer presents no certificate signed by "
                "--rpc-ca-certificate-file (clients and servers alike); 'optional': check one when presented.",
            ),
        ]
    ):
        command = flag(command)
    return command


def webserver_tls_options(command: F) -> F:
    """Add ``--webserver-certificate-file`` and ``--webserver-private-key-file`` (HTTPS for the web pages)."""
    for flag in reversed(
        [
            click.option(
                "--webserver-certificate-file",
                default=None,
                type=_FILE,
                help="PEM certificate of the web server: pages, JSON and /metrics over HTTPS only.",
            ),
            click.option(
                "--webserver-private-key-file", default=None, type=_FILE, help="PEM private key of that certificate."
            ),
        ]
    ):
        command = flag(command)
    return command


_CONTEXT_KEY = "nyala.rpc_ssl_context"


def client_tls_options(group: F) -> F:
    """Add the client TLS flags to the root group; its callback passes them to :func:`store_client_tls`."""
    for flag in reversed(
        [
            click.option(
                "--rpc-ca-certificate-file",
                envvar="NYALA_RPC_CA_CERTIFICATE_FILE",
                default=None,
                type=_FILE,
                help="Talk TLS to the cluster, trusting the CAs in this PEM file (the servers' "
                "--rpc-ca-certificate-file). Env: NYALA_RPC_CA_CERTIFICATE_FILE.",
            ),
            click.option(
                "--rpc-certificate-file",
                envvar="NYALA_RPC_CERTIFICATE_FILE",
                default=None,
                type=_FILE,
                help="PEM certificate this tool presents to the servers (with --rpc-private-key-file). "
                "Env: NYALA_RPC_CERTIFICATE_FILE.",
            ),
            click.option(
                "--rpc-private-key-file",
                envvar="NYALA_RPC_PRIVATE_KEY_FILE",
                default=None,
                type=_FILE,
                help="PEM private key of --rpc-certificate-file. Env: NYALA_RPC_PRIVATE_KEY_FILE.",
            ),
        ]
    ):
        group = flag(group)
    return group


def store_client_tls(ca_file: str | None, cert_file: str | None, key_file: str | None) -> None:
    """Check the client TLS flags and keep their context for :func:`cli_ssl_context`."""
    if (cert_file is None) != (key_file is None):
        raise click.UsageError("--rpc-certificate-file and --rpc-private-key-file go together")
    if ca_file is None and cert_file is None:
        return
    try:
        context = client_context(ca_file, cert_file=cert_file, key_file=key_file)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise click.UsageError(f"cannot load the RPC TLS files: {exc}") from exc
    click.get_current_context().meta[_CONTEXT_KEY] = context


def cli_ssl_context() -> ssl.SSLContext | None:
    """The TLS context the root group's flags made, or None (plain TCP, also outside a command)."""
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(_CONTEXT_KEY)
