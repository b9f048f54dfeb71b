"""``nyala cluster ksck``: is the cluster healthy, and do the replicas hold the same rows?
``nyala cluster rebalance``: move replicas until the cluster is balanced (the work is in
:mod:`nyala.tools.rebalancer`, the figures in :mod:`nyala.tools.rebalance_report`)."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

import click
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

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
from nyala.tools.rebalance_report import distribution_report
from nyala.tools.rebalancer import (
    Controls,
    Listener,
    Outcome,
    Rebalancer,
    RebalanceSettings,
    RunResult,
    StopReason,
    Tally,
)

__all__ = ["cluster"]


@click.group()
def cluster() -> None:
    """Check the health of a whole cluster, and balance its replicas."""


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


# --- rebalance ------------------------------------------------------------------------------------

#: Exit status of a rebalancing run stopped by Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130


def _names(value: str | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(dict.fromkeys(n.strip() for n in value.split(",")))


@cluster.command("rebalance")
@masters_argument
@format_option
@timeout_option
@click.option("--report-only", is_flag=True, help="Print the distribution, its skew and the plan; move nothing.")
@click.option("--tables", "table_names", default=None, help="Balance only these tables (names separated by commas).")
@click.option(
    "--ignored-tservers",
    default=None,
    help="Tablet server uuids (separated by commas) to leave out, with their replicas; dead ones may be named.",
)
@click.option(
    "--move-replicas-from-ignored-tservers",
    is_flag=True,
    help="Drain the --ignored-tservers instead (they must be live): move every replica off them (decommissioning).",
)
@click.option(
    "--enable-range-rebalancing/--disable-range-rebalancing",
    default=True,
    show_default=True,
    help="Balance each range of a table (its hash buckets together) on its own, not only each table.",
)
@click.option("--disable-policy-fixer", is_flag=True, help="Do not move replicas to fix placement policy violations.")
@click.option(
    "--disable-cross-location-rebalancing", is_flag=True, help="Do not move replicas between locations to balance them."
)
@click.option(
    "--disable-intra-location-rebalancing",
    is_flag=True,
    help="Do not move replicas between the servers of one location.",
)
@click.option(
    "--output-replica-distribution-details",
    is_flag=True,
    help="Also print each table's replicas per server and every tablet that violates the placement policy.",
)
@click.option(
    "--max-moves-per-server",
    type=int,
    default=5,
    show_default=True,
    help="Moves at a time from one server (and, counted apart, to one server).",
)
@click.option(
    "--max-run-time-sec",
    type=float,
    default=0.0,
    show_default=True,
    help="Start no new round of moves after this many seconds; 0: no limit.",
)
@click.option(
    "--move-timeout-sec",
    type=float,
    default=600.0,
    show_default=True,
    help="Give up on a move after this many seconds (undoing it while its destination is not yet a voter).",
)
@handle_errors
def rebalance_command(
    master_addresses: str,
    output_format: str,
    timeout_s: float,
    report_only: bool,
    table_names: str | None,
    ignored_tservers: str | None,
    move_replicas_from_ignored_tservers: bool,
    enable_range_rebalancing: bool,
    disable_policy_fixer: bool,
    disable_cross_location_rebalancing: bool,
    disable_intra_location_rebalancing: bool,
    output_replica_distribution_details: bool,
    max_moves_per_server: int,
    max_run_time_sec: float,
    move_timeout_sec: float,
) -> None:
    """Move replicas until every table is balanced across and within locations.

    Each round takes a fresh snapshot of the cluster, plans (drain the servers being
    decommissioned, fix placement policy violations, balance across locations, then within
    each), and carries out a few moves at a time as 3-4-3 moves the master completes: the
    destination is added as a non-voter, caught up and promoted, and only then is the source
    evicted. It stops when no move is left, or --max-run-time-sec has passed. A failed move is
    reported and the run goes on. Ctrl-C stops starting moves and waits for those in flight
    (again: stops waiting; the master completes them). Exits 1 when a move failed, 130 when
    interrupted.
    """
    settings = RebalanceSettings(
        tables=_names(table_names),
        ignored_tservers=frozenset(_names(ignored_tservers) or ()),
        move_replicas_from_ignored_tservers=move_replicas_from_ignored_tservers,
        enable_range_rebalancing=enable_range_rebalancing,
        disable_policy_fixer=disable_policy_fixer,
        disable_cross_location_rebalancing=disable_cross_location_rebalancing,
        disable_intra_location_rebalancing=disable_intra_location_rebalancing,
        max_moves_per_server=max_moves_per_server,
        max_run_time_s=max_run_time_sec,
        move_timeout_s=move_timeout_sec,
        timeout_s=timeout_s,
    )
    details = output_replica_distribution_details
    with connect_cli(master_addresses, timeout_s) as client:
        if report_only:
            rebalancer = Rebalancer(client.aio, settings)
            snapshot, model, plan = client.run(rebalancer.plan())
            report = distribution_report(snapshot, model, plan, details=details)
            if output_format == "json":
                emit_json(report)
            else:
                _print_distribution(report, with_plan=True)
            return
        controls = Controls()
        with _progress_display() as listener, _interrupts(controls):
            rebalancer = Rebalancer(client.aio, settings, controls=controls, listener=listener)
            result = client.run(rebalancer.run())
        after: dict[str, Any] | None = None
        if not controls.abandon.is_set():
            snapshot, model, plan = client.run(rebalancer.plan())
            after = distribution_report(snapshot, model, plan, details=details)
    if output_format == "json":
        emit_json({"result": _result_dict(result), "after": after})
    else:
        _print_result(result)
        if after is not None:
            _print_distribution(after, with_plan=False)
    if result.reason is StopReason.INTERRUPTED:
        raise SystemExit(EXIT_INTERRUPTED)
    if result.count(Outcome.FAILED) or result.reason in (StopReason.ONLY_FAILED_LEFT, StopReason.BUSY):
        raise SystemExit(1)


@contextlib.contextmanager
def _interrupts(controls: Controls) -> Iterator[None]:
    """Ctrl-C while moves run: the first stops new moves, the second stops waiting for those in
    flight; a third is an ordinary KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        if controls.interrupt() == 1:
            click.echo(
                "interrupted: no new move starts; waiting for the moves in flight (Ctrl-C again to stop waiting)",
                err=True,
            )
        else:
            click.echo("no longer waiting: the master completes the moves in flight", err=True)
            signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _progress_display() -> Iterator[Listener]:
    """Each round and move as a line on stderr, and on a terminal a live line of the counts."""
    if not sys.stderr.isatty():

        def plain(message: str, tally: Tally) -> None:
            click.echo(message, err=True)

        yield plain
        return
    console = Console(stderr=True)
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True
    ) as bar:
        task = bar.add_task("rebalancing")

        def live(message: str, tally: Tally) -> None:
            bar.console.print(message, markup=False, highlight=False)
            bar.update(
                task,
                description=f"round {tally.rounds}: {tally.done} moves done, {tally.in_flight} in flight, "
                f"{tally.failed} failed",
            )

        yield live


