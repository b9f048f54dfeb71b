"""``nyala master``: run a master."""

from __future__ import annotations

import logging
import sys

import click

from nyala.catalog import CatalogOptions
from nyala.consensus.core import RaftOptions
from nyala.errors import NyalaError
from nyala.master import Master, MasterOptions
from nyala.rpc.loop import run
from nyala.rpc.netfault import install_from_environment
from nyala.server import MASTER_WEB_PORT, ServerOptions
from nyala.server.lifeline import hold_lifeline
from nyala.tools._tls_flags import ServerTlsFlags, server_tls_options

__all__ = ["master"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@click.group()
def master() -> None:
    """Run and inspect masters."""


@master.command()
@click.option(
    "--fs-data-dir", required=True, type=click.Path(file_okay=False), help="Directory for this master's data."
)
@click.option("--rpc-bind-address", default="127.0.0.1:7051", show_default=True, help="host:port to serve RPC on.")
@click.option(
    "--master-addresses",
    default="",
    help="Comma-separated host:port of every master, this one included (default: this master alone).",
)
@click.option(
    "--master-auto-join/--no-master-auto-join",
    default=False,
    show_default=True,
    help="When the other masters run a cluster that does not count this master yet, ask the leader to add "
    "it (Kudu's master_auto_join_cluster); otherwise wait for `nyala master add`.",
)
@click.option(
    "--heartbeat-interval-ms",
    default=1000,
    show_default=True,
    type=click.IntRange(min=1),
    help="How often the leader retries tablet creations, deletions and alterations.",
)
@click.option("--raft-tick-interval-ms", default=100, show_default=True, type=click.IntRange(min=1))
@click.option("--raft-heartbeat-interval-ms", default=500, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--tserver-unresponsive-timeout-ms",
    default=60_000,
    show_default=True,
    type=click.IntRange(min=1),
    help="A tablet server silent for this long is dead: no new replicas go to it.",
)
@click.option(
    "--master-add-server-when-underreplicated/--no-master-add-server-when-underreplicated",
    default=True,
    show_default=True,
    help="Re-replicate: add a replica to a tablet whose leader reports it under-replicated (Kudu's flag).",
)
@click.option(
    "--catalog-manager-evict-excess-replicas/--no-catalog-manager-evict-excess-replicas",
    default=True,
    show_default=True,
    help="Remove failed, replaced and excess replicas from tablet configs (Kudu's flag).",
)
@click.option(
    "--master-tombstone-evicted-tablet-replicas/--no-master-tombstone-evicted-tablet-replicas",
    default=True,
    show_default=True,
    help="Tombstone replicas that left their tablet's committed config (Kudu's flag).",
)
@click.option(
    "--auto-rebalancing-enabled/--no-auto-rebalancing-enabled",
    default=True,
    show_default=True,
    help="The leader master restores the placement policy and balances replicas by itself, every interval "
    "(paused while `nyala cluster rebalance` runs; servers in maintenance mode keep their replicas).",
)
@click.option(
    "--auto-rebalancing-interval-sec",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Time between two rounds of the auto rebalancer.",
)
@click.option(
    "--auto-rebalancing-max-moves-per-server",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Most moves a round starts from one tablet server, and to one.",
)
@click.option(
    "--auto-rebalancing-load-imbalance-threshold",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Smallest per-server load difference between two locations (per table or range) that is balanced.",
)
@click.option(
    "--location-mapping-cmd",
    default="",
    help="Executable run with tablet-server and client hosts as arguments, printing one location "
    "(like /dc1/rack1) per host, one per line; empty: no locations.",
)
@click.option(
    "--location-mapping-timeout-ms",
    default=10_000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Longest run of the location mapping command before it is killed.",
)
@click.option("--default-num-replicas", default=3, show_default=True, type=int)
@click.option(
    "--allow-unsafe-replication-factor/--no-allow-unsafe-replication-factor",
    default=False,
    show_default=True,
    help="Allow even replication factors (2, 4): RF 4 split evenly over two locations survives the loss of "
    "one location without losing data, though not without losing availability.",
)
@click.option("--max-create-tablets-per-ts", default=60, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--webserver-port",
    default=MASTER_WEB_PORT,
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
    master_auto_join: bool,
    heartbeat_interval_ms: int,
    raft_tick_interval_ms: int,
    raft_heartbeat_interval_ms: int,
    tserver_unresponsive_timeout_ms: int,
    master_add_server_when_underreplicated: bool,
    catalog_manager_evict_excess_replicas: bool,
    master_tombstone_evicted_tablet_replicas: bool,
    auto_rebalancing_enabled: bool,
    auto_rebalancing_interval_sec: float,
    auto_rebalancing_max_moves_per_server: int,
    auto_rebalancing_load_imbalance_threshold: float,
    location_mapping_cmd: str,
    location_mapping_timeout_ms: int,
    default_num_replicas: int,
    allow_unsafe_replication_factor: bool,
    max_create_tablets_per_ts: int,
    webserver_port: int,
    webserver_interface: str,
    metrics_enabled: bool,
    log_level: str,
    tls: ServerTlsFlags,
) -> None:
    """Run a master in the foreground until SIGTERM or SIGINT; logs go to stderr."""
    hold_lifeline()  # a test kit's master dies with the test process
    logging.basicConfig(level=log_level.upper(), stream=sys.stderr, format=LOG_FORMAT)
    install_from_environment()  # only a test kit sets it: network cuts between its servers
    try:
        options = MasterOptions(
            server=ServerOptions(
                fs_data_dir=fs_data_dir,
                rpc_bind_address=rpc_bind_address,
                webserver_port=webserver_port,
                webserver_interface=webserver_interface,
                metrics_enabled=metrics_enabled,
                **tls.settings(),
                raft=RaftOptions(
                    raft_tick_interval_ms=raft_tick_interval_ms, raft_heartbeat_interval_ms=raft_heartbeat_interval_ms
                ),
            ),
            catalog=CatalogOptions(
                default_num_replicas=default_num_replicas,
                max_create_tablets_per_ts=max_create_tablets_per_ts,
                allow_unsafe_replication_factor=allow_unsafe_replication_factor,
            ),
            master_addresses=master_addresses,
            master_auto_join=master_auto_join,
            heartbeat_interval_ms=heartbeat_interval_ms,
            tserver_unresponsive_timeout_ms=tserver_unresponsive_timeout_ms,
            master_add_server_when_underreplicated=master_add_server_when_underreplicated,
            catalog_manager_evict_excess_replicas=catalog_manager_evict_excess_replicas,
            master_tombstone_evicted_tablet_replicas=master_tombstone_evicted_tablet_replicas,
            auto_rebalancing_enabled=auto_rebalancing_enabled,
            auto_rebalancing_interval_sec=auto_rebalancing_interval_sec,
            auto_rebalancing_max_moves_per_server=auto_rebalancing_max_moves_per_server,
            auto_rebalancing_load_imbalance_threshold=auto_rebalancing_load_imbalance_threshold,
            location_mapping_cmd=location_mapping_cmd,
            location_mapping_timeout_ms=location_mapping_timeout_ms,
        )
    except NyalaError as e:
        raise click.UsageError(str(e)) from e

    async def serve() -> None:
        await Master(options).run()

    try:
        run(serve())
    except NyalaError as e:
        raise click.ClickException(f"master failed: {type(e).__name__}: {e}") from e
