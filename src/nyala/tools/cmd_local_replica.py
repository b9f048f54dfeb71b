"""``nyala local-replica``: inspect and repair the replicas of a STOPPED tablet server (Kudu's ``kudu local_replica``).

Every command works on the server's data directory directly and first takes its lock
(:class:`nyala.server.fs.OfflineDataDir`): it refuses a directory a running server holds, and
no server can start on the directory while the command runs.  The layout is the tablet
server's (:mod:`nyala.tserver.manager`)::

    tablets/<tablet_id>/tablet_meta.json   table, partition, schema, data state
    tablets/<tablet_id>/cmeta              term, vote and committed Raft config
    tablets/<tablet_id>/wal/               the replica's write-ahead log
    stores/<tablet_id>.duckdb              the replica's rows

Changes are atomic and durable (``nyala.files.write_atomically``).  Like Kudu, a command that
rewrites the consensus metadata first keeps a durable copy of it as
``cmeta.pre_rewrite.<microseconds>`` beside it.

- ``list``: every replica with its table, data state, term and committed config.
- ``delete``: tombstones a replica, as the tablet server does: the metadata says TOMBSTONED
  (written first, so an interrupted delete is finished when the server starts), then the rows
  and the log are deleted; the metadata and cmeta stay, so the replica is still known and
  reported.  ``--clean-unsafe`` removes every trace, cmeta included.
- ``cmeta print-replica-uuids``, ``cmeta rewrite-raft-config`` (replace the committed config's
  members with voters, marked ``unsafe_config_change``) and ``cmeta set-term`` (only raises it,
  and clears the vote, which belonged to the old term).
- ``copy-from-remote``: copies a replica from a running tablet server into the directory
  (Kudu's ``copy_from_remote``), with the code a tablet server runs as a copy's destination:
  :class:`~nyala.tserver.tablet_copy_client.TabletCopyClient` begins the session, checks it and
  downloads into ``tablets/<id>.copy-tmp/``; :mod:`nyala.tserver.manager`'s install functions
  write the metadata COPYING, put the files in place and flip it to READY.  The server
  bootstraps the replica when it starts.  Only a tombstone (or nothing) is replaced.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import click

from nyala.common.hostport import HostPort, parse_address
from nyala.consensus.core import HardState, Member, MemberType, RaftConfig
from nyala.consensus.runtime import ConsensusMetadata
from nyala.consensus.runtime.cmeta import CMETA_FILE
from nyala.errors import AlreadyPresent, InvalidArgument, NotFound, NyalaError, TimedOut
from nyala.files import copy_durably, fsync_dir
from nyala.rpc import Messenger
from nyala.rpc.loop import run
from nyala.server.fs import OfflineDataDir
from nyala.storage import StorageOptions, TabletStoreManager
from nyala.storage.manager import remove_tablet_files
from nyala.tools._format import (
    UnderscoreGroup,
    columns_option,
    emit_json,
    emit_rows,
    format_option,
    handle_errors,
    progress_of,
)
from nyala.tools._tls_flags import cli_ssl_context
from nyala.tools.replica_ops import COPY_CALLER, check_copy_source, check_member_copy
from nyala.tserver.manager import (
    STORES_DIR,
    TABLETS_DIR,
    WAL_DIR,
    install_copied_replica,
    undo_copied_replica,
    write_copying_metadata,
)
from nyala.tserver.metadata import META_FILE, TABLET_ID_PATTERN, DataState, MetadataFile, TabletMetadata
from nyala.tserver.options import TSERVER_DEFAULT_PORT, TabletServerOptions
from nyala.tserver.tablet_copy_client import (
    COPY_TMP_SUFFIX,
    CopyCounters,
    CopyRequest,
    CopySource,
    TabletCopyClient,
    Throttler,
)

__all__ = ["CopiedFromRemote", "copy_from_remote", "local_replica", "parse_peer"]

LIST_COLUMNS = (
    "tablet_id",
    "table_name",
    "table_id",
    "state",
    "schema_version",
    "term",
    "voted_for",
    "config_index",
    "unsafe_config_change",
    "peers",
    "error",
)
#: A server's permanent uuid, as the instance file holds it.
_UUID = re.compile(r"^[0-9a-f]{32}$")

P = ParamSpec("P")
R = TypeVar("R")
#: How often copy-from-remote looks at how much of the download is on disk.
_PROGRESS_S = 0.2


@click.group("local-replica", cls=UnderscoreGroup)
def local_replica() -> None:
    """Inspect and repair the tablet replicas of a stopped tablet server, in its data directory."""


@local_replica.group(cls=UnderscoreGroup)
def cmeta() -> None:
    """Read and rewrite a replica's consensus metadata (term, vote, committed Raft config)."""


