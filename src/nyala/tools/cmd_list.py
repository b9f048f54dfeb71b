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

MASTER_COLUMNS = ("uuid", "rpc_addresses", "role", "term", "error")
TSERVER_COLUMNS = (
    "uuid",
    "rpc_addresses",
    "live",
    "millis_since_heartbeat",
    "num_live_replicas",
    "location",
    "software_version",
    "start_time_us",
)


@click.command("list")
@masters_argument
@columns_option(MASTER_COLUMNS, ("uuid", "rpc_addresses", "role"))
@format_option
@timeout_option
@handle_errors
def master_list(master_addresses: str, columns: list[str], output_format: str, timeout_s: float) -> None:
    """List the masters with their roles (an unreachable one shows its error)."""
    with connect_cli(master_addresses, timeout_s) as client:
        masters = client.list_masters(timeout_s=timeout_s)
    emit_rows([m.as_dict() for m in masters], columns, output_format, title=f"{len(masters)} masters")


@click.command("list")
@masters_argument
@columns_option(TSERVER_COLUMNS, ("uuid", "rpc_addresses", "location", "live", "num_live_replicas"))
@format_option
@timeout_option
@handle_errors
def tserver_list(master_addresses: str, columns: list[str], output_format: str, timeout_s: float) -> None:
    """List the registered tablet servers and whether they are live."""
    with connect_cli(master_addresses, timeout_s) as client:
        servers = client.list_tablet_servers(timeout_s=timeout_s)
    emit_rows([s.as_dict() for s in servers], columns, output_format, title=f"{len(servers)} tablet servers")
