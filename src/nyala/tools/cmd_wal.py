"""``nyala wal``: inspect write-ahead log directories."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import click

from nyala.errors import Corruption, IOFailure, NotFound
from nyala.wal.dump import SegmentReport, inspect_log

__all__ = ["wal"]


@click.group()
def wal() -> None:
    """Inspect write-ahead log directories."""


@wal.command()
@click.argument("directory", type=click.Path(file_okay=False, dir_okay=True))
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--entries/--no-entries", default=True, show_default=True, help="List every entry, not just segments.")
def dump(directory: str, output_format: str, entries: bool) -> None:
    """Print the segments and entries of the log in DIRECTORY, verifying every checksum.

    Exits with status 1 and names the file and byte offset when the log is corrupt.  Nothing is
    changed: a torn tail (which opening the log would truncate) is only reported.
    """
    reports: list[SegmentReport] = []
    try:
        for report in inspect_log(directory, with_records=entries):
            reports.append(report)
            if output_format == "text":
                _print_segment(report)
    except (Corruption, IOFailure, NotFound) as exc:
        if output_format == "json":
            click.echo(json.dumps(_as_json(directory, reports, str(exc)), indent=2))
        raise click.ClickException(f"{type(exc).__name__.lower()}: {exc}") from exc
    if output_format == "json":
        click.echo(json.dumps(_as_json(directory, reports, None), indent=2))
    else:
        _print_summary(reports)


def _print_segment(report: SegmentReport) -> None:
    state = "closed" if report.closed else "open"
    span = f"{report.min_index}..{report.max_index}" if report.num_entries else "-"
    click.echo(
        f"segment {report.seqno} ({report.path}): {report.size_bytes} bytes, {state}, "
        f"{report.num_batches} batches, {report.num_entries} entries, indexes {span}, tablet {report.tablet_id}"
    )
    if report.torn_offset is not None:
        click.echo(f"  torn tail at byte offset {report.torn_offset} (opening the log truncates it)")
    if report.records:
        click.echo(f"  {'term':>10} {'index':>12} {'type':>6} {'size':>10} {'batch':>10}")
    for record in report.records:
        if record.kind == "entry":
            click.echo(
                f"  {record.term:>10} {record.index:>12} {record.type:>6} {record.size:>10} {record.batch_offset:>10}"
            )
        else:
            click.echo(f"  truncate after index {record.index} (batch {record.batch_offset})")


def _print_summary(reports: list[SegmentReport]) -> None:
    entries = sum(r.num_entries for r in reports)
    segments = f"{len(reports)} segment" + ("" if len(reports) == 1 else "s")
    click.echo(f"{segments}, {entries} entries written; every checksum verified")


def _as_json(directory: str, reports: list[SegmentReport], error: str | None) -> dict[str, Any]:
    return {"directory": directory, "segments": [dataclasses.asdict(r) for r in reports], "error": error}