def _data_dir_argument(function: Callable[P, R]) -> Callable[P, R]:
    return click.argument("data_dir", metavar="DATA_DIR", type=click.Path(path_type=Path, file_okay=False))(function)


# --- the data directory ------------------------------------------------------------------------


@contextmanager
def _locked(data_dir: Path) -> Iterator[tuple[Path, str]]:
    """The tablets directory of a stopped tablet server's data directory and the server's uuid;
    the directory stays locked until the block ends."""
    with OfflineDataDir(data_dir) as locked:
        tablets = data_dir / TABLETS_DIR
        if not tablets.is_dir():
            raise NotFound(f"{data_dir} is not a tablet server's data directory (it has no {TABLETS_DIR}/ directory)")
        yield tablets, locked.uuid


def _replica_dir(tablets: Path, tablet_id: str) -> Path:
    if not TABLET_ID_PATTERN.match(tablet_id):
        raise InvalidArgument(f"{tablet_id!r} is not a tablet id")
    directory = tablets / tablet_id
    if not directory.is_dir():
        raise NotFound(f"no replica of tablet {tablet_id} in {tablets.parent}")
    return directory


def _backup_cmeta(directory: Path) -> Path:
    """A durable copy of the replica's cmeta, kept beside it before it is rewritten."""
    backup = directory / f"{CMETA_FILE}.pre_rewrite.{time.time_ns() // 1000}"
    copy_durably(directory / CMETA_FILE, backup)
    fsync_dir(directory)
    return backup


def _peers(config: RaftConfig) -> list[str]:
    return [m.peer_id if m.is_voter else f"{m.peer_id} ({m.member_type.name})" for m in config.members]


# --- list -------------------------------------------------------------------------------------


def list_replicas(data_dir: Path) -> list[dict[str, Any]]:
    """One row per replica directory; a replica whose files do not read shows the error."""
    with _locked(data_dir) as (tablets, _):
        directories = sorted(p for p in tablets.iterdir() if p.is_dir() and TABLET_ID_PATTERN.match(p.name))
        return [_describe(directory) for directory in directories]


def _describe(directory: Path) -> dict[str, Any]:
    row: dict[str, Any] = {"tablet_id": directory.name, "state": "UNKNOWN"}
    errors = []
    try:
        meta = TabletMetadata.load(directory)
        row.update(
            table_name=meta.table_name,
            table_id=meta.table_id,
            state=meta.data_state.value,
            schema_version=meta.schema_version,
        )
    except NyalaError as exc:
        errors.append(str(exc))
    try:
        consensus = ConsensusMetadata.load(directory)
        config = consensus.committed_config
        row.update(
            term=consensus.hard_state.term,
            voted_for=consensus.hard_state.vote or None,
            config_index=config.opid_index,
            unsafe_config_change=config.unsafe_config_change,
            peers=_peers(config),
        )
    except NyalaError as exc:
        errors.append(str(exc))
    row["error"] = "; ".join(errors) or None
    return row


@local_replica.command("list")
@_data_dir_argument
@columns_option(LIST_COLUMNS, ("tablet_id", "table_name", "state", "term", "peers"))
@format_option
@handle_errors
def list_command(data_dir: Path, columns: list[str], output_format: str) -> None:
    """List the replicas in DATA_DIR: table, data state, term and committed Raft config."""
    rows = list_replicas(data_dir)
    emit_rows(rows, columns, output_format, title=f"{len(rows)} replicas in {data_dir}")


