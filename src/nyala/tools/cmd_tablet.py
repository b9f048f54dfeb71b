"""``nyala tablet change-config|leader-step-down|move-replica|find-most-up-to-date MASTER_ADDRESSES TABLET_ID ...``.

Kudu's ``kudu tablet`` verbs.  Each command finds the tablet's leader through the masters,
acts on it with a compare-and-set on the committed config it saw, follows the leader when
leadership moves, and prints the committed config that results (``--format json`` for
scripts).  The RPC work is in :mod:`nyala.tools.replica_ops`.  Kudu's underscore spellings
(``change_config add_replica``, ``leader_step_down``, ``move_replica``) work too.

``find-most-up-to-date`` is the first step of recovering a tablet that lost a majority of its
replicas (docs/recovery.md): it asks every replica the masters know for its log position and
ranks them, so the operator forces the new config on the survivor that lost the least.
"""

from __future__ import annotations

import click

from nyala.client.async_client import AsyncClient
from nyala.consensus.core import ChangeKind, ConfigChange, MemberType, RaftConfig
from nyala.tools._format import (
    UnderscoreGroup,
    connect_cli,
    emit_json,
    emit_rows,
    format_option,
    handle_errors,
    masters_argument,
    progress,
    timeout_option,
)
from nyala.tools.replica_ops import TabletOps, config_rows, member_type, most_up_to_date, move_replica

__all__ = ["tablet"]

REPLICA_TYPES = click.Choice(["VOTER", "NON_VOTER"], case_sensitive=False)
UP_TO_DATE_COLUMNS = (
    "rank",
    "uuid",
    "address",
    "role",
    "term",
    "last_term",
    "last_index",
    "commit_index",
    "applied_index",
    "error",
)


@click.group(cls=UnderscoreGroup)
def tablet() -> None:
    """Change a tablet's replicas and leadership (Raft config changes)."""


@tablet.group("change-config", cls=UnderscoreGroup)
def change_config() -> None:
    """Add, remove or retype one replica of a tablet."""


def _print_config(
    output_format: str,
    message: str,
    tablet_id: str,
    config: RaftConfig,
    leader: str,
    addresses: dict[str, str],
    steps: list[str] | None = None,
) -> None:
    rows = config_rows(config, leader, addresses)
    if output_format == "json":
        answer = {"tablet_id": tablet_id, "leader": leader, "opid_index": config.opid_index, "config": rows}
        emit_json(answer if steps is None else {**answer, "steps": steps})
        return
    click.echo(message)
    emit_rows(
        rows,
        ["uuid", "address", "member_type", "promote", "replace", "leader"],
        "table",
        title=f"committed config of tablet {tablet_id} (op index {config.opid_index})",
    )


async def _change(
    client: AsyncClient, tablet_id: str, change: ConfigChange, timeout_s: float
) -> tuple[RaftConfig, str, dict[str, str]]:
    ops = TabletOps(client, tablet_id, timeout_s)

    def done(config: RaftConfig) -> bool:
        member = config.member(change.peer_id)
        if change.kind is ChangeKind.REMOVE_PEER:
            return member is None
        if change.kind is ChangeKind.ADD_PEER and change.promote:
            return member is not None  # the leader may have promoted it already
        return member is not None and member.member_type is change.member_type

    config, leader = await ops.change([change], done=done)
    return config, leader, await ops.servers()


