"""``nyala tserver``: run a tablet server (the group's admin commands come from their own modules)."""

from __future__ import annotations

import logging

import click

from nyala.common.hostport import parse_address_list
from nyala.consensus.core import RaftOptions
from nyala.errors import NyalaError
from nyala.rpc.loop import run
from nyala.rpc.netfault import install_from_environment
from nyala.server import TSERVER_WEB_PORT
from nyala.server.lifeline import hold_lifeline
from nyala.storage import StorageOptions
from nyala.storage.options import FLUSH_THRESHOLD_ROWS
from nyala.tools._format import UnderscoreGroup
from nyala.tools._tls_flags import ServerTlsFlags, server_tls_options
from nyala.tserver import TabletServer, TabletServerOptions
from nyala.tserver.options import MASTER_DEFAULT_PORT, TSERVER_DEFAULT_PORT
from nyala.wal import WalOptions

__all__ = ["tserver"]


@click.group(cls=UnderscoreGroup)
def tserver() -> None:
    """Run, inspect, maintain and unregister tablet servers."""


@tserver.command()
@click.option(
    "--fs-data-dir", required=True, type=click.Path(file_okay=False), help="Directory for all of this server's data."
)
@click.option(
    "--rpc-bind-address",
    default=f"127.0.0.1:{TSERVER_DEFAULT_PORT}",
    show_default=True,
    help="host:port to serve RPC on; port 0 picks a free port (written to server.json).",
)
@click.option(
    "--master-addresses",
    default=f"127.0.0.1:{MASTER_DEFAULT_PORT}",
    show_default=True,
    help="Comma-separated host:port of every master.",
)
@click.option(
    "--heartbeat-interval-ms", default=1000, show_default=True, help="Interval between heartbeats to each master."
)
@click.option("--raft-tick-interval-ms", default=100, show_default=True, help="Raft timer granularity.")
@click.option("--raft-heartbeat-interval-ms", default=500, show_default=True, help="Raft leader heartbeat interval.")
@click.option(
    "--follower-unavailable-considered-failed-sec",
    default=300.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="A leader reports a follower it has not heard from for this long as FAILED, and the master "
    "then replaces it (Kudu's flag and default).",
)
@click.option("--scanner-ttl-ms", default=60_000, show_default=True, help="Idle time after which a scanner is closed.")
@click.option(
    "--storage-threads",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="DuckDB worker threads shared by all tablets, and the threads reading scan batches; 0 means one "
    "per CPU core. Give each of several tablet servers on one machine its share of the cores.",
)
@click.option(
    "--tablet-copy-transfer-chunk-size-bytes",
    default=4 << 20,
    show_default=True,
    type=click.IntRange(min=1),
    help="Largest chunk of a tablet copy per FetchData call, served and fetched.",
)
@click.option(
    "--tablet-copy-idle-timeout-sec",
    default=600.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="A tablet copy session with no call for this long ends and releases its files and WAL anchor.",
)
@click.option(
    "--tablet-copy-throttler-bytes-per-sec",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="Bytes per second all tablet copies into this server may fetch together; 0 does not throttle.",
)
@click.option(
    "--num-tablets-to-copy-simultaneously",
    default=10,
    show_default=True,
    type=click.IntRange(min=1),
    help="Tablet copies this server runs as the destination at once.",
)
@click.option(
    "--enable-tablet-copy/--no-enable-tablet-copy",
    default=True,
    show_default=True,
    help="Leaders copy the tablet to peers that lack it or the log they need (Kudu's enable_tablet_copy).",
)
@click.option(
    "--tablet-copy-download-threads-nums-per-session",
    default=4,
    show_default=True,
    type=click.IntRange(min=1),
    help="FetchData calls each tablet copy into this server keeps in flight at once.",
)
@click.option(
    "--tablet-copy-start-interval-ms",
    default=5000,
    show_default=True,
    type=click.IntRange(min=1),
    help="A leader asks one peer to copy one tablet at most this often.",
)
@click.option(
    "--log-segment-size-bytes",
    default=8 << 20,
    show_default=True,
    type=click.IntRange(min=4096),
    help="Size at which a tablet's WAL segment is closed and the next one started.",
)
@click.option(
    "--log-max-segments-to-retain",
    default=80,
    show_default=True,
    type=click.IntRange(min=1),
    help="Closed WAL segments kept for lagging peers at most; peers further behind need a tablet copy.",
)
@click.option(
    "--log-cache-entries",
    default=20_000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Raft entries each tablet keeps in memory behind its applied index; a follower further behind "
    "needs a tablet copy.",
)
@click.option(
    "--flush-threshold-rows",
    default=FLUSH_THRESHOLD_ROWS,
    show_default=True,
    type=click.IntRange(min=0),
    help="Rows a tablet's MemRowSet holds before it is flushed to DuckDB; 0 writes every batch to DuckDB.",
)
@click.option(
    "--webserver-port",
    default=TSERVER_WEB_PORT,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port of the web server (status pages, JSON under /api, Prometheus /metrics); 0 disables it.",
)
@click.option(
    "--webserver-interface",
    default="",
    help="Address the web server listens on (default: the host of --rpc-bind-address).",
)
@click.option(
    "--metrics-enabled/--no-metrics-enabled",
    default=True,
    show_default=True,
    help="Count metrics (Prometheus /metrics); off, /metrics is empty and nothing is counted (for measuring "
    "what metrics cost).",
)
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
@server_tls_options
def start(
    fs_data_dir: str,
    rpc_bind_address: str,
    master_addresses: str,
    heartbeat_interval_ms: int,
    raft_tick_interval_ms: int,
    raft_heartbeat_interval_ms: int,
    follower_unavailable_considered_failed_sec: float,
    scanner_ttl_ms: int,
    storage_threads: int,
    tablet_copy_transfer_chunk_size_bytes: int,
    tablet_copy_idle_timeout_sec: float,
    tablet_copy_throttler_bytes_per_sec: int,
    num_tablets_to_copy_simultaneously: int,
    enable_tablet_copy: bool,
    tablet_copy_download_threads_nums_per_session: int,
    tablet_copy_start_interval_ms: int,
    log_segment_size_bytes: int,
    log_max_segments_to_retain: int,
    log_cache_entries: int,
    flush_threshold_rows: int,
    webserver_port: int,
    webserver_interface: str,
    metrics_enabled: bool,
    log_level: str,
    tls: ServerTlsFlags,
) -> None:
    """Run a tablet server in the foreground until SIGTERM or SIGINT."""
    hold_lifeline()  # a test kit's tablet server dies with the test process
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    install_from_environment()  # only a test kit sets it: network cuts between its servers
    try:
        options = TabletServerOptions(
            fs_data_dir=fs_data_dir,
            rpc_bind_address=rpc_bind_address,
            webserver_port=webserver_port,
            webserver_interface=webserver_interface,
            metrics_enabled=metrics_enabled,
            **tls.settings(),
            master_addresses=tuple(str(a) for a in parse_address_list(master_addresses, MASTER_DEFAULT_PORT)),
            heartbeat_interval_ms=heartbeat_interval_ms,
            scanner_ttl_ms=scanner_ttl_ms,
            storage=StorageOptions(storage_threads=storage_threads, flush_threshold_rows=flush_threshold_rows),
            raft=RaftOptions(
                raft_tick_interval_ms=raft_tick_interval_ms,
                raft_heartbeat_interval_ms=raft_heartbeat_interval_ms,
                follower_unavailable_considered_failed_sec=follower_unavailable_considered_failed_sec,
            ),
            wal=WalOptions(
                segment_size_bytes=log_segment_size_bytes,
                max_segments_to_retain=max(1, log_max_segments_to_retain),
            ),
            log_cache_entries=log_cache_entries,
            tablet_copy_transfer_chunk_size_bytes=tablet_copy_transfer_chunk_size_bytes,
            tablet_copy_idle_timeout_sec=tablet_copy_idle_timeout_sec,
            tablet_copy_throttler_bytes_per_sec=tablet_copy_throttler_bytes_per_sec,
            num_tablets_to_copy_simultaneously=num_tablets_to_copy_simultaneously,
            enable_tablet_copy=enable_tablet_copy,
            tablet_copy_download_threads_nums_per_session=tablet_copy_download_threads_nums_per_session,
            tablet_copy_start_interval_ms=tablet_copy_start_interval_ms,
        )
        run(_serve(options))
    except NyalaError as e:
        raise click.ClickException(f"{type(e).__name__}: {e}") from e


async def _serve(options: TabletServerOptions) -> None:
    await TabletServer(options).run()