# --- delete -----------------------------------------------------------------------------------


def delete_replica(data_dir: Path, tablet_id: str, *, clean_unsafe: bool, reason: str) -> str:
    """Tombstone (or with ``clean_unsafe`` remove) a replica; returns what was done, for the operator."""
    with _locked(data_dir) as (tablets, _):
        directory = _replica_dir(tablets, tablet_id)
        store = str(data_dir / STORES_DIR / f"{tablet_id}.duckdb")
        if clean_unsafe:
            # The tablet server's order: the metadata goes first, so a directory left by an
            # interrupted removal is recognised as garbage when the server starts.
            (directory / META_FILE).unlink(missing_ok=True)
            fsync_dir(directory)
            remove_tablet_files(store)
            fsync_dir(data_dir / STORES_DIR)
            shutil.rmtree(directory)
            fsync_dir(tablets)
            return f"removed every trace of the replica of tablet {tablet_id}, consensus metadata included"
        try:
            meta = TabletMetadata.load(directory)
        except NyalaError as exc:
            raise InvalidArgument(
                f"cannot tombstone tablet {tablet_id}: {exc}; --clean-unsafe removes the replica entirely"
            ) from None
        already = meta.data_state is DataState.TOMBSTONED
        if not already:
            meta.with_state(DataState.TOMBSTONED, reason).save(directory)  # first: a crash after it finishes on start
        remove_tablet_files(store)
        fsync_dir(data_dir / STORES_DIR)
        shutil.rmtree(directory / WAL_DIR, ignore_errors=True)
        fsync_dir(directory)
    if already:
        return f"tablet {tablet_id} was already tombstoned; its rows and log are gone"
    return f"tombstoned tablet {tablet_id}: rows and log deleted, metadata and consensus metadata kept"


@local_replica.command()
@_data_dir_argument
@click.argument("tablet_id")
@click.option(
    "--clean-unsafe", "--clean_unsafe", "clean_unsafe", is_flag=True,
    help="Remove every trace of the replica, consensus metadata included, instead of tombstoning it. "
    "The server then forgets it voted in the replica's term: only for replicas that will never rejoin.",
)  # fmt: skip
@click.option("--reason", default="", help="Why, kept in the tombstone (default: this command and the time).")
@handle_errors
def delete(data_dir: Path, tablet_id: str, clean_unsafe: bool, reason: str) -> None:
    """Delete the replica of TABLET_ID in DATA_DIR: tombstone it (rows and log go; metadata and
    consensus metadata stay, so the server still reports it)."""
    reason = reason or f"deleted with nyala local-replica delete at {time.strftime('%Y-%m-%d %H:%M:%S')}"
    click.echo(delete_replica(data_dir, tablet_id, clean_unsafe=clean_unsafe, reason=reason))


# --- cmeta ------------------------------------------------------------------------------------


def _load_cmeta(directory: Path, tablet_id: str) -> ConsensusMetadata:
    try:
        return ConsensusMetadata.load(directory)
    except NotFound:
        raise NotFound(f"tablet {tablet_id} has no consensus metadata in {directory}") from None


@cmeta.command("print-replica-uuids")
@_data_dir_argument
@click.argument("tablet_id")
@format_option
@handle_errors
def print_replica_uuids(data_dir: Path, tablet_id: str, output_format: str) -> None:
    """Print the uuids of the members of the replica's committed Raft config, space-separated."""
    with _locked(data_dir) as (tablets, _):
        uuids = list(_load_cmeta(_replica_dir(tablets, tablet_id), tablet_id).committed_config.peer_ids)
    if output_format == "json":
        emit_json({"tablet_id": tablet_id, "uuids": uuids})
    else:
        click.echo(" ".join(uuids))


def parse_peer(text: str) -> str:
    """A server uuid from ``UUID`` or Kudu's ``UUID:HOST:PORT`` (the address is checked, not kept)."""
    uuid, sep, address = text.strip().partition(":")
    if not _UUID.match(uuid):
        raise InvalidArgument(f"peer {text!r}: expected UUID[:HOST:PORT] with a 32-hex-digit server uuid")
    if sep:
        parse_address(address)  # InvalidArgument naming a bad host:port
    return uuid