@change_config.command("add-replica")
@masters_argument
@click.argument("tablet_id")
@click.argument("tserver_uuid")
@click.argument("replica_type", type=REPLICA_TYPES)
@click.option(
    "--promote",
    is_flag=True,
    help="Mark the new NON_VOTER for promotion (Kudu's promote attribute): the leader makes it a "
    "VOTER once it has caught up.  The way to grow a tablet by one voter without waiting on it.",
)
@format_option
@timeout_option
@handle_errors
def add_replica(
    master_addresses: str,
    tablet_id: str,
    tserver_uuid: str,
    replica_type: str,
    promote: bool,
    output_format: str,
    timeout_s: float,
) -> None:
    """Add the tablet server TSERVER_UUID to the tablet's config as a VOTER or NON_VOTER.

    The new replica gets the tablet's data from the leader (a tablet copy when it lacks the
    tablet).  To add a voter, prefer ``NON_VOTER --promote``: the tablet's majority does not
    include the new replica until it has caught up.  To replace a replica safely, prefer
    ``move-replica``.
    """
    kind = member_type(replica_type)
    if promote and kind is not MemberType.NON_VOTER:
        raise click.UsageError("--promote is for a NON_VOTER (a VOTER has nothing to be promoted to)")
    change = ConfigChange(ChangeKind.ADD_PEER, tserver_uuid, kind, promote=promote, replace=False)
    with connect_cli(master_addresses, timeout_s) as client:
        config, leader, servers = client.run(_change(client.aio, tablet_id, change, timeout_s))
    message = f"added {tserver_uuid} to tablet {tablet_id} as a {kind.name}"
    if promote:
        message += ", to be promoted to VOTER once it has caught up"
    _print_config(output_format, message, tablet_id, config, leader, servers)


@change_config.command("remove-replica")
@masters_argument
@click.argument("tablet_id")
@click.argument("tserver_uuid")
@format_option
@timeout_option
@handle_errors
def remove_replica(
    master_addresses: str, tablet_id: str, tserver_uuid: str, output_format: str, timeout_s: float
) -> None:
    """Remove the replica on TSERVER_UUID from the tablet's config.

    Removing the leader makes it hand leadership to another voter first; the tool then
    removes it through the new leader.
    """
    change = ConfigChange(ChangeKind.REMOVE_PEER, tserver_uuid)
    with connect_cli(master_addresses, timeout_s) as client:
        config, leader, servers = client.run(_change(client.aio, tablet_id, change, timeout_s))
    _print_config(output_format, f"removed {tserver_uuid} from tablet {tablet_id}", tablet_id, config, leader, servers)


@change_config.command("change-replica-type")
@masters_argument
@click.argument("tablet_id")
@click.argument("tserver_uuid")
@click.argument("replica_type", type=REPLICA_TYPES)
@format_option
@timeout_option
@handle_errors
def change_replica_type(
    master_addresses: str, tablet_id: str, tserver_uuid: str, replica_type: str, output_format: str, timeout_s: float
) -> None:
    """Make the replica on TSERVER_UUID a VOTER or a NON_VOTER.

    A leader asked to become a NON_VOTER hands leadership to another voter first.
    """
    kind = member_type(replica_type)
    change = ConfigChange(ChangeKind.MODIFY_PEER, tserver_uuid, kind)
    with connect_cli(master_addresses, timeout_s) as client:
        config, leader, servers = client.run(_change(client.aio, tablet_id, change, timeout_s))
    _print_config(
        output_format, f"{tserver_uuid} is now a {kind.name} of tablet {tablet_id}", tablet_id, config, leader, servers
    )


@tablet.command("leader-step-down")
@masters_argument
@click.argument("tablet_id")
@click.option(
    "--abrupt",
    is_flag=True,
    help="Step down at once (a new term; the old leader sits out the next election) instead of "
    "handing leadership over gracefully to a caught-up voter.",
)
@click.option("--new-leader-uuid", default="", help="The voter to hand leadership to (graceful only).")
@format_option
@timeout_option
@handle_errors
def leader_step_down(
    master_addresses: str, tablet_id: str, abrupt: bool, new_leader_uuid: str, output_format: str, timeout_s: float
) -> None:
    """Make the tablet's leader step down, and wait for the next leader.

    Graceful (the default, Kudu's GRACEFUL): the leader stops taking writes, brings the new
    leader (--new-leader-uuid, else the most caught-up voter) up to date and tells it to
    campaign; if that does not happen within an election timeout it leads on.  --abrupt
    (Kudu's ABRUPT): the leader steps down at once and the others elect a leader.
    """
    if abrupt and new_leader_uuid:
        raise click.UsageError("--new-leader-uuid is for a graceful step-down; leave out --abrupt")

    async def step(client: AsyncClient) -> tuple[str, str, int]:
        ops = TabletOps(client, tablet_id, timeout_s)
        old = await ops.leader()
        new = await ops.step_down(old, abrupt=abrupt, new_leader=new_leader_uuid)
        return old.server_uuid, new.server_uuid, new.state.current_term

    with connect_cli(master_addresses, timeout_s) as client:
        old, new, term = client.run(step(client.aio))
    if output_format == "json":
        emit_json({"tablet_id": tablet_id, "old_leader": old, "new_leader": new, "term": term})
        return
    click.echo(f"tablet {tablet_id}: leadership moved from {old} to {new} (term {term})")


