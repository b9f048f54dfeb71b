"""``nyala remote-replica list|delete|unsafe-change-config TSERVER_ADDRESS ...`` and ``nyala
remote-replica copy TABLET_ID SOURCE DEST``: tablet servers' replicas, addressed directly
rather than through the masters (Kudu's ``kudu remote_replica``).

``unsafe-change-config`` is the recovery of last resort after a tablet lost a majority of its
replicas for good: run it on the most up-to-date survivor (``nyala tablet
find-most-up-to-date`` ranks them) with the uuids of the replicas to keep, that survivor
among them.  ``delete`` tombstones one replica through the server's DeleteTablet.
docs/recovery.md walks through both.  ``copy`` has one server copy a replica from another
(StartTabletCopy, as a leader sends it) and waits until the copy runs there.
"""

from __future__ import annotations

import time
from collections.abc import Callable

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
    progress_of,
    timeout_option,
)
from nyala.tools._tls_flags import cli_ssl_context
from nyala.tools.replica_ops import (
    CopiedReplica,
    DeletedReplica,
    copy_remote_replica,
    delete_remote_replica,
    list_remote_replicas,
    unsafe_change_config,
)
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
        messenger = Messenger(ssl_context=cli_ssl_context())
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
        messenger = Messenger(ssl_context=cli_ssl_context())
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
        messenger = Messenger(ssl_context=cli_ssl_context())
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


@remote_replica.command("copy")
@click.argument("tablet_id")
@click.argument("source_address")
@click.argument("dest_address")
@click.option(
    "--force-copy",
    "--force_copy",
    "force",
    is_flag=True,
    help="Replace a live replica on the destination (it is tombstoned, then copied).  Without it, a "
    "destination that holds a live replica of the tablet is refused.",
)
@click.option(
    "--timeout-sec",
    "timeout_s",
    type=click.FloatRange(min=1),
    default=600.0,
    show_default=True,
    help="How long the whole copy may take, until the destination runs the replica.",
)
@format_option
@handle_errors
def copy_command(
    tablet_id: str, source_address: str, dest_address: str, force: bool, timeout_s: float, output_format: str
) -> None:
    """Copy the replica of TABLET_ID from the tablet server at SOURCE_ADDRESS to the one at DEST_ADDRESS.

    The destination fetches a consistent copy (rows, log tail, consensus metadata) as for a
    leader's tablet copy, and the command waits until it runs the replica, or reports the
    destination's error.  Name an up-to-date replica as the source (``nyala tablet
    find-most-up-to-date``).  A destination outside the tablet's Raft config runs the copy
    as a non-member until it is added (``nyala tablet change-config add-replica``), when it
    catches up by replication.  A member of the config is copied only from the leader, and
    its live replica is never replaced: remove it from the config first.
    """
    source = parse_address(source_address, TSERVER_DEFAULT_PORT)
    dest = parse_address(dest_address, TSERVER_DEFAULT_PORT)

    async def copy(update: Callable[[int, int], None]) -> CopiedReplica:
        messenger = Messenger(ssl_context=cli_ssl_context())
        try:
            return await copy_remote_replica(
                messenger, tablet_id, source, dest, force=force, timeout_s=timeout_s, progress=update
            )
        finally:
            await messenger.close()

    with progress_of(f"copying {tablet_id} to {dest}") as update:
        done = run(copy(update))
    if output_format == "json":
        emit_json(
            {
                "tablet_id": tablet_id,
                "source_uuid": done.source.uuid,
                "dest_uuid": done.dest.uuid,
                "bytes": done.total_bytes,
                "seconds": round(done.seconds, 3),
                "replaced_live_replica": done.replaced_live,
                "state": "RUNNING",
                "applied_index": done.applied_index,
                "num_rows": done.num_rows,
                "in_config": done.member,
            }
        )
        return
    replaced = " (its live replica was replaced)" if done.replaced_live else ""
    click.echo(
        f"copied tablet {tablet_id} from {source} ({done.source.uuid}) to {dest} ({done.dest.uuid}){replaced}: "
        f"{done.total_bytes} bytes in {done.seconds:.1f} s; the replica is RUNNING, applied index "
        f"{done.applied_index}, {done.num_rows} rows"
    )
    if not done.member:
        click.echo(
            f"note: {done.dest.uuid} is not a member of the tablet's Raft config; add it with nyala tablet "
            "change-config add-replica (it then catches up by replication)",
            err=True,
        )
