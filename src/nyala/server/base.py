"""The parts every Nyala server process shares: identity, RPC, the Raft transport, shutdown."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from nyala._version import __version__
from nyala.common.config import setting
from nyala.common.hostport import HostPort, parse_address
from nyala.consensus.core import RaftOptions
from nyala.consensus.runtime import RaftTransport
from nyala.proto import common_pb2
from nyala.rpc import Messenger, RpcOptions, RpcServer
from nyala.rpc.netfault import active_faults
from nyala.server.fs import DataDir

__all__ = ["ServerBase", "ServerOptions"]

log = logging.getLogger("nyala.server")


@dataclass(frozen=True)
class ServerOptions:
    """Settings common to masters and tablet servers (Kudu's flag names, in Python style)."""

    fs_data_dir: str = setting("./nyala-data/server", "Directory holding all of this server's data.")
    rpc_bind_address: str = setting(
        "127.0.0.1:0", "Address to listen on for RPC; port 0 picks a free port (reported in server.json)."
    )
    raft: RaftOptions = field(default_factory=RaftOptions)
    rpc: RpcOptions = field(default_factory=RpcOptions)
    apply_threads: int = setting(
        2, "Threads applying committed entries to state machines (tablet stores block while they write).", "advanced"
    )


class ServerBase:
    """Owns the data directory, the RPC server, the messenger, the Raft transport and the apply pool.

    A subclass registers its services on ``self.rpc`` in ``__init__`` (after calling this one)
    and does its own work in ``_start``/``_stop``; ``run()`` serves until SIGTERM or SIGINT.
    """

    kind = "server"

    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        self.data_dir = DataDir(Path(options.fs_data_dir))
        self.uuid = self.data_dir.uuid
        self.instance = common_pb2.NodeInstancePB(permanent_uuid=self.uuid, instance_seqno=time.time_ns() // 1000)
        self.rpc = RpcServer(options.rpc)
        # None unless a test kit started this process to cut its network (nyala.rpc.netfault).
        self.messenger = Messenger(options.rpc, faults=active_faults())
        self.apply_pool = ThreadPoolExecutor(options.apply_threads, thread_name_prefix=f"{self.kind}-apply")
        bind = parse_address(options.rpc_bind_address)
        self.transport = RaftTransport(
            self.uuid, bind, self.messenger, self.rpc, tick_interval_ms=options.raft.raft_tick_interval_ms
        )
        self.address = bind
        self.start_time_us = time.time_ns() // 1000
        self._stopped = asyncio.Event()

    def registration(self) -> common_pb2.ServerRegistrationPB:
        return common_pb2.ServerRegistrationPB(
            rpc_addresses=[common_pb2.HostPortPB(host=self.address.host, port=self.address.port)],
            software_version=__version__,
            start_time_us=self.start_time_us,
        )

    async def start(self) -> HostPort:
        """Listen, start the subclass's work, then announce the server in server.json."""
        self.address = await self.rpc.start(self.options.rpc_bind_address)
        self.transport.address = self.address
        self.transport.start()
        await self._start()
        self.data_dir.write_status(self.kind, str(self.address))
        log.info("%s %s listening on %s", self.kind, self.uuid, self.address)
        return self.address

    async def stop(self) -> None:
        """Stop serving and release everything; safe to call twice."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        await self._stop()
        await self.transport.close()
        await self.rpc.stop()
        await self.messenger.close()
        self.apply_pool.shutdown(wait=True)
        self.data_dir.close()
        log.info("%s %s stopped", self.kind, self.uuid)

    async def run(self) -> None:
        """Start, then serve until SIGTERM or SIGINT, then stop cleanly."""
        loop = asyncio.get_running_loop()
        stop_requested = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop_requested.set)
        await self.start()
        try:
            await stop_requested.wait()
        finally:
            await self.stop()

    async def _start(self) -> None:
        """Subclass hook: open state, start background tasks."""

    async def _stop(self) -> None:
        """Subclass hook: stop background tasks, close state (before RPC goes away)."""
