"""What masters and tablet servers share as processes (Kudu's ``server/``).

:class:`ServerBase` opens and locks the data directory (:mod:`nyala.server.fs`), keeps the
server's permanent uuid, runs the RPC server and the messenger, owns the Raft transport that
all of the process's replicas share and the thread pool that applies their committed
entries, runs the web server (:mod:`nyala.web`) with the server's own metrics registry,
announces the listening address in ``server.json``, and turns SIGTERM into a clean
shutdown.  ``nyala.master`` and ``nyala.tserver`` subclass it and never import each other.
"""

from nyala.server.base import MASTER_WEB_PORT, TSERVER_WEB_PORT, ServerBase, ServerOptions
from nyala.server.fs import DataDir, OfflineDataDir, ServerStatus

__all__ = [
    "MASTER_WEB_PORT",
    "TSERVER_WEB_PORT",
    "DataDir",
    "OfflineDataDir",
    "ServerBase",
    "ServerOptions",
    "ServerStatus",
]
