"""What masters and tablet servers share as processes (Kudu's ``server/``).

:class:`ServerBase` opens and locks the data directory (:mod:`nyala.server.fs`), keeps the
server's permanent uuid, runs the RPC server and the messenger, owns the Raft transport that
all of the process's replicas share and the thread pool that applies their committed
entries, announces the listening address in ``server.json``, and turns SIGTERM into a clean
shutdown.  ``nyala.master`` and ``nyala.tserver`` subclass it and never import each other.
"""

from nyala.server.base import ServerBase, ServerOptions
from nyala.server.fs import DataDir, OfflineDataDir, ServerStatus

__all__ = ["DataDir", "OfflineDataDir", "ServerBase", "ServerOptions", "ServerStatus"]
