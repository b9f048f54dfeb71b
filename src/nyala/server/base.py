"""The parts every Nyala server process shares: identity, RPC, the Raft transport, the web
server and its metrics registry, shutdown."""

from __future__ import annotations

import asyncio
import logging
import signal
import ssl
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import ProcessCollector
from prometheus_client.registry import CollectorRegistry

from nyala._version import __version__
from nyala.common.config import setting
from nyala.common.hostport import HostPort, parse_address
from nyala.consensus.core import RaftOptions
from nyala.consensus.runtime import RaftReplica, RaftTransport
from nyala.consensus.runtime.metrics import RaftMetrics
from nyala.errors import InvalidArgument
from nyala.metrics.event_loop import LoopLagMonitor
from nyala.proto import common_pb2
from nyala.rpc import Messenger, RpcOptions, RpcServer, tls
from nyala.rpc.metrics import RpcMetrics
from nyala.rpc.netfault import active_faults
from nyala.server.fs import DataDir
from nyala.web import LogBuffer, WebServer
from nyala.web.common import ServerFacts, add_common_pages
from nyala.web.view import Cell

__all__ = ["MASTER_WEB_PORT", "RPC_AUTHENTICATION", "TSERVER_WEB_PORT", "ServerBase", "ServerOptions"]

#: The command line's default web server ports (Kudu's).
MASTER_WEB_PORT = 8051
TSERVER_WEB_PORT = 8050
#: The values of ``rpc_authentication`` (Kudu's flag; its 'disabled' is a server without TLS here).
RPC_AUTHENTICATION = ("optional", "required")

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
    webserver_port: int = setting(
        0,
        "Port of the web server (status pages, JSON, Prometheus metrics); 0 disables it.  The command line "
        "defaults to 8051 for masters and 8050 for tablet servers.",
    )
    webserver_interface: str = setting(
        "", "Address the web server listens on; empty means the host of rpc_bind_address."
    )
    metrics_enabled: bool = setting(
        True,
        "Count metrics and export them on /metrics.  Off, histograms record nothing, the event-loop "
        "sampler does not run and /metrics is empty: the way to measure what metrics cost.",
        "advanced",
    )
    rpc_certificate_file: str = setting(
        "",
        "PEM certificate this server presents on RPC connections; with it, every RPC connection in and "
        "out of the server is TLS (1.2 or later) and plain TCP is refused.  Empty: no TLS.",
    )
    rpc_private_key_file: str = setting("", "PEM private key of rpc_certificate_file (required with it).")
    rpc_ca_certificate_file: str = setting(
        "",
        "PEM certificates of the CAs this server trusts: it checks other servers' certificates (and their "
        "addresses) against them, and client certificates when a client presents one.  Empty: the system CAs.",
    )
    webserver_certificate_file: str = setting(
        "",
        "PEM certificate of the web server (Kudu's webserver_certificate_file): with it the web pages, JSON "
        "and /metrics are served over HTTPS only.  Empty: HTTP.",
    )
    webserver_private_key_file: str = setting("", "PEM private key of webserver_certificate_file.")
    rpc_authentication: str = setting(
        "optional",
        "Kudu's rpc_authentication, by certificate: 'optional' checks a client certificate when a client "
        "presents one; 'required' refuses every RPC connection (clients and other servers alike) whose peer "
        "presents no certificate signed by rpc_ca_certificate_file's CAs.",
    )

    def __post_init__(self) -> None:
        if not 0 <= self.webserver_port < 65536:
            raise InvalidArgument(f"webserver_port must be 0 (disabled) to 65535, got {self.webserver_port}")
        if bool(self.rpc_certificate_file) != bool(self.rpc_private_key_file):
            raise InvalidArgument("rpc_certificate_file and rpc_private_key_file must be given together")
        if self.rpc_ca_certificate_file and not self.rpc_certificate_file:
            raise InvalidArgument("rpc_ca_certificate_file needs rpc_certificate_file (TLS is off without it)")
        if bool(self.webserver_certificate_file) != bool(self.webserver_private_key_file):
            raise InvalidArgument("webserver_certificate_file and webserver_private_key_file must be given together")
        if self.rpc_authentication not in RPC_AUTHENTICATION:
            raise InvalidArgument(
                f"rpc_authentication must be one of {', '.join(RPC_AUTHENTICATION)}, got {self.rpc_authentication!r}"
            )
        if self.rpc_authentication == "required" and not self.rpc_ca_certificate_file:
            raise InvalidArgument(
                "rpc_authentication 'required' needs rpc_ca_certificate_file (the CAs that sign client certificates)"
            )

    @property
    def tls(self) -> bool:
        """Whether this server's RPC connections are TLS."""
        return bool(self.rpc_certificate_file)

    def rpc_ssl_contexts(self) -> tuple[ssl.SSLContext | None, ssl.SSLContext | None]:
        """(server side, client side) TLS contexts of this server's RPC, or (None, None) without TLS.

        The client side presents the server's own certificate, so a peer that requires client
        certificates accepts it, and checks the peer's certificate and address against the CAs.
        """
        if not self.tls:
            return None, None
        ca = self.rpc_ca_certificate_file or None
        try:
            serving = tls.server_context(
                self.rpc_certificate_file,
                self.rpc_private_key_file,
                ca_file=ca,
                require_client_cert=self.rpc_authentication == "required",
            )
            calling = tls.client_context(ca, cert_file=self.rpc_certificate_file, key_file=self.rpc_private_key_file)
        except (OSError, ssl.SSLError) as exc:
            raise InvalidArgument(f"cannot load the RPC TLS certificate, key or CA files: {exc}") from exc
        return serving, calling

    def webserver_ssl_context(self) -> ssl.SSLContext | None:
        """The web server's HTTPS context, or None for HTTP."""
        if not self.webserver_certificate_file:
            return None
        try:
            return tls.server_context(self.webserver_certificate_file, self.webserver_private_key_file)
        except (OSError, ssl.SSLError) as exc:
            raise InvalidArgument(f"cannot load the web server's certificate or key file: {exc}") from exc


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
        # This server's own registry: several servers may share a process (tests).
        self.metrics_registry = CollectorRegistry()
        enabled = options.metrics_enabled
        if enabled:
            ProcessCollector(namespace="nyala", registry=self.metrics_registry)
        self.loop_lag = LoopLagMonitor(self.metrics_registry if enabled else None)
        serving_tls, calling_tls = options.rpc_ssl_contexts()
        self._web_tls = options.webserver_ssl_context()  # bad files fail here, before anything starts
        self.rpc = RpcServer(options.rpc, serving_tls, metrics=RpcMetrics(self.metrics_registry, enabled))
        # None unless a test kit started this process to cut its network (nyala.rpc.netfault).
        self.messenger = Messenger(options.rpc, calling_tls, faults=active_faults())
        self.rpc.metrics.watch_connections(outbound=self.messenger.open_connections)
        self.apply_pool = ThreadPoolExecutor(options.apply_threads, thread_name_prefix=f"{self.kind}-apply")
        bind = parse_address(options.rpc_bind_address)
        self.transport = RaftTransport(
            self.uuid,
            bind,
            self.messenger,
            self.rpc,
            tick_interval_ms=options.raft.raft_tick_interval_ms,
            metrics=RaftMetrics(self.metrics_registry, enabled),
        )
        self.transport.metrics.watch(self.replicas)
        self.address = bind
        self.start_time_us = time.time_ns() // 1000
        self._stopped = asyncio.Event()
        self.logs = LogBuffer()
        self.web: WebServer | None = WebServer(f"Nyala {self.kind}") if options.webserver_port else None
        #: Where the web server listens once started (None while disabled or not started).
        self.http_address: HostPort | None = None

    def registration(self) -> common_pb2.ServerRegistrationPB:
        return common_pb2.ServerRegistrationPB(
            rpc_addresses=[common_pb2.HostPortPB(host=self.address.host, port=self.address.port)],
            software_version=__version__,
            start_time_us=self.start_time_us,
        )

    def replicas(self) -> list[RaftReplica]:
        """The Raft replicas this process runs now (tablets, or the master's catalog)."""
        return [e for e in self.transport.registered() if isinstance(e, RaftReplica)]

    async def start(self) -> HostPort:
        """Listen (RPC, then HTTP), start the subclass's work, then announce the server in server.json.

        The web server starts before the subclass's work, so that its pages show a tablet
        server's tablets while they bootstrap.
        """
        self.logs.attach()
        self.address = await self.rpc.start(self.options.rpc_bind_address)
        self.transport.address = self.address
        self.transport.start()
        if self.options.metrics_enabled:
            self.loop_lag.start()
        if self.web is not None:
            await self._start_web(self.web)
        await self._start()
        http = str(self.http_address) if self.http_address is not None else ""
        self.data_dir.write_status(self.kind, str(self.address), http)
        web_url = f", {'https' if self._web_tls is not None else 'http'}://{http}" if http else ""
        log.info("%s %s listening on %s%s", self.kind, self.uuid, self.address, web_url)
        return self.address

    async def _start_web(self, web: WebServer) -> None:
        facts = ServerFacts(
            kind=self.kind,
            uuid=self.uuid,
            version=__version__,
            started_s=self.start_time_us / 1e6,
            status=self._status_fields,
            not_ready=self.not_ready,
            registry=self.metrics_registry,
            rpc=self.rpc,
            logs=self.logs,
        )
        add_common_pages(web, facts)
        self._add_pages(web)
        host = self.options.webserver_interface or self.address.host
        self.http_address = await web.start(host, self.options.webserver_port, self._web_tls)

    def _status_fields(self) -> dict[str, Cell]:
        fields: dict[str, Cell] = {
            "rpc_address": str(self.address),
            "http_address": "" if self.http_address is None else str(self.http_address),
        }
        fields.update(self.status_fields())
        return fields

    async def stop(self) -> None:
        """Stop serving and release everything; safe to call twice."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.loop_lag.stop()
        if self.web is not None:
            await self.web.stop()
        await self._stop()
        await self.transport.close()
        await self.rpc.stop()
        await self.messenger.close()
        self.apply_pool.shutdown(wait=True)
        self.data_dir.close()
        log.info("%s %s stopped", self.kind, self.uuid)
        self.logs.detach()

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

    def _add_pages(self, web: WebServer) -> None:
        """Subclass hook: add the server's own pages (called once, before the web server listens)."""

    def status_fields(self) -> dict[str, Cell]:
        """Subclass hook: role, location and the like, for /status and the home page."""
        return {}

    def not_ready(self) -> list[str]:
        """Subclass hook: why the server cannot serve yet (empty when it can), for /healthz."""
        return []