@tablet.command("move-replica")
@masters_argument
@click.argument("tablet_id")
@click.argument("from_uuid")
@click.argument("to_uuid")
@click.option(
    "--timeout-sec",
    "timeout_s",
    type=click.FloatRange(min=1),
    default=600.0,
    show_default=True,
    help="How long the whole move may take, the destination's catch-up included.",
)
@format_option
@handle_errors
def move_replica_command(
    master_addresses: str, tablet_id: str, from_uuid: str, to_uuid: str, timeout_s: float, output_format: str
) -> None:
    """Move the tablet's replica from server FROM_UUID to server TO_UUID (Kudu's 3-4-3 move).

    One config change marks the source for replacement and adds the destination as a
    NON_VOTER to be promoted; once the leader has promoted the caught-up destination to
    VOTER, a leading source steps down and the source is removed.  Running it again after an
    interruption continues where it stopped.
    """
    messages: list[str] = []

    def report(message: str) -> None:
        messages.append(message)
        if output_format != "json":
            click.echo(message)

    with connect_cli(master_addresses, timeout_s) as client, progress(f"{to_uuid} catching up") as advance:
        seen = [0]

        def caught_up(done: int, total: int) -> None:
            advance(max(0, done - seen[0]))
            seen[0] = max(seen[0], done)

        async def move(aio: AsyncClient) -> tuple[RaftConfig, str, dict[str, str]]:
            ops = TabletOps(aio, tablet_id, timeout_s)
            config, leader = await move_replica(ops, from_uuid, to_uuid, report, caught_up)
            return config, leader, await ops.servers()

        config, leader, servers = client.run(move(client.aio))
    message = f"moved tablet {tablet_id} from {from_uuid} to {to_uuid}"
    _print_config(output_format, message, tablet_id, config, leader, servers, messages)


@tablet.command("find-most-up-to-date")
@masters_argument
@click.argument("tablet_id")
@format_option
@timeout_option
@handle_errors
def find_most_up_to_date(master_addresses: str, tablet_id: str, output_format: str, timeout_s: float) -> None:
    """Rank the tablet's replicas by how up to date their logs are, most up-to-date first.

    Asks every replica in the masters' view of the tablet's config for its last log entry's
    term and index and ranks them as Raft's vote rule does: the higher last term first, then
    the higher last index.  Replicas that do not answer are listed last with the error.  After
    a tablet lost a majority for good, force the survivors' config
    (``nyala remote-replica unsafe-change-config``) on the replica ranked first.
    """

    async def rank(client: AsyncClient) -> list[dict[str, object]]:
        return await most_up_to_date(client, tablet_id, timeout_s)

    with connect_cli(master_addresses, timeout_s) as client:
        rows = client.run(rank(client.aio))
    if output_format == "json":
        emit_json({"tablet_id": tablet_id, "replicas": rows})
        return
    answered = [r for r in rows if r["rank"] is not None]
    title = f"replicas of tablet {tablet_id}, most up-to-date first ({answered[0]['ranked_by'] if answered else '-'})"
    emit_rows(rows, list(UP_TO_DATE_COLUMNS), "table", title=title)
    if not answered:
        click.echo("no replica answered", err=True)
        return
    best = answered[0]
    click.echo(
        f"most up-to-date: {best['uuid']} at {best['address']} "
        f"(last entry: term {best['last_term']}, index {best['last_index']})"
    )
