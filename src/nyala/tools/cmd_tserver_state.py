"""``nyala tserver state enter-maintenance|exit-maintenance`` and ``nyala tserver unregister``.

Kudu's ``kudu tserver state enter_maintenance|exit_maintenance`` and (1.17)
``kudu tserver unregister``; the underscore spellings work too.  Both go to the leader master,
which persists the change in the sys catalog; see docs/master.md for what is refused and why.
The commands are attached to the ``tserver`` group in ``nyala.tools.cli``.
"""

from __future__ import annotations

import click

from nyala.tools._format import UnderscoreGroup, connect_cli, handle_errors, masters_argument, timeout_option

__all__ = ["tserver_state", "tserver_unregister"]


def _uuid_argument(function: click.decorators.FC) -> click.decorators.FC:
    return click.argument("tserver_uuid", metavar="TSERVER_UUID")(function)


@click.group("state", cls=UnderscoreGroup)
def tserver_state() -> None:
    """Put tablet servers into maintenance mode and take them out."""


@tserver_state.command("enter-maintenance")
@masters_argument
@_uuid_argument
@timeout_option
@handle_errors
def enter_maintenance(master_addresses: str, tserver_uuid: str, timeout_s: float) -> None:
    """Put a tablet server into maintenance mode: while it is down, its replicas are not
    re-replicated. Entering it again is harmless."""
    with connect_cli(master_addresses, timeout_s) as client:
        changed = client.change_tserver_state(tserver_uuid, maintenance=True, timeout_s=timeout_s)
    if changed:
        click.echo(f"tablet server {tserver_uuid} entered maintenance mode")
    else:
        click.echo(f"tablet server {tserver_uuid} already was in maintenance mode")


@tserver_state.command("exit-maintenance")
@masters_argument
@_uuid_argument
@timeout_option
@handle_errors
def exit_maintenance(master_addresses: str, tserver_uuid: str, timeout_s: float) -> None:
    """Take a tablet server out of maintenance mode. Exiting when not in it is harmless."""
    with connect_cli(master_addresses, timeout_s) as client:
        changed = client.change_tserver_state(tserver_uuid, maintenance=False, timeout_s=timeout_s)
    if changed:
        click.echo(f"tablet server {tserver_uuid} exited maintenance mode")
    else:
        click.echo(f"tablet server {tserver_uuid} was not in maintenance mode")


@click.command("unregister")
@masters_argument
@_uuid_argument
@click.option(
    "--force",
    is_flag=True,
    help="Unregister it even though the catalog or its last reports still place replicas on it.",
)
@timeout_option
@handle_errors
def tserver_unregister(master_addresses: str, tserver_uuid: str, force: bool, timeout_s: float) -> None:
    """Make every master forget a dead tablet server and its maintenance state.

    Refused while the server is live, and while it holds replicas unless --force. A server that
    heartbeats again later simply registers again.
    """
    with connect_cli(master_addresses, timeout_s) as client:
        held = client.unregister_tserver(tserver_uuid, force=force, timeout_s=timeout_s)
    click.echo(f"unregistered tablet server {tserver_uuid}")
    if held:
        click.echo(f"the catalog still places {held} replicas on it")
