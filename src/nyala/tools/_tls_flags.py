"""The RPC TLS flags (Kudu's names): ``--rpc-certificate-file`` and friends, for servers and tools.

:func:`server_tls_options` adds a command that starts servers the RPC flags
(``--rpc-certificate-file``, ``--rpc-private-key-file``, ``--rpc-ca-certificate-file``,
``--rpc-authentication``) and the web server's (``--webserver-certificate-file``,
``--webserver-private-key-file``), and hands them to it as one :class:`ServerTlsFlags`, whose
:meth:`~ServerTlsFlags.settings` are the :class:`nyala.server.ServerOptions` settings of the
same names (which check that they go together).  A given file must exist.

:func:`client_tls_options` adds the client's side of them to the root ``nyala`` group (also
read from ``NYALA_RPC_CA_CERTIFICATE_FILE``, ``NYALA_RPC_CERTIFICATE_FILE`` and
``NYALA_RPC_PRIVATE_KEY_FILE``), so every admin command can reach a cluster whose RPC is TLS;
:func:`cli_ssl_context` gives a command the context they make (None: plain TCP).
"""

from __future__ import annotations

import dataclasses
import functools
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, TypeVar

import click

from nyala.rpc.tls import client_context
from nyala.server.base import RPC_AUTHENTICATION

__all__ = [
    "ServerTlsFlags",
    "TlsSettings",
    "cli_ssl_context",
    "client_tls_options",
    "server_tls_options",
    "store_client_tls",
]

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")

_FILE = click.Path(exists=True, dir_okay=False)


@dataclass(frozen=True)
class ServerTlsFlags:
    """The TLS flags of a command that starts servers, as given (None: a flag not given)."""

    rpc_certificate_file: str | None = None
    rpc_private_key_file: str | None = None
    rpc_ca_certificate_file: str | None = None
    rpc_authentication: str = "optional"
    webserver_certificate_file: str | None = None
    webserver_private_key_file: str | None = None

    def settings(self, resolve: bool = False) -> TlsSettings:
        """The flags as ``ServerOptions`` (and ``MiniClusterOptions``) settings: "" for a flag not
        given; with ``resolve``, files as absolute paths (for servers that run elsewhere)."""

        def file(value: str | None) -> str:
            return "" if value is None else (str(Path(value).resolve()) if resolve else value)

        return TlsSettings(
            rpc_certificate_file=file(self.rpc_certificate_file),
            rpc_private_key_file=file(self.rpc_private_key_file),
            rpc_ca_certificate_file=file(self.rpc_ca_certificate_file),
            rpc_authentication=self.rpc_authentication,
            webserver_certificate_file=file(self.webserver_certificate_file),
            webserver_private_key_file=file(self.webserver_private_key_file),
        )


class TlsSettings(TypedDict):
    """The settings of :class:`nyala.server.ServerOptions` the TLS flags set."""

    rpc_certificate_file: str
    rpc_private_key_file: str
    rpc_ca_certificate_file: str
    rpc_authentication: str
    webserver_certificate_file: str
    webserver_private_key_file: str


_SERVER_FLAGS = [
    click.option(
        "--rpc-certificate-file",
        default=None,
        type=_FILE,
        help="PEM certificate for TLS on every RPC connection in and out of this server (plain TCP is "
        "then refused); empty: no TLS.",
    ),
    click.option("--rpc-private-key-file", default=None, type=_FILE, help="PEM private key of the certificate."),
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
    click.option(
        "--webserver-certificate-file",
        default=None,
        type=_FILE,
        help="PEM certificate of the web server: pages, JSON and /metrics over HTTPS only.",
    ),
    click.option("--webserver-private-key-file", default=None, type=_FILE, help="PEM private key of that certificate."),
]


def server_tls_options(command: Callable[..., R]) -> Callable[..., R]:
    """Add the six server TLS flags; the command receives them as one ``tls: ServerTlsFlags``."""
    fields = [f.name for f in dataclasses.fields(ServerTlsFlags)]

    @functools.wraps(command)
    def collect(*args: Any, **kwargs: Any) -> R:
        flags = ServerTlsFlags(**{name: kwargs.pop(name) for name in fields})
        return command(*args, tls=flags, **kwargs)

    wrapped: Callable[..., R] = collect
    for flag in reversed(_SERVER_FLAGS):
        wrapped = flag(wrapped)
    return wrapped


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
