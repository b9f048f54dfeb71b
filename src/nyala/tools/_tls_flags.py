"""The RPC TLS flags every server command shares (Kudu's names): ``--rpc-certificate-file`` and friends.

:func:`rpc_tls_options` adds the three flags to a click command; the command passes them on as
``rpc_certificate_file``, ``rpc_private_key_file`` and ``rpc_ca_certificate_file`` of
:class:`nyala.server.ServerOptions` (None, a flag not given, as ""), which checks that they go
together.  A given file must exist.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = ["rpc_tls_options"]

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
        ]
    ):
        command = flag(command)
    return command
