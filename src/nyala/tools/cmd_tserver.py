"""``nyala tserver``: run a tablet server."""

from __future__ import annotations

import logging

import click

from nyala.common.hostport import parse_address_list
from nyala.consensus.core import RaftOptions
from nyala.errors import NyalaError
from nyala.rpc.loop import run
from nyala.server.lifeline import hold_lifeline
from nyala.storage import StorageOptions
from nyala.tserver import TabletServer, TabletServerOptions
from nyala.tserver.options import MASTER_DEFAULT_PORT, TSERVER_DEFAULT_PORT

__all__ = ["tserver"]


@click.group()
def tserver() -> None:
    """Run tablet servers."""


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
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
def start(
    fs_data_dir: str,
    rpc_bind_address: str,
    master_addresses: str,
    heartbeat_interval_ms: int,
    raft_tick_interval_ms: int,
    raft_heartbeat_interval_ms: int,
    scanner_ttl_ms: int,
    storage_threads: int,
    log_level: str,
) -> None:
    """Run a tablet server in the foreground until SIGTERM or SIGINT."""
    hold_lifeline()  # a test kit's tablet server dies with the test process
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        options = TabletServerOptions(
            fs_data_dir=fs_data_dir,
            rpc_bind_address=rpc_bind_address,
            master_addresses=tuple(str(a) for a in parse_address_list(master_addresses, MASTER_DEFAULT_PORT)),
            heartbeat_interval_ms=heartbeat_interval_ms,
            scanner_ttl_ms=scanner_ttl_ms,
            storage=StorageOptions(storage_threads=storage_threads),
            raft=RaftOptions(
                raft_tick_interval_ms=raft_tick_interval_ms, raft_heartbeat_interval_ms=raft_heartbeat_interval_ms
            ),
        )
        run(_serve(options))
    except NyalaError as e:
        raise click.ClickException(f"{type(e).__name__}: {e}") from e


async def _serve(options: TabletServerOptions) -> None:
    await TabletServer(options).run()
