"""``nyala master unsafe-rebuild``: rebuild a lost sys catalog from the tablet servers (Kudu's ``unsafe_rebuild``).

Run it with every master stopped, against an empty master data directory: it asks every
tablet server named for its replicas' metadata (``ListTablets`` with ``need_metadata``), folds
them into one catalog write (:mod:`nyala.master.unsafe_rebuild`) and saves it in the directory.
The master started on that directory replicates it once it leads an empty catalog.  Every tablet
server must answer: one left out would lose the tablets only it holds.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import click

from nyala.common.hostport import HostPort, parse_address_list
from nyala.errors import IllegalState
from nyala.master.server import SYS_CATALOG_DIR
from nyala.master.unsafe_rebuild import REBUILD_FILE, Rebuilt, rebuild_write, save_rebuild
from nyala.proto import tserver_pb2 as tpb
from nyala.rpc import Messenger
from nyala.rpc.loop import run
from nyala.services import LIST_TABLETS
from nyala.tools._format import handle_errors, timeout_option
from nyala.tools._tls_flags import cli_ssl_context

__all__ = ["master_unsafe_rebuild"]

#: A tablet server's RPC port when an address leaves it out (Kudu's).
TSERVER_DEFAULT_PORT = 7050


@click.command("unsafe-rebuild")
@click.argument("tserver_addresses", metavar="TSERVER_ADDRESSES")
@click.option(
    "--fs-data-dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The stopped master's data directory; it must hold no sys catalog.",
)
@timeout_option
@handle_errors
def master_unsafe_rebuild(tserver_addresses: str, fs_data_dir: Path, timeout_s: float) -> None:
    """Rebuild the sys catalog from EVERY tablet server's replicas, for a master whose data is lost.

    TSERVER_ADDRESSES: every tablet server, comma-separated host:port.  Unsafe: tables and
    tablets no tablet server holds do not come back, nor deleted tables' tombstones, tablet
    server states or the cluster id (see docs/recovery.md).
    """
    if (fs_data_dir / SYS_CATALOG_DIR).exists():
        raise IllegalState(f"{fs_data_dir} holds a sys catalog; stop the master and move its data directory away first")
    addresses = parse_address_list(tserver_addresses, TSERVER_DEFAULT_PORT)
    rebuilt = run(_rebuild(addresses, timeout_s))
    path = save_rebuild(fs_data_dir, rebuilt.write)
    for reason in rebuilt.skipped:
        click.echo(f"skipped {reason}", err=True)
    click.echo(
        f"rebuilt {len(rebuilt.tables)} tables ({', '.join(sorted(rebuilt.tables.values()))}) and "
        f"{rebuilt.tablets} tablets from {len(addresses)} tablet servers into {path}; start the master "
        f"with --fs-data-dir {fs_data_dir} and it applies {REBUILD_FILE} once it leads"
    )


async def _rebuild(addresses: list[HostPort], timeout_s: float) -> Rebuilt:
    messenger = Messenger(ssl_context=cli_ssl_context())
    try:
        request = tpb.ListTabletsRequestPB(need_metadata=True)
        answers = await asyncio.gather(
            *(messenger.call(a, LIST_TABLETS, request, timeout=timeout_s) for a in addresses), return_exceptions=True
        )
    finally:
        await messenger.close()
    failed = [f"{a}: {e}" for a, e in zip(addresses, answers, strict=True) if isinstance(e, BaseException)]
    if failed:
        raise IllegalState(f"every tablet server must answer, and these did not: {'; '.join(failed)}")
    statuses = [s for answer in answers if isinstance(answer, tpb.ListTabletsResponsePB) for s in answer.tablets]
    return rebuild_write(statuses, time.time_ns() // 1000)
