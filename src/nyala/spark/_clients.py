"""One Nyala client per master set per Python worker process, shared by the tasks it runs.

Spark reuses its Python workers across tasks (``spark.python.worker.reuse``, on by default),
so a client cached here saves each task the connection to the masters and the table and
location lookups (kudu-spark keeps one client per JVM for the same reason: many clients
overload the master).  The cache is keyed by process id too, so a forked child never uses
its parent's connections.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

from nyala.client import Client, ClientOptions, connect

from .options import TlsSettings

__all__ = ["client_for"]

_lock = threading.Lock()
_clients: dict[tuple[int, tuple[str, ...], int | None, TlsSettings | None], Client] = {}


def client_for(
    master: str | Sequence[str],
    operation_timeout_ms: int | None = None,
    tls: TlsSettings | None = None,
    *,
    lazy: bool = False,
) -> Client:
    """The shared client of this process for ``master`` (comma-separated or a list), over TLS with ``tls``.

    ``lazy``: a new client does not look for the leader master until it needs one (a task
    reading scan tokens never does); an existing client is returned either way.
    """
    addresses = tuple(a.strip() for a in (master.split(",") if isinstance(master, str) else master) if a.strip())
    key = (os.getpid(), addresses, operation_timeout_ms, tls)
    with _lock:
        client = _clients.get(key)
        if client is None:
            options = ClientOptions() if operation_timeout_ms is None else _options(operation_timeout_ms)
            client = connect(
                list(addresses),
                options=options,
                timeout_s=options.operation_timeout_ms / 1000,
                ssl_context=tls.ssl_context() if tls is not None else None,
                lazy=lazy,
            )
            _clients[key] = client
        return client


def _options(operation_timeout_ms: int) -> ClientOptions:
    return ClientOptions(operation_timeout_ms=operation_timeout_ms, admin_operation_timeout_ms=operation_timeout_ms)