def _print_distribution(report: dict[str, Any], *, with_plan: bool) -> None:
    emit_rows(report["tservers"], ["uuid", "address", "location", "state", "replicas"], "table", title="Tablet servers")
    emit_rows(report["locations"], ["location", "tservers", "replicas", "load", "skew"], "table", title="Locations")
    emit_rows(
        report["tables"],
        [
            "table",
            "tablets",
            "rf",
            "location_skew",
            "server_skew",
            "violations",
        ],
        "table",
        title="Tables",
    )
    if "replicas_per_server" in report:
        columns = ["table", "uuid", "address", "location", "replicas"]
        emit_rows(report["replicas_per_server"], columns, "table", title="Replicas per server")
        columns = ["tablet", "table", "replicas_per_location", "limit", "fixable"]
        rows = [
            {**v, "replicas_per_location": [f"{loc}: {n}" for loc, n in v["replicas_per_location"].items()]}
            for v in report["violations"]
        ]
        emit_rows(rows, columns, "table", title="Placement policy violations")
    if not with_plan:
        return
    if report["moves"]:
        columns = ["tablet", "table", "from", "from_location", "to", "to_location", "phase"]
        emit_rows(report["moves"], columns, "table", title=f"{len(report['moves'])} moves planned")
    else:
        click.echo("no move is needed: the cluster is balanced")
    if report["unfixable"]:
        click.echo(f"{len(report['unfixable'])} tablets violate the placement policy and no layout can fix it:")
        for entry in report["unfixable"]:
            click.echo(f"  - tablet {entry['tablet']} of table {entry['table']!r}")


def _result_dict(result: RunResult) -> dict[str, Any]:
    return {
        "reason": result.reason.name,
        "explanation": result.reason.value,
        "rounds": result.rounds,
        "seconds": round(result.seconds, 1),
        "moves_left": result.moves_left,
        **{outcome.name.lower(): result.count(outcome) for outcome in Outcome},
        "moves": [
            {
                "tablet": r.move.tablet_id,
                "table": r.table,
                "from": r.move.from_uuid,
                "to": r.move.to_uuid,
                "phase": r.move.phase,
                "outcome": r.outcome.name,
                "detail": r.detail,
                "seconds": round(r.seconds, 1),
            }
            for r in result.results
        ],
    }


def _print_result(result: RunResult) -> None:
    counts = ", ".join(f"{result.count(o)} {o.value}" for o in Outcome if result.count(o))
    left = "unknown" if result.moves_left is None else str(result.moves_left)
    click.echo(
        f"{result.reason.value}; {result.rounds} rounds in {result.seconds:.1f} s: {counts or 'no moves'}; "
        f"moves left: {left}"
    )
    for r in result.results:
        if r.outcome in (Outcome.FAILED, Outcome.LEFT_TO_MASTER):
            click.echo(f"  - {r.outcome.value}: tablet {r.move.tablet_id} of {r.table!r}: {r.detail}", err=True)
