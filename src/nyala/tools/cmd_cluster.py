"""``nyala cluster ksck MASTER_ADDRESSES [--tables T1,T2] [--checksum-scan]``: is the cluster
healthy, and do the replicas hold the same rows?  Non-zero exit when not."""

from __future__ import annotations

import click

from nyala.tools._format import (
    connect_cli,
    emit_json,
    emit_rows,
    format_option,
    handle_errors,
    masters_argument,
    timeout_option,
)
from nyala.tools._format import progress as progress_bar
from nyala.tools.ksck import NO_LOCATION, KsckReport, ReplicaCheck, TabletStatus, ksck

__all__ = ["cluster"]


@click.group()
def cluster() -> None:
    """Check the health of a whole cluster."""


@cluster.command("ksck")
@masters_argument
@format_option
@timeout_option
@click.option("--tablets/--no-tablets", default=False, help="List every tablet, not only the unhealthy ones.")
@click.option("--tables", "table_names", default=None, help="Check only these tables (names separated by commas).")
@click.option(
    "--checksum-scan",
    is_flag=True,
    default=False,
    help="Also checksum every replica's rows at the same Raft index and report replicas that differ.",
)
@handle_errors
def ksck_command(
    master_addresses: str,
    output_format: str,
    timeout_s: float,
    tablets: bool,
    table_names: str | None,
    checksum_scan: bool,
) -> None:
    """Check masters, tablet servers and every tablet's replicas.

    Masters must all be reachable and agree on one leader; tablet servers must be live; every
    tablet must be HEALTHY: a leader, every voter healthy and as many as the replication
    factor, and the master's Raft config (otherwise RECOVERING, UNDER_REPLICATED,
    CONSENSUS_MISMATCH or UNAVAILABLE, with a reason per replica).  With locations, every
    tablet must meet the placement policy and every location must be reachable and about as
    fast as the others (warnings).  With --checksum-scan, every replica of every tablet
    checksums its rows at the same Raft index (writes may go on) and replicas that differ are
    problems.  Exits with status 1 when anything is wrong.
    """
    names = table_names.split(",") if table_names is not None else None
    with connect_cli(master_addresses, timeout_s) as client, progress_bar("checking the cluster"):
        report = client.run(ksck(client.aio, timeout_s=timeout_s, tables=names, checksum_scan=checksum_scan))
    if output_format == "json":
        emit_json(report.as_dict())
    else:
        _print(report, tablets)
    if not report.ok:
        raise SystemExit(1)


def _print(report: KsckReport, all_tablets: bool) -> None:
    masters = [
        {"address": m.address, "role": m.role, "leader": m.leader_address, "error": m.error} for m in report.masters
    ]
    emit_rows(masters, ["address", "role", "leader", "error"], "table", title="Masters")
    servers = [
        {
            "uuid": s.uuid,
            "address": s.rpc_addresses,
            "location": s.location or NO_LOCATION,
            "live": s.live,
            "replicas": s.num_live_replicas,
            "rtt ms": _ms(report.rtt_ms.get(s.uuid)),
        }
        for s in report.tservers
    ]
    emit_rows(servers, ["uuid", "address", "location", "live", "replicas", "rtt ms"], "table", title="Tablet servers")
    locations = [
        {
            "location": loc.location,
            "tservers": loc.tservers,
            "live": loc.live_tservers,
            "replicas": loc.replicas,
            "rtt ms": _ms(loc.rtt_ms),
        }
        for loc in report.locations
    ]
    emit_rows(locations, ["location", "tservers", "live", "replicas", "rtt ms"], "table", title="Locations")
    tables = [{"table": t.name, "status": t.status.name, "tablets": t.num_tablets} | t.counts for t in report.tables]
    emit_rows(tables, ["table", "status", "tablets", *(s.name for s in TabletStatus)], "table", title="Tables")
    shown = [t for t in report.tablets if all_tablets or t.status is not TabletStatus.HEALTHY]
    if shown:
        rows = [
            {
                "table": t.table,
                "tablet": t.tablet_id,
                "status": t.status.name,
                "replicas": [_replica_line(r) for r in t.replicas],
            }
            for t in shown
        ]
        emit_rows(rows, ["table", "tablet", "status", "replicas"], "table", title="Tablets")
    if report.checksums:
        checksums = [
            {
                "table": t.table,
                "tablet": t.tablet_id,
                "index": t.marker_index,
                "result": t.result,
                "replicas": [
                    f"{r.address or r.uuid} {r.error or f'{r.checksum:#018x} ({r.rows} rows)'}" for r in t.replicas
                ]
                or [t.error],
            }
            for t in report.checksums
        ]
        emit_rows(checksums, ["table", "tablet", "index", "result", "replicas"], "table", title="Checksums")
    if report.ok:
        click.echo("OK: the cluster is healthy")
        return
    if report.problems:
        click.echo(f"{len(report.problems)} problems found:", err=True)
        for problem in report.problems:
            click.echo(f"  - {problem}", err=True)
    if report.warnings:
        click.echo(f"{len(report.warnings)} warnings:", err=True)
        for warning in report.warnings:
            click.echo(f"  - WARNING: {warning}", err=True)


def _replica_line(r: ReplicaCheck) -> str:
    """``address STATE ROLE MEMBER_TYPE HEALTH: reasons``."""
    line = f"{r.address or r.uuid} {r.state} {r.role} {r.member_type} {r.health}"
    return f"{line}: {'; '.join(r.reasons)}" if r.reasons else line


def _ms(value: float | None) -> str:
    return "unreachable" if value is None else f"{value:.2f}"