def rewrite_raft_config(data_dir: Path, tablet_id: str, peers: list[str]) -> tuple[RaftConfig, RaftConfig, Path, str]:
    """Replace the committed config's members with voters ``peers``; returns the old and new
    configs, the backup of the old cmeta and this server's uuid."""
    uuids = [parse_peer(p) for p in peers]
    if not uuids:
        raise InvalidArgument("give at least one peer")
    duplicates = sorted({u for u in uuids if uuids.count(u) > 1})
    if duplicates:
        raise InvalidArgument(f"peers {duplicates} are given more than once")
    with _locked(data_dir) as (tablets, own_uuid):
        directory = _replica_dir(tablets, tablet_id)
        current = _load_cmeta(directory, tablet_id)
        old = current.committed_config
        # The config keeps its opid_index, as in Kudu: log entries up to it are not replayed
        # over it; a later config change in the log still replaces it.
        new = RaftConfig(tuple(Member(u, MemberType.VOTER) for u in uuids), old.opid_index, unsafe_config_change=True)
        backup = _backup_cmeta(directory)
        replace(current, committed_config=new).save(directory)
        return old, new, backup, own_uuid


@cmeta.command("rewrite-raft-config")
@_data_dir_argument
@click.argument("tablet_id")
@click.argument("peers", nargs=-1, required=True, metavar="UUID[:HOST:PORT]...")
@handle_errors
def rewrite_raft_config_command(data_dir: Path, tablet_id: str, peers: tuple[str, ...]) -> None:
    """Replace the members of the replica's committed Raft config with these voters (unsafe).

    For recovering a tablet that lost a majority: rewrite the config of the surviving replicas
    to the survivors, then start their servers.  The config is marked unsafe_config_change.
    Raft configs name servers by uuid only (tablet servers learn addresses from the masters),
    so a HOST:PORT is checked but not kept.
    """
    old, new, backup, own_uuid = rewrite_raft_config(data_dir, tablet_id, list(peers))
    click.echo(
        f"tablet {tablet_id}: Raft config rewritten from [{' '.join(old.peer_ids)}] to [{' '.join(new.peer_ids)}]"
    )
    click.echo(f"the previous consensus metadata is kept as {backup}")
    if own_uuid not in new.peer_ids:
        click.echo(
            f"warning: this server ({own_uuid}) is not a member of the new config; its replica will not take part",
            err=True,
        )


def set_term(data_dir: Path, tablet_id: str, term: int) -> tuple[int, Path]:
    """Raise the replica's current term to ``term`` (clearing its vote); returns the old term and the backup."""
    with _locked(data_dir) as (tablets, _):
        directory = _replica_dir(tablets, tablet_id)
        current = _load_cmeta(directory, tablet_id)
        old = current.hard_state.term
        if term <= old:
            raise InvalidArgument(f"new term {term} must be higher than the current term {old} of tablet {tablet_id}")
        backup = _backup_cmeta(directory)
        # The vote belonged to the old term: a new term starts without one.
        replace(current, hard_state=HardState(term, "", current.hard_state.commit)).save(directory)
        return old, backup


@cmeta.command("set-term")
@_data_dir_argument
@click.argument("tablet_id")
@click.argument("term", type=click.IntRange(min=1))
@handle_errors
def set_term_command(data_dir: Path, tablet_id: str, term: int) -> None:
    """Raise the current Raft term of the replica to TERM (never lowers it; clears the vote)."""
    old, backup = set_term(data_dir, tablet_id, term)
    click.echo(f"tablet {tablet_id}: term raised from {old} to {term}; previous consensus metadata kept as {backup}")


# --- copy-from-remote -----------------------------------------------------------------------


@dataclass(frozen=True)
class CopiedFromRemote:
    """What ``copy-from-remote`` installed."""

    source_uuid: str
    server_uuid: str
    total_bytes: int
    seconds: float
    applied_index: int
    term: int
    config: RaftConfig
    replaced_tombstone: bool


