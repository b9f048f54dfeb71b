"""``nyala master list`` and ``nyala tserver list``: the cluster's servers as the leader master sees them.

The two commands are attached to the ``master`` and ``tserver`` groups in ``nyala.tools.cli``.
"""

from __future__ import annotations

import click

from nyala.tools._format import (
    columns_option,
    connect_cli,
    emit_rows,
    format_option,
    handle_errors,
    masters_argument,
    timeout_option,
)

__all__ = ["master_list", "tserver_list"]

MASTER_COLUMNS = ("uuid", "rpc_addresses", "role", "member_type", "term", "error")
TSERVER_COLUMNS = (
    "uuid",
    "rpc_addresses",
    "live",
    "millis_since_heartbeat",
    "num_live_replicas",
    "location",
    "software_version",
    "start_time_us",
    "state",
    "maintenance",
    "heartbeat",
    "num_replicas",
)
TSERVER_DEFAULT_COLUMNS = ("uuid", "rpc_addresses", "location", "state", "heartbeat", "num_replicas")


@click.command("list")
@masters_argument
@columns_option(MASTER_COLUMNS, ("uuid", "rpc_addresses", "role", "member_type", "term"))
@format_option
@timeout_option
@handle_errors
def master_list(master_addresses: str, columns: list[str], output_format: str, timeout_s: float) -> None:
    """List the masters with their roles, member types and terms (an unreachable one shows its error)."""
    with connect_cli(master_addresses, timeout_s) as client:
        masters = client.list_masters(timeout_s=timeout_s)
    emit_rows([m.as_dict() for m in masters], columns, output_format, title=f"{len(masters)} masters")


@click.command("list")
@masters_argument
@columns_option(TSERVER_COLUMNS, TSERVER_DEFAULT_COLUMNS)
@format_option
@timeout_option
@handle_errors
def tserver_list(master_addresses: str, columns: list[str], output_format: str, timeout_s: float) -> None:
    """List the registered tablet servers: live, dead or in maintenance, and their replicas.

    num_replicas counts the replicas the catalog places on each server (true for dead servers);
    num_live_replicas is what the server last reported itself.
    """
    with connect_cli(master_addresses, timeout_s) as client:
        servers = client.list_tablet_servers(timeout_s=timeout_s)
    rows = [{**s.as_dict(), "heartbeat": f"{s.millis_since_heartbeat / 1000:.1f}s ago"} for s in servers]
    emit_rows(rows, columns, output_format, title=f"{len(servers)} tablet servers")
