"""``nyala remote-replica list|delete|unsafe-change-config TSERVER_ADDRESS ...``: one tablet
server's replicas, addressed directly rather than through the masters (Kudu's ``kudu
remote_replica``).

``unsafe-change-config`` is the recovery of last resort after a tablet lost a majority of its
replicas for good: run it on the most up-to-date survivor (``nyala tablet
find-most-up-to-date`` ranks them) with the uuids of the replicas to keep, that survivor
among them.  ``delete`` tombstones one replica through the server's DeleteTablet.
docs/recovery.md walks through both.
"""

from __future__ import annotations

import time

import click

from nyala.common.hostport import parse_address
from nyala.rpc import Messenger
from nyala.rpc.loop import run
from nyala.tools._format import (
    UnderscoreGroup,
    columns_option,
    emit_json,
    emit_rows,
    format_option,
    handle_errors,
    timeout_option,
)
from nyala.tools.replica_ops import DeletedReplica, delete_remote_replica, list_remote_replicas, unsafe_change_config
from nyala.tserver.options import TSERVER_DEFAULT_PORT

__all__ = ["remote_replica"]

LIST_COLUMNS = (
    "tablet_id",
    "table",
    "state",
    "role",
    "term",
    "leader",
    "last_index",
    "commit_index",
    "applied_index",
    "config",
    "pending_config",
    "error",
)


@click.group("remote-replica", cls=UnderscoreGroup)
def remote_replica() -> None:
    """Inspect and repair the replicas of one tablet server."""


def _address(text: str) -> str:
    return str(parse_address(text, TSERVER_DEFAULT_PORT))


@remote_replica.command("list")
@click.argument("tserver_address")
@columns_option(LIST_COLUMNS, ("tablet_id", "table", "state", "role", "term", "last_index", "commit_index"))
@format_option
@timeout_option
@handle_errors
def list_replicas(tserver_address: str, columns: list[str], output_format: str, timeout_s: float) -> None:
    """List the replicas on the tablet server at TSERVER_ADDRESS with state, role, term and indexes."""
    address = _address(tserver_address)

    async def fetch() -> list[dict[str, object]]:
        messenger = Messenger()
        try:
            return await list_remote_replicas(messenger, address, timeout_s)
        finally:
            await messenger.close()

    rows = run(fetch())
    emit_rows(rows, columns, output_format, title=f"{len(rows)} replicas on {address}")


@remote_replica.command("delete")
@click.argument("tserver_address")
@click.argument("tablet_id")
@click.option("--reason", default="", help="Why, kept in the tombstone (default: this command and the time).")
@format_option
@timeout_option
@handle_errors
def delete_command(tserver_address: str, tablet_id: str, reason: str, output_format: str, timeout_s: float) -> None:
    """Tombstone the replica of TABLET_ID on the tablet server at TSERVER_ADDRESS.

    Its rows and log are deleted; its metadata and consensus metadata stay, so the server
    keeps reporting it (as TOMBSTONED) and remembers its votes.  A replica that is still a
    member of its tablet's config stays counted by the tablet until it is removed from it
    (``nyala tablet change-config remove-replica``); the command warns when the replica's own
    config lists it.
    """
    address = _address(tserver_address)
    reason = reason or f"deleted with nyala remote-replica delete at {time.strftime('%Y-%m-%d %H:%M:%S')}"

    async def delete() -> DeletedReplica:
        messenger = Messenger()
        try:
            return await delete_remote_replica(messenger, address, tablet_id, reason, timeout_s)
        finally:
            await messenger.close()

    done = run(delete())
    if output_format == "json":
        emit_json(
            {
                "tablet_id": tablet_id,
                "server_uuid": done.server_uuid,
                "already_tombstoned": done.already_tombstoned,
                "in_own_config": done.in_own_config,
            }
        )
        return
    if done.already_tombstoned:
        click.echo(f"tablet {tablet_id} at {address} ({done.server_uuid}) was already tombstoned")
        return
    click.echo(f"tombstoned the replica of tablet {tablet_id} at {address} ({done.server_uuid}): rows and log deleted")
    if done.in_own_config:
        # The replica's own view: a replica removed from its tablet may never have learned it.
        click.echo(
            f"warning: the replica's own Raft config still lists {done.server_uuid}; if the tablet's config does "
            "too (nyala cluster ksck), remove it with nyala tablet change-config remove-replica, or the tablet "
            "counts a replica that has no data",
            err=True,
        )


@remote_replica.command("unsafe-change-config")
@click.argument("tserver_address")
@click.argument("tablet_id")
@click.argument("peer_uuids", nargs=-1, required=True)
@format_option
@timeout_option
@handle_errors
def unsafe_change_config_command(
    tserver_address: str, tablet_id: str, peer_uuids: tuple[str, ...], output_format: str, timeout_s: float
) -> None:
    """Force the replica of TABLET_ID at TSERVER_ADDRESS to a config of PEER_UUIDS only.

    For a tablet that lost a majority of its replicas for good.  The uuids must be members
    of the replica's committed config, the replica's own server among them.  The replica
    appends the forced config at a new term and campaigns; entries that only the dropped
    replicas held are lost.
    """
    address = _address(tserver_address)

    async def force() -> tuple[int, int]:
        messenger = Messenger()
        try:
            return await unsafe_change_config(messenger, address, tablet_id, peer_uuids, timeout_s)
        finally:
            await messenger.close()

    term, index = run(force())
    if output_format == "json":
        emit_json({"tablet_id": tablet_id, "config": list(peer_uuids), "term": term, "index": index})
        return
    click.echo(
        f"tablet {tablet_id} at {address}: forced the config to {', '.join(peer_uuids)} "
        f"(entry {index}, term {term}); the replica is campaigning"
    )
