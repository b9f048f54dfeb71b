"""Shared pieces of the admin commands: master addresses, output formats, errors, progress.

Every admin command takes the master addresses first (comma-separated, Kudu's style) and
prints either readable rich tables (``--format table``, the default) or JSON for scripts
(``--format json``).  Errors from the cluster or from bad input end the command with a one-line
message and exit status 1, never a traceback.  Progress bars appear on stderr, only when it
is a terminal, so piped output stays clean.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import decimal
import functools
import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from nyala.client import Client, connect
from nyala.errors import NyalaError
from nyala.tools._tls_flags import cli_ssl_context

__all__ = [
    "UnderscoreGroup",
    "columns_option",
    "connect_cli",
    "emit_json",
    "emit_rows",
    "format_option",
    "handle_errors",
    "masters_argument",
    "progress",
    "progress_of",
    "timeout_option",
]

P = ParamSpec("P")
R = TypeVar("R")

FORMATS = ("table", "json")


class UnderscoreGroup(click.Group):
    """A command group that also takes Kudu's underscore spellings (``leader_step_down`` for
    ``leader-step-down``) without listing them in the help."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, cmd_name) or super().get_command(ctx, cmd_name.replace("_", "-"))


def masters_argument(function: Callable[P, R]) -> Callable[P, R]:
    """The first argument of every admin command: the master addresses, comma-separated."""
    return click.argument("master_addresses", metavar="MASTER_ADDRESSES")(function)


def format_option(function: Callable[P, R]) -> Callable[P, R]:
    return click.option(
        "--format",
        "output_format",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="Readable tables, or JSON for scripts.",
    )(function)


def timeout_option(function: Callable[P, R]) -> Callable[P, R]:
    return click.option(
        "--timeout-s",
        type=click.FloatRange(min=0.1),
        default=30.0,
        show_default=True,
        help="Deadline of each operation, retries included.",
    )(function)


def columns_option(available: Sequence[str], default: Sequence[str]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """``--columns a,b,c`` choosing among ``available``; Kudu's spelling ``rpc-addresses`` works too."""

    def parse(ctx: click.Context, param: click.Parameter, value: str | None) -> list[str]:
        if value is None:
            return list(default)
        chosen = [c.strip().replace("-", "_") for c in value.split(",") if c.strip()]
        unknown = [c for c in chosen if c not in available]
        if unknown or not chosen:
            raise click.BadParameter(f"unknown columns {unknown}; choose from {', '.join(available)}")
        return chosen

    return click.option(
        "--columns",
        callback=parse,
        help=f"Comma-separated columns to show, from: {', '.join(available)}.",
    )


def handle_errors(function: Callable[P, R]) -> Callable[P, R]:
    """Turn Nyala errors into a clear message and exit status 1 (no traceback)."""

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except NyalaError as exc:
            raise click.ClickException(f"{_error_name(exc)}: {exc}") from exc

    return wrapper


def _error_name(exc: BaseException) -> str:
    name = type(exc).__name__
    return "".join(" " + c.lower() if c.isupper() else c for c in name).strip()


def connect_cli(master_addresses: str, timeout_s: float) -> Client:
    """A client for a command; bad addresses or unreachable masters become clear errors."""
    return connect(master_addresses, timeout_s=timeout_s, ssl_context=cli_ssl_context())


def to_jsonable(value: Any) -> Any:
    """Cell values as JSON: dates and times in ISO 8601, decimals as strings, bytes in base64."""
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value


def emit_json(value: Any) -> None:
    click.echo(json.dumps(to_jsonable(value), indent=2))


def emit_rows(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    output_format: str,
    *,
    title: str | None = None,
) -> None:
    """Print rows as a rich table or as a JSON list of objects with ``columns``."""
    if output_format == "json":
        emit_json([{c: row.get(c) for c in columns} for row in rows])
        return
    table = Table(title=title, title_justify="left", header_style="bold")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(_cell(row.get(c)) for c in columns))
    Console(soft_wrap=False).print(table)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return "\n".join(_cell(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


@contextlib.contextmanager
def progress(description: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr (only on a terminal); yields ``advance(n)``."""
    if not sys.stderr.isatty():
        yield lambda n: None
        return
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


@contextlib.contextmanager
def progress_of(description: str) -> Iterator[Callable[[int, int], None]]:
    """A bar of bytes on stderr (only on a terminal) whose total is learnt on the way; yields
    ``update(done, total)``."""
    if not sys.stderr.isatty():
        yield lambda done, total: None
        return
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total or None)
