"""``nyala master add`` and ``nyala master remove``: change the set of masters online.

Kudu's ``kudu master add <masters> <new_master>`` and ``kudu master remove <masters>
<master>``.  Both go to the leader master (``AddMaster`` / ``RemoveMaster``, see
``nyala.master.membership``), one change at a time, and are safe to run again: a master
already added or removed is reported as such and nothing changes.  ``add`` then waits until
the new master has copied the catalog, caught up and been promoted to VOTER.  The commands
are attached to the ``master`` group in ``nyala.tools.cli``.
"""

from __future__ import annotations

import time

import click

from nyala.errors import TimedOut
from nyala.tools._format import connect_cli, handle_errors, masters_argument, timeout_option

__all__ = ["master_add", "master_remove"]

_POLL_S = 0.2


@click.command("add")
@masters_argument
@click.argument("new_master", metavar="NEW_MASTER_ADDRESS")
@click.option(
    "--wait-secs",
    type=click.FloatRange(min=0),
    default=64.0,
    show_default=True,
    help="How long to wait for the new master to catch up and become a VOTER (0: do not wait).",
)
@timeout_option
@handle_errors
def master_add(master_addresses: str, new_master: str, wait_secs: float, timeout_s: float) -> None:
    """Add the running master at NEW_MASTER_ADDRESS (host:port) to the cluster's masters.

    Start the new master first with --master-addresses naming the existing masters and itself;
    it waits until it is added, copies the sys catalog from the leader, and is promoted to
    VOTER once caught up. Running the command again is harmless.
    """
    with connect_cli(master_addresses, timeout_s) as client:
        uuid, already = client.add_master(new_master, timeout_s=timeout_s)
        click.echo(f"master {uuid} at {new_master} {'was a member already' if already else 'added as NON_VOTER'}")
        if wait_secs == 0:
            return
        deadline = time.monotonic() + wait_secs
        while True:
            entry = next((m for m in client.list_masters(timeout_s=timeout_s) if m.uuid == uuid), None)
            if entry is not None and entry.member_type == "VOTER" and not entry.error:
                click.echo(f"master {uuid} is a VOTER ({entry.role.lower()}, term {entry.term})")
                return
            if time.monotonic() > deadline:
                state = "not listed" if entry is None else f"{entry.member_type}, {entry.role}, {entry.error or 'ok'}"
                raise TimedOut(
                    f"master {uuid} was added but is not a VOTER after {wait_secs:g} s ({state}): is it running, "
                    "and has it copied the catalog? Run this command again to keep waiting"
                )
            time.sleep(_POLL_S)  # an operator's command polling the cluster, not a test


@click.command("remove")
@masters_argument
@click.argument("target", metavar="MASTER")
@timeout_option
@handle_errors
def master_remove(master_addresses: str, target: str, timeout_s: float) -> None:
    """Remove a master, named by host:port or uuid, from the cluster's masters.

    Removing the leader hands leadership to another master first. Refused for the last master
    and when the masters left would not have a live majority. Stop the removed master and
    delete its data directory afterwards. Running the command again is harmless.
    """
    with connect_cli(master_addresses, timeout_s) as client:
        uuid, already = client.remove_master(target, timeout_s=timeout_s)
    click.echo(f"master {uuid} {'was removed already' if already else 'removed'}")