def _replaceable(directory: Path, data_dir: Path, tablet_id: str) -> bool:
    """Whether a replica is in the way: False for none; True for a tombstone (or a copy a crash
    interrupted, which the server would undo anyway); AlreadyPresent for a live replica."""
    if not directory.exists():
        return False
    try:
        meta = TabletMetadata.load(directory)
    except NotFound:
        return False  # a creation that never finished: the server removes it too
    except NyalaError as exc:
        raise InvalidArgument(
            f"cannot read the replica of tablet {tablet_id} in {data_dir}: {exc}; remove it first "
            "(nyala local-replica delete --clean-unsafe)"
        ) from None
    if meta.data_state not in (DataState.TOMBSTONED, DataState.COPYING):
        raise AlreadyPresent(
            f"{data_dir} already has a live replica of tablet {tablet_id} ({meta.data_state.value}); tombstone it "
            "first with nyala local-replica delete, then copy"
        )
    return True


def copy_from_remote(
    data_dir: Path,
    tablet_id: str,
    source_address: HostPort,
    *,
    timeout_s: float,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> CopiedFromRemote:
    """Copy ``tablet_id`` from the running tablet server at ``source_address`` into the stopped
    tablet server's ``data_dir``, replacing nothing but a tombstone.

    The source is checked first (reachable, hosting the tablet RUNNING); a failure at any later
    point deletes what the copy wrote, so a tombstone that was there stays one and a tablet
    that was not there leaves no trace.
    """
    if not TABLET_ID_PATTERN.match(tablet_id):
        raise InvalidArgument(f"{tablet_id!r} is not a tablet id")
    with _locked(data_dir) as (tablets, own_uuid):
        directory = tablets / tablet_id
        replaced = _replaceable(directory, data_dir, tablet_id)
        return run(_copy_into(data_dir, tablets, own_uuid, tablet_id, source_address, replaced, timeout_s, progress))


async def _copy_into(
    data_dir: Path,
    tablets: Path,
    own_uuid: str,
    tablet_id: str,
    source_address: HostPort,
    replaced: bool,
    timeout_s: float,
    progress: Callable[[int, int], None],
) -> CopiedFromRemote:
    defaults = TabletServerOptions()
    messenger = Messenger(ssl_context=cli_ssl_context())
    stores = await asyncio.to_thread(TabletStoreManager, str(data_dir / STORES_DIR), StorageOptions(storage_threads=1))
    directory = tablets / tablet_id
    temporary = tablets / (tablet_id + COPY_TMP_SUFFIX)
    client = TabletCopyClient(
        messenger,
        own_uuid,
        chunk_size_bytes=defaults.tablet_copy_transfer_chunk_size_bytes,
        fetches_in_flight=defaults.tablet_copy_download_threads_nums_per_session,
        max_retries=defaults.tablet_copy_fetch_max_retries,
        throttler=Throttler(0),
        counters=CopyCounters(),
    )
    started = time.monotonic()
    source: CopySource | None = None
    metadata: MetadataFile | None = None
    ended = False
    try:
        async with asyncio.timeout(timeout_s):
            peer = await check_copy_source(messenger, source_address, tablet_id, min(timeout_s, 30.0))
            check_member_copy(tablet_id, peer, own_uuid, await asyncio.to_thread(_own_members, directory), False)
            request = CopyRequest(tablet_id, peer.uuid, source_address, COPY_CALLER, peer.term or 0, False, 0)
            source = await client.begin(request)
            await asyncio.to_thread(write_copying_metadata, stores, directory, source)
            metadata = MetadataFile(directory, source.metadata)
            watcher = asyncio.ensure_future(_watch(temporary, source.total_bytes, progress))
            try:
                downloaded = await client.download(request, source, temporary)
            finally:
                watcher.cancel()
            ended = True
            await client.end(request, source, True)
            await asyncio.to_thread(install_copied_replica, stores, metadata, source, downloaded)
            progress(source.total_bytes, source.total_bytes)
        cmeta = ConsensusMetadata.load(directory)
        return CopiedFromRemote(
            peer.uuid,
            own_uuid,
            source.total_bytes,
            time.monotonic() - started,
            source.applied_index,
            cmeta.hard_state.term,
            source.config,
            replaced,
        )
    except BaseException as exc:
        if source is not None and not ended:
            await client.end(request, source, False)
        await asyncio.to_thread(shutil.rmtree, temporary, True)
        if metadata is not None:
            await asyncio.to_thread(undo_copied_replica, stores, metadata, f"copy-from-remote failed: {exc}")
        if isinstance(exc, TimeoutError):
            raise TimedOut(
                f"the copy of tablet {tablet_id} did not finish within {timeout_s:g} s; nothing was kept"
            ) from None
        raise
    finally:
        await asyncio.to_thread(stores.close)
        await messenger.close()


def _own_members(directory: Path) -> frozenset[str]:
    """The members of the committed config a tombstone kept (none without consensus metadata)."""
    try:
        return frozenset(ConsensusMetadata.load(directory).committed_config.peer_ids)
    except NyalaError:
        return frozenset()


async def _watch(directory: Path, total: int, progress: Callable[[int, int], None]) -> None:
    """Report how much of the download is on disk (allocated blocks, since chunks land at their
    offsets in any order)."""
    while True:
        progress(min(total, await asyncio.to_thread(_allocated, directory)), total)
        await asyncio.sleep(_PROGRESS_S)


def _allocated(directory: Path) -> int:
    try:
        return sum(p.stat().st_blocks * 512 for p in directory.rglob("*") if p.is_file())
    except OSError:  # the download is being emptied or moved
        return 0


@local_replica.command("copy-from-remote")
@_data_dir_argument
@click.argument("tablet_id")
@click.argument("source_address")
@click.option(
    "--timeout-sec",
    "timeout_s",
    type=click.FloatRange(min=1),
    default=600.0,
    show_default=True,
    help="How long the whole copy may take.",
)
@format_option
@handle_errors
def copy_from_remote_command(
    data_dir: Path, tablet_id: str, source_address: str, timeout_s: float, output_format: str
) -> None:
    """Copy the replica of TABLET_ID from the running tablet server at SOURCE_ADDRESS into DATA_DIR.

    DATA_DIR is a stopped tablet server's.  The copy (rows, log tail, consensus metadata) is
    what a leader's tablet copy installs; the server bootstraps the replica when it starts.
    A live replica of the tablet there is refused: tombstone it first (``local-replica
    delete``).  Name an up-to-date replica as the source (``nyala tablet find-most-up-to-date``);
    when this server is a member of the tablet's Raft config, the source must be its leader.
    """
    address = parse_address(source_address, TSERVER_DEFAULT_PORT)
    with progress_of(f"copying {tablet_id} from {address}") as update:
        done = copy_from_remote(data_dir, tablet_id, address, timeout_s=timeout_s, progress=update)
    if output_format == "json":
        emit_json(
            {
                "tablet_id": tablet_id,
                "source_uuid": done.source_uuid,
                "server_uuid": done.server_uuid,
                "bytes": done.total_bytes,
                "seconds": round(done.seconds, 3),
                "applied_index": done.applied_index,
                "term": done.term,
                "peers": list(done.config.peer_ids),
                "replaced_tombstone": done.replaced_tombstone,
            }
        )
        return
    over = " over its tombstone" if done.replaced_tombstone else ""
    click.echo(
        f"copied tablet {tablet_id} from {address} ({done.source_uuid}) into {data_dir}{over}: "
        f"{done.total_bytes} bytes in {done.seconds:.1f} s, applied index {done.applied_index}, term {done.term}; "
        "the server bootstraps it when it starts"
    )
    if done.server_uuid not in done.config.peer_ids:
        click.echo(
            f"warning: this server ({done.server_uuid}) is not a member of the copied Raft config "
            f"[{' '.join(done.config.peer_ids)}]; its replica takes no part until it is added "
            "(nyala tablet change-config add-replica)",
            err=True,
        )
